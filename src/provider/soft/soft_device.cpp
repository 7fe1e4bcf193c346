#include "provider/soft/soft_device.hpp"

#include <dlfcn.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

namespace arpma::provider {
namespace {

// libibverbs' own constructor for provider contexts: it installs its dummy
// ops (every verb EOPNOTSUPP) and marks the context extended, so both the
// library's entry points (ibv_alloc_pd, ibv_query_device, ...) and the inline
// wrappers (ibv_post_send, ibv_poll_cq, ibv_query_device_ex, ...) find a
// function to call. It is private ABI, so it is looked up at run time, by
// version, and a context of our own with stubs is the fallback.
using init_context_fn = void* (*)(ibv_device*, int, std::size_t, verbs_context*, std::uint32_t);

init_context_fn libibverbs_initializer() noexcept {
  return reinterpret_cast<init_context_fn>(
      ::dlvsym(RTLD_DEFAULT, "_verbs_init_and_alloc_context", "IBVERBS_PRIVATE_34"));
}

// Room for verbs_device's fields after the ibv_device (ops, refcount, list,
// sysfs, capabilities: well under this).
constexpr std::size_t device_tail = 512;

int no_poll_cq(ibv_cq*, int, ibv_wc*) { return -EOPNOTSUPP; }
int no_req_notify_cq(ibv_cq*, int) { return EOPNOTSUPP; }
int no_post_send(ibv_qp*, ibv_send_wr* wr, ibv_send_wr** bad) {
  if (bad != nullptr) *bad = wr;
  return EOPNOTSUPP;
}
int no_post_recv(ibv_qp*, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  if (bad != nullptr) *bad = wr;
  return EOPNOTSUPP;
}
int no_post_srq_recv(ibv_srq*, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  if (bad != nullptr) *bad = wr;
  return EOPNOTSUPP;
}
ibv_mw* no_alloc_mw(ibv_pd*, ibv_mw_type) {
  errno = EOPNOTSUPP;
  return nullptr;
}
int no_bind_mw(ibv_qp*, ibv_mw*, ibv_mw_bind*) { return EOPNOTSUPP; }
int no_dealloc_mw(ibv_mw*) { return EOPNOTSUPP; }

void install_stubs(ibv_context& c) noexcept {
  c.ops.poll_cq = no_poll_cq;
  c.ops.req_notify_cq = no_req_notify_cq;
  c.ops.post_send = no_post_send;
  c.ops.post_recv = no_post_recv;
  c.ops.post_srq_recv = no_post_srq_recv;
  c.ops.alloc_mw = no_alloc_mw;
  c.ops.bind_mw = no_bind_mw;
  c.ops.dealloc_mw = no_dealloc_mw;
}

}  // namespace

soft_device::soft_device()
    : device_(std::make_unique<std::byte[]>(sizeof(ibv_device) + device_tail)) {
  auto* dev = new (device_.get()) ibv_device{};
  dev->node_type = IBV_NODE_UNKNOWN;
  dev->transport_type = IBV_TRANSPORT_UNKNOWN;
  std::strncpy(dev->name, "arpma_soft", sizeof dev->name - 1);
  if (init_context_fn init = libibverbs_initializer()) {
    from_libibverbs_ = init(dev, -1, sizeof(verbs_context), nullptr, 0);
    if (from_libibverbs_ != nullptr) {
      context_ = &static_cast<verbs_context*>(from_libibverbs_)->context;
      // The dummy poll_cq returns EOPNOTSUPP as a positive count: a caller
      // would read that many completions. A negative count is an error.
      context_->ops.poll_cq = no_poll_cq;
      return;
    }
  }
  own_ = std::make_unique<std::byte[]>(sizeof(verbs_context));
  auto* vctx = new (own_.get()) verbs_context{};
  context_ = &vctx->context;
  context_->device = dev;
  context_->cmd_fd = -1;
  context_->async_fd = -1;
  install_stubs(*context_);
}

soft_device::~soft_device() {
  if (from_libibverbs_ == nullptr) return;
  // What verbs_uninit_context frees, without the device reference drop
  // (ours is not a libibverbs device: nothing to uninitialise).
  auto* vctx = static_cast<verbs_context*>(from_libibverbs_);
  std::free(vctx->priv);        // NOLINT(cppcoreguidelines-no-malloc): allocated by libibverbs
  std::free(from_libibverbs_);  // NOLINT(cppcoreguidelines-no-malloc)
}

}  // namespace arpma::provider

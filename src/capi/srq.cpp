// rpma_srq_cfg_* / rpma_srq_*: librpma 1.3's shared receive queue
// (src/srq_cfg.c, src/srq.c) over arpma::srq, with the same argument checks.
#include <librpma.h>

#include "arpma/error.hpp"
#include "capi/objects.hpp"
#include "core/srq_state.hpp"
#include "support/log.hpp"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <new>

// As rpma_conn_cfg (built with ATOMIC_OPERATIONS_SUPPORTED): atomic fields.
struct rpma_srq_cfg {
  std::atomic<std::uint32_t> rq_size{arpma::srq_config{}.rq_size};
  std::atomic<std::uint32_t> rcq_size{arpma::srq_config{}.rcq_size};
};

extern "C" {

int rpma_srq_cfg_new(struct rpma_srq_cfg** cfg_ptr) {
  if (cfg_ptr == nullptr) return RPMA_E_INVAL;
  auto* cfg = arpma::capi::new_handle<rpma_srq_cfg>("alloc rpma_srq_cfg");
  if (cfg == nullptr) return RPMA_E_NOMEM;
  *cfg_ptr = cfg;
  return 0;
}

int rpma_srq_cfg_delete(struct rpma_srq_cfg** cfg_ptr) {
  if (cfg_ptr == nullptr) return RPMA_E_INVAL;
  if (*cfg_ptr == nullptr) return 0;
  delete *cfg_ptr;
  *cfg_ptr = nullptr;
  return 0;
}

int rpma_srq_cfg_set_rq_size(struct rpma_srq_cfg* cfg, uint32_t rq_size) {
  if (cfg == nullptr) return RPMA_E_INVAL;
  cfg->rq_size.store(rq_size);
  return 0;
}

int rpma_srq_cfg_get_rq_size(const struct rpma_srq_cfg* cfg, uint32_t* rq_size) {
  if (cfg == nullptr || rq_size == nullptr) return RPMA_E_INVAL;
  *rq_size = cfg->rq_size.load();
  return 0;
}

int rpma_srq_cfg_set_rcq_size(struct rpma_srq_cfg* cfg, uint32_t rcq_size) {
  if (cfg == nullptr) return RPMA_E_INVAL;
  cfg->rcq_size.store(rcq_size);
  return 0;
}

int rpma_srq_cfg_get_rcq_size(const struct rpma_srq_cfg* cfg, uint32_t* rcq_size) {
  if (cfg == nullptr || rcq_size == nullptr) return RPMA_E_INVAL;
  *rcq_size = cfg->rcq_size.load();
  return 0;
}

int rpma_srq_new(struct rpma_peer* peer, struct rpma_srq_cfg* cfg, struct rpma_srq** srq_ptr) {
  if (peer == nullptr || srq_ptr == nullptr) return RPMA_E_INVAL;
  arpma::srq_config config;
  if (cfg != nullptr) {
    config.rq_size = cfg->rq_size.load();
    config.rcq_size = cfg->rcq_size.load();
  }
  return arpma::capi::guarded([&] {
    auto created = arpma::srq::create(peer->cxx, config);
    if (!created) return arpma::to_rpma_error(created.error());
    // The RCQ's completion fd blocks until the program sets O_NONBLOCK, as
    // librpma's: the provider made it so.
    arpma::capi::alloc_point("alloc rpma_srq");
    auto handle = std::make_unique<rpma_srq>();
    handle->cxx = std::move(created).value();
    handle->rcq.srq = arpma::detail::access::state(handle->cxx).get();
    *srq_ptr = handle.release();
    return 0;
  });
}

int rpma_srq_delete(struct rpma_srq** srq_ptr) {
  if (srq_ptr == nullptr) return RPMA_E_INVAL;
  rpma_srq* srq = *srq_ptr;
  if (srq == nullptr) return 0;
  const std::error_code ec = srq->cxx.close();
  delete srq;
  *srq_ptr = nullptr;
  return arpma::to_rpma_error(ec);
}

int rpma_srq_recv(struct rpma_srq* srq, struct rpma_mr_local* dst, size_t offset, size_t len,
                  const void* op_context) {
  if (srq == nullptr || arpma::detail::access::state(srq->cxx) == nullptr ||
      (dst == nullptr && (offset != 0 || len != 0)))
    return RPMA_E_INVAL;
  const auto* mr = dst != nullptr ? arpma::detail::access::state(dst->cxx) : nullptr;
  return arpma::to_rpma_error(arpma::detail::access::state(srq->cxx)->post_recv(
      mr, offset, len, reinterpret_cast<std::uintptr_t>(op_context)));
}

int rpma_srq_get_rcq(const struct rpma_srq* srq, struct rpma_cq** rcq_ptr) {
  if (srq == nullptr || rcq_ptr == nullptr) return RPMA_E_INVAL;
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): the CQ is the caller's to use
  *rcq_ptr = srq->cxx.has_rcq() ? const_cast<rpma_cq*>(&srq->rcq) : nullptr;
  return 0;
}

}  // extern "C"

#include "support/instant_provider.hpp"

#include "provider/handle_cast.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace arpma::test {

using prov::as;
using prov::handle;

namespace {
std::error_code sys(int err) { return {err, std::system_category()}; }
}  // namespace

struct instant_provider::channel_obj {
  int fd = -1;
  std::vector<cq_obj*> fired;  ///< ring of CQs signalled and not yet taken
  std::size_t head = 0;
  std::size_t count = 0;
};

struct instant_provider::cq_obj {
  channel_obj* channel = nullptr;
  std::vector<prov::work_completion> ring;  ///< sized at creation: no allocation per operation
  std::size_t head = 0;
  std::size_t count = 0;
  bool armed = false;
};

instant_provider::~instant_provider() = default;

result<prov::comp_channel*> instant_provider::create_comp_channel(prov::device*) {
  auto* c = new channel_obj;
  c->fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC | EFD_SEMAPHORE);
  if (c->fd < 0) {
    const int err = errno;
    delete c;
    return sys(err);
  }
  c->fired.resize(64);
  return handle<prov::comp_channel>(c);
}

std::error_code instant_provider::destroy_comp_channel(prov::comp_channel* ch) noexcept {
  auto* c = as<channel_obj>(ch);
  ::close(c->fd);
  delete c;
  return {};
}

int instant_provider::comp_channel_fd(const prov::comp_channel* ch) const noexcept {
  return as<const channel_obj>(ch)->fd;
}

result<prov::cq*> instant_provider::create_cq(prov::device*, int cqe, prov::comp_channel* ch) {
  auto* q = new cq_obj;
  q->channel = as<channel_obj>(ch);
  q->ring.resize(static_cast<std::size_t>(cqe > 0 ? cqe : 1));
  return handle<prov::cq>(q);
}

std::error_code instant_provider::destroy_cq(prov::cq* cq) noexcept {
  delete as<cq_obj>(cq);
  return {};
}

std::error_code instant_provider::req_notify_cq(prov::cq* cq, bool) {
  as<cq_obj>(cq)->armed = true;
  return {};
}

std::error_code instant_provider::create_qp(prov::cm_id* id, prov::pd*,
                                            const prov::qp_config& cfg) {
  qps_[id] = qp_obj{as<cq_obj>(cfg.send_cq), as<cq_obj>(cfg.recv_cq), next_qp_++};
  return {};
}

void instant_provider::destroy_qp(prov::cm_id* id) noexcept { qps_.erase(id); }

std::uint32_t instant_provider::qp_num(const prov::cm_id* id) const noexcept {
  const auto it = qps_.find(id);
  return it == qps_.end() ? 0 : it->second.num;
}

result<prov::mr*> instant_provider::reg_mr(prov::pd*, void*, std::size_t, int) {
  return handle<prov::mr>(new mr_obj{next_key_++});
}

std::error_code instant_provider::dereg_mr(prov::mr* mr) noexcept {
  delete as<mr_obj>(mr);
  return {};
}

std::uint32_t instant_provider::mr_lkey(const prov::mr* mr) const noexcept {
  return as<const mr_obj>(mr)->key;
}
std::uint32_t instant_provider::mr_rkey(const prov::mr* mr) const noexcept {
  return as<const mr_obj>(mr)->key;
}

void instant_provider::complete(cq_obj& cq, const prov::work_completion& wc) {
  cq.ring[(cq.head + cq.count) % cq.ring.size()] = wc;
  ++cq.count;
  if (!cq.armed || cq.channel == nullptr) return;
  cq.armed = false;  // one event per arm, as verbs
  auto& ch = *cq.channel;
  if (ch.count < ch.fired.size()) {
    ch.fired[(ch.head + ch.count) % ch.fired.size()] = &cq;
    ++ch.count;
  }
  const std::uint64_t one = 1;
  ++signals_;
  (void)!::write(ch.fd, &one, sizeof one);
}

std::error_code instant_provider::post_send(prov::cm_id* id, const prov::send_wr& wr) {
  const auto it = qps_.find(id);
  if (it == qps_.end()) return sys(EINVAL);
  auto& cq = *it->second.send;
  if (cq.count == cq.ring.size()) return sys(ENOMEM);  // as a full send queue
  if (!wr.signaled) return {};
  prov::work_completion wc;
  wc.wr_id = wr.wr_id;
  wc.byte_len = wr.local.length;
  wc.qp_num = it->second.num;
  using op = prov::wr_opcode;
  switch (wr.opcode) {
    case op::rdma_write:
    case op::rdma_write_with_imm: wc.opcode = prov::wc_opcode::rdma_write; break;
    case op::rdma_read: wc.opcode = prov::wc_opcode::rdma_read; break;
    default: wc.opcode = prov::wc_opcode::send; break;
  }
  complete(cq, wc);
  return {};
}

std::error_code instant_provider::post_recv(prov::cm_id* id, const prov::recv_wr& wr) {
  const auto it = qps_.find(id);
  if (it == qps_.end()) return sys(EINVAL);
  auto& cq = it->second.recv != nullptr ? *it->second.recv : *it->second.send;
  if (cq.count == cq.ring.size()) return sys(ENOMEM);
  prov::work_completion wc;
  wc.wr_id = wr.wr_id;
  wc.opcode = prov::wc_opcode::recv;
  wc.byte_len = wr.local.length;
  wc.qp_num = it->second.num;
  complete(cq, wc);
  return {};
}

result<std::size_t> instant_provider::poll_cq(prov::cq* cq, std::span<prov::work_completion> out) {
  auto& q = *as<cq_obj>(cq);
  std::size_t n = 0;
  while (n < out.size() && q.count > 0) {
    out[n++] = q.ring[q.head];
    q.head = (q.head + 1) % q.ring.size();
    --q.count;
  }
  return n;
}

result<prov::cq*> instant_provider::get_cq_event(prov::comp_channel* ch) {
  auto& c = *as<channel_obj>(ch);
  std::uint64_t value = 0;
  if (c.count == 0 || ::read(c.fd, &value, sizeof value) != sizeof value) return sys(EAGAIN);
  auto* cq = c.fired[c.head];
  c.head = (c.head + 1) % c.fired.size();
  --c.count;
  return handle<prov::cq>(cq);
}

void instant_provider::ack_cq_events(prov::cq*, unsigned) noexcept {}

}  // namespace arpma::test

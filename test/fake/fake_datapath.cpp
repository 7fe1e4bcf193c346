// The fake provider's data path: work requests recorded when posted,
// completions released when the test says (fake_provider.hpp).
#include "fake/fake_objects.hpp"
#include "fake/fake_provider.hpp"
#include "provider/handle_cast.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace arpma::test {

namespace {

using prov::as;

std::error_code sys(int err) { return {err, std::system_category()}; }

prov::wc_opcode wc_of(prov::wr_opcode op) noexcept {
  switch (op) {
    case prov::wr_opcode::send:
    case prov::wr_opcode::send_with_imm: return prov::wc_opcode::send;
    case prov::wr_opcode::rdma_write:
    case prov::wr_opcode::rdma_write_with_imm: return prov::wc_opcode::rdma_write;
    case prov::wr_opcode::rdma_read: return prov::wc_opcode::rdma_read;
    case prov::wr_opcode::atomic_write: return prov::wc_opcode::atomic_write;
    case prov::wr_opcode::flush: return prov::wc_opcode::flush;
  }
  return prov::wc_opcode::send;
}

}  // namespace

std::error_code fake_provider::post_send(prov::cm_id* h, const prov::send_wr& wr) {
  if (auto ec = enter("post_send")) return ec;
  const std::lock_guard lock(mutex_);
  auto* i = as<id>(h);
  if (!alive(i) || !i->has_qp) return sys(EINVAL);
  posted_wr p;
  p.send = wr;
  i->outstanding.push_back(p);
  return {};
}

std::error_code fake_provider::post_recv(prov::cm_id* h, const prov::recv_wr& wr) {
  if (auto ec = enter("post_recv")) return ec;
  const std::lock_guard lock(mutex_);
  auto* i = as<id>(h);
  if (!alive(i) || !i->has_qp || i->qp.shared_rq != nullptr) return sys(EINVAL);
  posted_wr p;
  p.receive = true;
  p.recv = wr;
  i->outstanding.push_back(p);
  return {};
}

result<std::size_t> fake_provider::poll_cq(prov::cq* h, std::span<prov::work_completion> out) {
  if (auto ec = enter("poll_cq")) return ec;
  const std::lock_guard lock(mutex_);
  auto* c = as<cq_obj>(h);
  if (!cqs_.contains(c)) return sys(EINVAL);
  std::size_t n = 0;
  for (; n < out.size() && !c->done.empty(); ++n) {
    out[n] = c->done.front();
    c->done.pop_front();
  }
  return n;
}

result<prov::cq*> fake_provider::get_cq_event(prov::comp_channel* h) {
  if (auto ec = enter("get_cq_event")) return ec;
  auto* ch = as<comp_obj>(h);
  std::uint64_t one = 0;
  // Never waits here, whatever the fd's mode: a test that waits for an event
  // scripts it first.
  pollfd ready{ch->fd, POLLIN, 0};
  if (::poll(&ready, 1, 0) != 1 ||
      ::read(ch->fd, &one, sizeof one) != static_cast<ssize_t>(sizeof one))
    return sys(EAGAIN);
  const std::lock_guard lock(mutex_);
  if (ch->fired.empty()) {
    violations_.emplace_back("a completion event without a CQ that fired");
    return sys(EAGAIN);
  }
  cq_obj* c = ch->fired.front();
  ch->fired.pop_front();
  ++c->unacked;
  return prov::handle<prov::cq>(c);
}

void fake_provider::ack_cq_events(prov::cq* h, unsigned count) noexcept {
  (void)enter("ack_cq_events");
  const std::lock_guard lock(mutex_);
  auto* c = as<cq_obj>(h);
  if (count > c->unacked) {
    violations_.emplace_back("more CQ events acknowledged than were taken");
    c->unacked = 0;
    return;
  }
  c->unacked -= count;
}

void fake_provider::release_locked(cq_obj* c, const prov::work_completion& wc) {
  c->done.push_back(wc);
  if (!c->armed || c->channel == nullptr) return;
  c->armed = false;  // one event per arming
  c->channel->fired.push_back(c);
  const std::uint64_t one = 1;
  if (::write(c->channel->fd, &one, sizeof one) != static_cast<ssize_t>(sizeof one))
    violations_.emplace_back("the completion channel's eventfd refused a write");
}

bool fake_provider::complete(prov::cm_id* h, std::uint64_t wr_id, prov::wc_status status,
                             std::optional<std::uint32_t> byte_len) {
  const std::lock_guard lock(mutex_);
  auto* i = as<id>(h);
  if (!alive(i)) return false;
  auto& pending = i->outstanding;
  const auto it = std::find_if(pending.begin(), pending.end(),
                               [&](const posted_wr& p) { return p.wr_id() == wr_id; });
  if (it == pending.end()) return false;
  const posted_wr p = *it;
  pending.erase(it);
  if (!p.receive && !p.send.signaled && status == prov::wc_status::success) return true;
  prov::work_completion wc;
  wc.wr_id = wr_id;
  wc.status = status;
  wc.qp_num = i->qp_num;
  wc.opcode = p.receive ? prov::wc_opcode::recv : wc_of(p.send.opcode);
  wc.byte_len = byte_len.value_or(p.receive ? p.recv.local.length : p.send.local.length);
  // The receive CQ is the SRQ's or the QP's own; a QP on an SRQ posts no receives here.
  release_locked(as<cq_obj>(p.receive ? i->qp.recv_cq : i->qp.send_cq), wc);
  return true;
}

bool fake_provider::receive(prov::cm_id* h, std::span<const std::uint8_t> payload,
                            std::optional<std::uint32_t> imm) {
  const std::lock_guard lock(mutex_);
  auto* i = as<id>(h);
  if (!alive(i)) return false;
  auto& pending = i->outstanding;
  const auto it =
      std::find_if(pending.begin(), pending.end(), [](const posted_wr& p) { return p.receive; });
  if (it == pending.end()) return false;
  const prov::recv_wr wr = it->recv;
  pending.erase(it);
  prov::work_completion wc;
  wc.wr_id = wr.wr_id;
  wc.qp_num = i->qp_num;
  wc.opcode = prov::wc_opcode::recv;
  if (payload.size() > wr.local.length) {
    wc.status = prov::wc_status::loc_len_err;
  } else {
    if (!payload.empty()) {
      // The address the test's own process registered: the fake places the bytes, as a NIC.
      // NOLINTNEXTLINE(performance-no-int-to-ptr)
      std::memcpy(reinterpret_cast<void*>(wr.local.addr), payload.data(), payload.size());
    }
    wc.byte_len = static_cast<std::uint32_t>(payload.size());
    wc.with_imm = imm.has_value();
    wc.imm_data = imm.value_or(0);
  }
  release_locked(as<cq_obj>(i->qp.recv_cq), wc);
  return true;
}

std::vector<std::uint8_t> fake_provider::payload(const posted_wr& wr) {
  if (wr.receive || wr.send.local.length == 0) return {};
  // NOLINTNEXTLINE(performance-no-int-to-ptr): an address of the test's own memory
  const auto* p = reinterpret_cast<const std::uint8_t*>(wr.send.local.addr);
  return {p, p + wr.send.local.length};
}

std::size_t fake_provider::flush(prov::cm_id* h) {
  std::vector<std::uint64_t> ids;
  for (const auto& p : outstanding(h)) ids.push_back(p.wr_id());
  for (const auto wr_id : ids) (void)complete(h, wr_id, prov::wc_status::wr_flush_err);
  return ids.size();
}

std::vector<fake_provider::posted_wr> fake_provider::outstanding(const prov::cm_id* h) const {
  const std::lock_guard lock(mutex_);
  const auto* i = as<const id>(h);
  return alive(i) ? i->outstanding : std::vector<posted_wr>{};
}

std::size_t fake_provider::unpolled(const prov::cq* h) const {
  const std::lock_guard lock(mutex_);
  const auto* c = as<const cq_obj>(h);
  return cqs_.contains(const_cast<cq_obj*>(c)) ? c->done.size() : 0;
}

}  // namespace arpma::test

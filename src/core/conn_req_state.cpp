#include "core/conn_req_state.hpp"

#include "arpma/conn_cfg.hpp"
#include "arpma/error.hpp"
#include "core/log_internal.hpp"

#include <climits>

namespace arpma::detail {
namespace {

void keep_first(std::error_code& first, const std::error_code& next) {
  if (!first) first = next;
}

std::error_code destroy_cq(provider::provider& prov, cq_state& c) noexcept {
  std::error_code first;
  if (c.cq != nullptr) {
    const auto ec = prov.destroy_cq(c.cq);
    if (ec) ARPMA_LOG_FAILURE("destroy cq", ec);
    keep_first(first, ec);
    c.cq = nullptr;
  }
  if (c.own_channel != nullptr) {
    const auto ec = prov.destroy_comp_channel(c.own_channel);
    if (ec) ARPMA_LOG_FAILURE("destroy completion channel", ec);
    keep_first(first, ec);
    c.own_channel = nullptr;
  }
  return first;
}

// rpma_cq_new: own channel unless one is shared, CQ, then arm it.
std::error_code make_cq(provider::provider& prov, provider::device* dev, std::uint32_t size,
                        provider::comp_channel* shared, cq_state& out) {
  cq_state c;
  provider::comp_channel* channel = shared;
  if (channel == nullptr) {
    auto created = prov.create_comp_channel(dev);
    if (!created) {
      ARPMA_LOG_FAILURE("create completion channel", created.error());
      return created.error();
    }
    c.own_channel = channel = created.value();
  }
  const int cqe = size > INT_MAX ? INT_MAX : static_cast<int>(size);
  auto cq = prov.create_cq(dev, cqe, channel);
  if (!cq) {
    ARPMA_LOG_FAILURE("create cq", cq.error());
    (void)destroy_cq(prov, c);
    return cq.error();
  }
  c.cq = cq.value();
  if (const auto ec = prov.req_notify_cq(c.cq, false)) {
    ARPMA_LOG_FAILURE("arm cq", ec);
    (void)destroy_cq(prov, c);
    return ec;
  }
  out = c;
  return {};
}

}  // namespace

std::error_code conn_req_state::build_queues(const conn_cfg& cfg) {
  auto& p = prov();
  provider::device* dev = p.id_device(id);
  if (cfg.shared_completion_channel) {
    auto created = p.create_comp_channel(dev);
    if (!created) {
      ARPMA_LOG_FAILURE("create shared completion channel", created.error());
      return created.error();
    }
    shared_channel = created.value();
  }
  if (auto ec = make_cq(p, dev, cfg.cq_size, shared_channel, cq)) return ec;
  if (cfg.rcq_size > 0)
    if (auto ec = make_cq(p, dev, cfg.rcq_size, shared_channel, rcq)) return ec;
  provider::qp_config qp;
  qp.send_cq = cq.cq;
  qp.recv_cq = rcq.cq != nullptr ? rcq.cq : cq.cq;
  qp.max_send_wr = cfg.sq_size;
  qp.max_recv_wr = cfg.rq_size;
  if (auto ec = p.create_qp(id, peer->pd, qp)) {
    ARPMA_LOG_FAILURE("create qp", ec);
    return ec;
  }
  has_qp = true;
  return {};
}

std::error_code conn_req_state::destroy() noexcept {
  if (!peer) return {};
  auto& p = prov();
  std::error_code first;
  if (has_qp) {
    p.destroy_qp(id);
    has_qp = false;
  }
  keep_first(first, destroy_cq(p, rcq));
  keep_first(first, destroy_cq(p, cq));
  if (shared_channel != nullptr) {
    const auto ec = p.destroy_comp_channel(shared_channel);
    if (ec) ARPMA_LOG_FAILURE("destroy shared completion channel", ec);
    keep_first(first, ec);
    shared_channel = nullptr;
  }
  if (id != nullptr) {
    if (channel) channel->detach(token);
    const auto ec = p.destroy_id(id);
    if (ec) ARPMA_LOG_FAILURE("destroy id", ec);
    keep_first(first, ec);
    id = nullptr;
  }
  channel.reset();
  peer.reset();
  return first;
}

}  // namespace arpma::detail

// rpma_cq_wait / rpma_cq_get_wc / rpma_cq_get_fd / rpma_conn_wait: completions read directly
// from the provider on the caller's thread (no loop), as librpma does.
#include <librpma.h>

#include "capi/objects.hpp"
#include "core/direct_cq.hpp"
#include "support/log.hpp"

#include <arpa/inet.h>

#include <optional>
#include <span>

namespace {

namespace prov = arpma::provider;

/// The CQ an rpma_cq names: an SRQ's RCQ, or one of a connection's CQs.
std::optional<arpma::detail::direct_cq> queue_of(const rpma_cq* cq) noexcept {
  if (cq == nullptr) return std::nullopt;
  if (cq->srq != nullptr) return arpma::detail::direct_cq::of(cq->srq);
  if (cq->owner == nullptr) return std::nullopt;
  return arpma::detail::direct_cq::of(arpma::detail::access::state(cq->owner->cxx), cq->receive);
}

void to_ibv_wc(const prov::work_completion& wc, ibv_wc& o) noexcept {
  o = ibv_wc{};
  o.wr_id = wc.wr_id;
  o.status = static_cast<ibv_wc_status>(wc.status);
  o.opcode = static_cast<ibv_wc_opcode>(wc.opcode);
  o.vendor_err = wc.vendor_err;
  o.byte_len = wc.byte_len;
  o.imm_data = htonl(wc.imm_data);  // ibv_wc carries it in network order
  o.qp_num = wc.qp_num;
  o.wc_flags = wc.with_imm ? IBV_WC_WITH_IMM : 0;
}

}  // namespace

extern "C" {

int rpma_cq_wait(struct rpma_cq* cq) {
  const auto queue = queue_of(cq);
  if (!queue) return RPMA_E_INVAL;
  return arpma::to_rpma_error(queue->wait());
}

int rpma_cq_get_wc(struct rpma_cq* cq, int num_entries, struct ibv_wc* wc, int* num_entries_got) {
  const auto queue = queue_of(cq);
  if (!queue || wc == nullptr || num_entries < 1 || (num_entries > 1 && num_entries_got == nullptr))
    return RPMA_E_INVAL;
  auto polled =
      queue->poll(std::span(wc, static_cast<std::size_t>(num_entries)),
                  [](const prov::work_completion& c, ibv_wc& o) noexcept { to_ibv_wc(c, o); });
  if (!polled) {
    ARPMA_LOG_FAILURE("poll cq", polled.error());
    return RPMA_E_PROVIDER;
  }
  const int got = static_cast<int>(polled.value());
  if (got == 0) {
    ARPMA_LOG(arpma::log_level::debug, "There may be an extra CQ event with no completion");
    return RPMA_E_NO_COMPLETION;
  }
  if (num_entries_got != nullptr) *num_entries_got = got;
  return 0;
}

int rpma_cq_get_fd(const struct rpma_cq* cq, int* fd) {
  if (fd == nullptr) return RPMA_E_INVAL;
  // As librpma: with a shared channel, that channel's fd for either CQ.
  const auto queue = queue_of(cq);
  if (!queue) return RPMA_E_INVAL;
  *fd = queue->fd();
  return 0;
}

int rpma_conn_wait(struct rpma_conn* conn, int /*flags*/, struct rpma_cq** cq, bool* is_rcq) {
  if (conn == nullptr || cq == nullptr) return RPMA_E_INVAL;
  const auto fired = arpma::detail::wait_shared_channel(arpma::detail::access::state(conn->cxx));
  if (!fired) {
    if (fired.error() == arpma::errc::provider) *cq = nullptr;  // as librpma: the re-arm failed
    return arpma::to_rpma_error(fired.error());
  }
  *cq = fired.value() ? &conn->rcq : &conn->cq;
  if (is_rcq != nullptr) *is_rcq = fired.value();
  return 0;
}

}  // extern "C"

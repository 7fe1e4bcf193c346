// rpma_cq_wait / rpma_cq_get_wc / rpma_conn_wait: completions read directly
// from the provider on the caller's thread (no loop), as librpma does.
#include <librpma.h>

#include "capi/objects.hpp"
#include "core/completion_of.hpp"
#include "core/conn_state.hpp"
#include "core/cq_events.hpp"
#include "core/srq_state.hpp"
#include "support/log.hpp"

#include <arpa/inet.h>

#include <span>

namespace {

namespace prov = arpma::provider;

struct cq_parts {
  prov::provider* provider = nullptr;
  const arpma::detail::cq_state* queue = nullptr;
  prov::comp_channel* channel = nullptr;
  bool shared = false;
};

bool parts_of(const rpma_cq* cq, cq_parts& out) {
  if (cq != nullptr && cq->srq != nullptr) {  // an SRQ's RCQ: always its own channel
    out.provider = &cq->srq->prov();
    out.queue = &cq->srq->rcq;
    out.channel = out.queue->own_channel;
    return out.queue->cq != nullptr;
  }
  if (cq == nullptr || cq->owner == nullptr) return false;
  const auto* state = arpma::detail::access::state(cq->owner->cxx);
  if (state == nullptr) return false;
  out.provider = &state->prov();
  out.queue = cq->receive ? &state->rcq : &state->cq;
  out.shared = state->conn_comp_channel != nullptr;
  out.channel = out.shared ? state->conn_comp_channel : out.queue->own_channel;
  return out.queue->cq != nullptr;
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

int rearm_error(const std::error_code& ec) { return ec ? RPMA_E_PROVIDER : 0; }

}  // namespace

extern "C" {

int rpma_cq_wait(struct rpma_cq* cq) {
  cq_parts parts;
  if (!parts_of(cq, parts)) return RPMA_E_INVAL;
  if (parts.shared) return RPMA_E_SHARED_CHANNEL;
  auto fired = parts.provider->get_cq_event(parts.channel);
  if (!fired) return RPMA_E_NO_COMPLETION;
  return rearm_error(arpma::detail::acknowledge_and_rearm(*parts.provider, fired.value()));
}

int rpma_cq_get_wc(struct rpma_cq* cq, int num_entries, struct ibv_wc* wc, int* num_entries_got) {
  cq_parts parts;
  if (!parts_of(cq, parts) || wc == nullptr || num_entries < 1 ||
      (num_entries > 1 && num_entries_got == nullptr))
    return RPMA_E_INVAL;
  auto polled = arpma::detail::poll_converted(
      *parts.provider, parts.queue->cq, std::span(wc, static_cast<std::size_t>(num_entries)),
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

int rpma_conn_wait(struct rpma_conn* conn, int /*flags*/, struct rpma_cq** cq, bool* is_rcq) {
  if (conn == nullptr || cq == nullptr || arpma::detail::access::state(conn->cxx) == nullptr)
    return RPMA_E_INVAL;
  auto& state = *arpma::detail::access::state(conn->cxx);
  if (state.conn_comp_channel == nullptr) return RPMA_E_NOT_SHARED_CHNL;
  auto& p = state.prov();
  auto fired = p.get_cq_event(state.conn_comp_channel);
  if (!fired) return RPMA_E_NO_COMPLETION;
  rpma_cq* which = nullptr;
  if (fired.value() == state.cq.cq)
    which = &conn->cq;
  else if (fired.value() == state.rcq.cq)
    which = &conn->rcq;
  else
    return RPMA_E_UNKNOWN;  // not acknowledged: it is not ours (as librpma)
  if (const int rc = rearm_error(arpma::detail::acknowledge_and_rearm(p, fired.value()))) {
    *cq = nullptr;
    return rc;
  }
  *cq = which;
  if (is_rcq != nullptr) *is_rcq = which == &conn->rcq;
  return 0;
}

}  // extern "C"

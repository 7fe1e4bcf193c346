// rpma_cq_wait / rpma_cq_get_wc / rpma_conn_wait: completions read directly
// from the provider on the caller's thread (no loop), as librpma does.
#include <librpma.h>

#include "capi/objects.hpp"
#include "core/conn_state.hpp"
#include "core/log_internal.hpp"
#include "core/srq_state.hpp"

#include <arpa/inet.h>

#include <array>
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
  const auto* state = cq->owner->cxx.state();
  if (state == nullptr) return false;
  out.provider = &state->prov();
  out.queue = cq->receive ? &state->rcq : &state->cq;
  out.shared = state->shared_channel != nullptr;
  out.channel = out.shared ? state->shared_channel : out.queue->own_channel;
  return out.queue->cq != nullptr;
}

ibv_wc to_ibv(const prov::work_completion& in) {
  ibv_wc out{};
  out.wr_id = in.wr_id;
  out.status = static_cast<ibv_wc_status>(in.status);
  out.opcode = static_cast<ibv_wc_opcode>(in.opcode);
  out.vendor_err = in.vendor_err;
  out.byte_len = in.byte_len;
  out.imm_data = htonl(in.imm_data);  // ibv_wc carries it in network order
  out.qp_num = in.qp_num;
  out.wc_flags = in.with_imm ? IBV_WC_WITH_IMM : 0;
  return out;
}

int rearm(prov::provider& p, prov::cq* cq) {
  if (const auto ec = p.req_notify_cq(cq, false)) {
    ARPMA_LOG_FAILURE("re-arm cq", ec);
    return RPMA_E_PROVIDER;
  }
  return 0;
}

}  // namespace

extern "C" {

int rpma_cq_wait(struct rpma_cq* cq) {
  cq_parts parts;
  if (!parts_of(cq, parts)) return RPMA_E_INVAL;
  if (parts.shared) return RPMA_E_SHARED_CHANNEL;
  auto fired = parts.provider->get_cq_event(parts.channel);
  if (!fired) return RPMA_E_NO_COMPLETION;
  parts.provider->ack_cq_events(fired.value(), 1);
  return rearm(*parts.provider, parts.queue->cq);
}

int rpma_cq_get_wc(struct rpma_cq* cq, int num_entries, struct ibv_wc* wc, int* num_entries_got) {
  cq_parts parts;
  if (!parts_of(cq, parts) || wc == nullptr || num_entries < 1 ||
      (num_entries > 1 && num_entries_got == nullptr))
    return RPMA_E_INVAL;
  std::array<prov::work_completion, 16> batch{};
  int got = 0;
  while (got < num_entries) {
    const auto want =
        std::min<std::size_t>(batch.size(), static_cast<std::size_t>(num_entries - got));
    auto polled = parts.provider->poll_cq(parts.queue->cq, std::span(batch.data(), want));
    if (!polled) {
      ARPMA_LOG_FAILURE("poll cq", polled.error());
      return RPMA_E_PROVIDER;
    }
    for (std::size_t i = 0; i < polled.value(); ++i) wc[got++] = to_ibv(batch[i]);
    if (polled.value() < want) break;
  }
  if (got == 0) {
    ARPMA_LOG(arpma::log_level::debug, "There may be an extra CQ event with no completion");
    return RPMA_E_NO_COMPLETION;
  }
  if (num_entries_got != nullptr) *num_entries_got = got;
  return 0;
}

int rpma_conn_wait(struct rpma_conn* conn, int /*flags*/, struct rpma_cq** cq, bool* is_rcq) {
  if (conn == nullptr || cq == nullptr || conn->cxx.state() == nullptr) return RPMA_E_INVAL;
  auto& state = *conn->cxx.state();
  if (state.shared_channel == nullptr) return RPMA_E_NOT_SHARED_CHNL;
  auto& p = state.prov();
  auto fired = p.get_cq_event(state.shared_channel);
  if (!fired) return RPMA_E_NO_COMPLETION;
  rpma_cq* which = nullptr;
  if (fired.value() == state.cq.cq)
    which = &conn->cq;
  else if (fired.value() == state.rcq.cq)
    which = &conn->rcq;
  else
    return RPMA_E_UNKNOWN;  // not acknowledged: it is not ours (as librpma)
  p.ack_cq_events(fired.value(), 1);
  if (const int rc = rearm(p, fired.value())) {
    *cq = nullptr;
    return rc;
  }
  *cq = which;
  if (is_rcq != nullptr) *is_rcq = which == &conn->rcq;
  return 0;
}

}  // extern "C"

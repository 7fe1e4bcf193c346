// rpma_conn_*: an established connection and its events, read directly
// from its own event channel (no loop, no thread of ours behind the fd).
#include <librpma.h>

#include "capi/objects.hpp"
#include "core/conn_state.hpp"
#include "core/direct_calls.hpp"
#include "core/srq_state.hpp"

extern "C" {

int rpma_conn_get_event_fd(const struct rpma_conn* conn, int* fd) {
  if (conn == nullptr || fd == nullptr) return RPMA_E_INVAL;
  *fd = arpma::detail::event_fd(conn->cxx);
  return 0;
}

int rpma_conn_next_event(struct rpma_conn* conn, enum rpma_conn_event* event) {
  if (conn == nullptr || event == nullptr) return RPMA_E_INVAL;
  return arpma::capi::guarded([&] {
    auto next = arpma::detail::next_event_now(conn->cxx);
    if (!next) return arpma::to_rpma_error(next.error());
    *event = static_cast<rpma_conn_event>(next.value());
    return 0;
  });
}

int rpma_conn_get_private_data(const struct rpma_conn* conn, struct rpma_conn_private_data* pdata) {
  if (conn == nullptr || pdata == nullptr) return RPMA_E_INVAL;
  const auto data = conn->cxx.private_data();
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): librpma's struct has a non-const ptr
  pdata->ptr = data.empty() ? nullptr : const_cast<std::uint8_t*>(data.data());
  pdata->len = static_cast<std::uint8_t>(data.size());
  return 0;
}

int rpma_conn_get_qp_num(const struct rpma_conn* conn, uint32_t* qp_num) {
  if (conn == nullptr || qp_num == nullptr) return RPMA_E_INVAL;
  *qp_num = conn->cxx.qp_num();
  return 0;
}

int rpma_conn_get_cq(const struct rpma_conn* conn, struct rpma_cq** cq_ptr) {
  if (conn == nullptr || cq_ptr == nullptr) return RPMA_E_INVAL;
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): the CQ is the caller's to use
  *cq_ptr = const_cast<rpma_cq*>(&conn->cq);
  return 0;
}

int rpma_conn_get_rcq(const struct rpma_conn* conn, struct rpma_cq** rcq_ptr) {
  if (conn == nullptr || rcq_ptr == nullptr) return RPMA_E_INVAL;
  const auto* state = arpma::detail::access::state(conn->cxx);
  const bool has_rcq = state != nullptr && state->rcq.cq != nullptr;
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): the CQ is the caller's to use
  *rcq_ptr = has_rcq ? const_cast<rpma_cq*>(&conn->rcq) : nullptr;
  return 0;
}

int rpma_conn_get_compl_fd(const struct rpma_conn* conn, int* fd) {
  if (conn == nullptr || fd == nullptr) return RPMA_E_INVAL;
  const auto* state = arpma::detail::access::state(conn->cxx);
  if (state == nullptr || state->conn_comp_channel == nullptr) return RPMA_E_NOT_SHARED_CHNL;
  *fd = state->prov().comp_channel_fd(state->conn_comp_channel);
  return 0;
}

int rpma_cq_get_fd(const struct rpma_cq* cq, int* fd) {
  if (cq == nullptr || fd == nullptr) return RPMA_E_INVAL;
  if (cq->srq != nullptr) {  // an SRQ's RCQ
    if (cq->srq->rcq.own_channel == nullptr) return RPMA_E_INVAL;
    *fd = cq->srq->prov().comp_channel_fd(cq->srq->rcq.own_channel);
    return 0;
  }
  const auto* state = arpma::detail::access::state(cq->owner->cxx);
  if (state == nullptr) return RPMA_E_INVAL;
  // As librpma: with a shared channel, that channel's fd for either CQ.
  const auto& queue = cq->receive ? state->rcq : state->cq;
  const auto* channel =
      state->conn_comp_channel != nullptr ? state->conn_comp_channel : queue.own_channel;
  *fd = state->prov().comp_channel_fd(channel);
  return 0;
}

int rpma_conn_disconnect(struct rpma_conn* conn) {
  if (conn == nullptr) return RPMA_E_INVAL;
  return arpma::to_rpma_error(conn->cxx.disconnect());
}

int rpma_conn_delete(struct rpma_conn** conn_ptr) {
  if (conn_ptr == nullptr) return RPMA_E_INVAL;
  rpma_conn* conn = *conn_ptr;
  if (conn == nullptr) return 0;
  const std::error_code ec = conn->cxx.close();
  delete conn;
  *conn_ptr = nullptr;
  return arpma::to_rpma_error(ec);
}

}  // extern "C"

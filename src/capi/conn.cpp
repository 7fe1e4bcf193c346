// rpma_conn_*: an established connection and its events, read directly
// from its own event channel (no loop, no thread of ours behind the fd).
#include <librpma.h>

#include "capi/objects.hpp"
#include "core/direct_calls.hpp"
#include "core/direct_cq.hpp"

extern "C" {

int rpma_conn_get_event_fd(const struct rpma_conn* conn, int* fd) {
  if (conn == nullptr || fd == nullptr) return RPMA_E_INVAL;
  *fd = arpma::detail::event_fd(arpma::detail::access::state(conn->cxx));
  return 0;
}

int rpma_conn_next_event(struct rpma_conn* conn, enum rpma_conn_event* event) {
  if (conn == nullptr || event == nullptr) return RPMA_E_INVAL;
  return arpma::capi::guarded([&] {
    auto next = arpma::detail::next_event_now(arpma::detail::access::state(conn->cxx));
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
  const bool has_rcq =
      arpma::detail::direct_cq::of(arpma::detail::access::state(conn->cxx), true).has_value();
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): the CQ is the caller's to use
  *rcq_ptr = has_rcq ? const_cast<rpma_cq*>(&conn->rcq) : nullptr;
  return 0;
}

int rpma_conn_get_compl_fd(const struct rpma_conn* conn, int* fd) {
  if (conn == nullptr || fd == nullptr) return RPMA_E_INVAL;
  const auto shared = arpma::detail::shared_channel_fd(arpma::detail::access::state(conn->cxx));
  if (!shared) return arpma::to_rpma_error(shared.error());
  *fd = shared.value();
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

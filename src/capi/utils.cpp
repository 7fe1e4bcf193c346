// rpma_utils_*: device lookup and event names.
#include <librpma.h>

#include "arpma/error.hpp"
#include "arpma/peer.hpp"
#include "capi/enum_value.hpp"

extern "C" {

int rpma_utils_get_ibv_context(const char* addr, enum rpma_util_ibv_context_type type,
                               struct ibv_context** ibv_ctx_ptr) {
  const int kind = arpma::capi::int_value(type);
  if (addr == nullptr || ibv_ctx_ptr == nullptr ||
      (kind != RPMA_UTIL_IBV_CONTEXT_LOCAL && kind != RPMA_UTIL_IBV_CONTEXT_REMOTE))
    return RPMA_E_INVAL;
  auto found = arpma::get_ibv_context(addr, static_cast<arpma::ibv_context_type>(kind));
  if (!found) return arpma::to_rpma_error(found.error());
  *ibv_ctx_ptr = found.value();
  return 0;
}

const char* rpma_utils_conn_event_2str(enum rpma_conn_event conn_event) {
  switch (arpma::capi::int_value(conn_event)) {
    case RPMA_CONN_UNDEFINED: return "Undefined connection event";
    case RPMA_CONN_ESTABLISHED: return "Connection established";
    case RPMA_CONN_CLOSED: return "Connection closed";
    case RPMA_CONN_LOST: return "Connection lost";
    case RPMA_CONN_REJECTED: return "Connection rejected";
    case RPMA_CONN_UNREACHABLE: return "Connection unreachable";
  }
  return "Unsupported connection event";
}

}  // extern "C"

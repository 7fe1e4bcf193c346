// rpma_conn_req_*: the blocking flavour of arpma's asynchronous requests.
#include <librpma.h>

#include "arpma/conn_req.hpp"
#include "arpma/error.hpp"
#include "capi/conn_cfg.hpp"
#include "capi/objects.hpp"

#include <new>

extern "C" {

int rpma_conn_req_new(struct rpma_peer* peer, const char* addr, const char* port,
                      const struct rpma_conn_cfg* cfg, struct rpma_conn_req** req_ptr) {
  if (peer == nullptr || addr == nullptr || port == nullptr || req_ptr == nullptr)
    return RPMA_E_INVAL;
  try {
    // The id is born on its own event channel: it becomes the connection's fd.
    auto req = arpma::conn_req_new(peer->cxx, addr, port, arpma::capi::to_conn_cfg(cfg));
    if (!req) return arpma::to_rpma_error(req.error());
    *req_ptr = new rpma_conn_req{std::move(req).value()};
    return 0;
  } catch (const std::bad_alloc&) {
    return RPMA_E_NOMEM;
  } catch (const std::system_error& e) {  // e.g. the event loop could not get an fd
    return arpma::to_rpma_error(e.code());
  } catch (...) {
    return RPMA_E_UNKNOWN;  // nothing may unwind into a C caller
  }
}

int rpma_conn_req_delete(struct rpma_conn_req** req_ptr) {
  if (req_ptr == nullptr) return RPMA_E_INVAL;
  rpma_conn_req* req = *req_ptr;
  if (req == nullptr) return 0;
  const std::error_code ec = req->cxx.close();
  delete req;
  *req_ptr = nullptr;
  return arpma::to_rpma_error(ec);
}

}  // extern "C"

// rpma_ep_*: a listening endpoint whose fd the caller owns the waiting on.
#include <librpma.h>

#include "capi/conn_cfg.hpp"
#include "capi/objects.hpp"
#include "core/direct_calls.hpp"

#include <memory>

extern "C" {

int rpma_ep_listen(struct rpma_peer* peer, const char* addr, const char* port,
                   struct rpma_ep** ep_ptr) {
  if (peer == nullptr || addr == nullptr || port == nullptr || ep_ptr == nullptr)
    return RPMA_E_INVAL;
  return arpma::capi::guarded([&] {
    arpma::capi::alloc_point("alloc rpma_ep");
    auto ep = std::make_unique<rpma_ep>();
    auto listening = arpma::detail::listen_now(arpma::detail::access::state(peer->cxx), addr, port);
    if (!listening) return arpma::to_rpma_error(listening.error());
    ep->cxx = std::move(listening).value();
    *ep_ptr = ep.release();
    return 0;
  });
}

int rpma_ep_shutdown(struct rpma_ep** ep_ptr) {
  if (ep_ptr == nullptr) return RPMA_E_INVAL;
  rpma_ep* ep = *ep_ptr;
  if (ep == nullptr) return 0;
  const std::error_code ec = ep->cxx.shutdown();
  delete ep;
  *ep_ptr = nullptr;  // always, as librpma's code does (its manual says otherwise)
  return arpma::to_rpma_error(ec);
}

int rpma_ep_get_fd(const struct rpma_ep* ep, int* fd) {
  if (ep == nullptr || fd == nullptr) return RPMA_E_INVAL;
  *fd = arpma::detail::event_fd(arpma::detail::access::state(ep->cxx));
  return 0;
}

int rpma_ep_next_conn_req(struct rpma_ep* ep, const struct rpma_conn_cfg* cfg,
                          struct rpma_conn_req** req_ptr) {
  if (ep == nullptr || req_ptr == nullptr) return RPMA_E_INVAL;
  return arpma::capi::guarded([&] {
    arpma::capi::alloc_point("alloc rpma_conn_req");
    auto req = std::make_unique<rpma_conn_req>();
    auto incoming = arpma::detail::next_conn_req_now(arpma::detail::access::state(ep->cxx),
                                                     arpma::capi::to_conn_cfg(cfg));
    if (!incoming) return arpma::to_rpma_error(incoming.error());
    req->cxx = std::move(incoming).value();
    *req_ptr = req.release();
    return 0;
  });
}

}  // extern "C"

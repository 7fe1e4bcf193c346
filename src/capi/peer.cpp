// rpma_peer_new / rpma_peer_delete over arpma::peer.
#include <librpma.h>

#include "arpma/error.hpp"
#include "capi/objects.hpp"

#include <new>

extern "C" {

int rpma_peer_new(struct ibv_context* ibv_ctx, struct rpma_peer** peer_ptr) {
  if (ibv_ctx == nullptr || peer_ptr == nullptr) return RPMA_E_INVAL;
  auto created = arpma::peer::create(ibv_ctx);
  if (!created) return arpma::to_rpma_error(created.error());
  auto* peer = arpma::capi::new_handle<rpma_peer>("alloc rpma_peer", std::move(created).value());
  if (peer == nullptr) return RPMA_E_NOMEM;  // the moved-from result releases the PD
  *peer_ptr = peer;
  return 0;
}

int rpma_peer_delete(struct rpma_peer** peer_ptr) {
  if (peer_ptr == nullptr) return RPMA_E_INVAL;
  rpma_peer* peer = *peer_ptr;
  if (peer == nullptr) return 0;
  const std::error_code ec = peer->cxx.close();
  delete peer;
  *peer_ptr = nullptr;  // freed even when releasing the PD failed, as librpma
  return arpma::to_rpma_error(ec);
}

}  // extern "C"

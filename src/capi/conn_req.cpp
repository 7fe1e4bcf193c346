// rpma_conn_req_*: the blocking flavour of arpma's requests.
#include <librpma.h>

#include "arpma/conn_req.hpp"
#include "arpma/error.hpp"
#include "capi/conn_cfg.hpp"
#include "capi/objects.hpp"
#include "core/direct_calls.hpp"
#include "core/post.hpp"

#include <memory>

extern "C" {

int rpma_conn_req_new(struct rpma_peer* peer, const char* addr, const char* port,
                      const struct rpma_conn_cfg* cfg, struct rpma_conn_req** req_ptr) {
  if (peer == nullptr || addr == nullptr || port == nullptr || req_ptr == nullptr)
    return RPMA_E_INVAL;
  return arpma::capi::guarded([&] {
    // The id is born on its own event channel: it becomes the connection's fd.
    auto req = arpma::conn_req_new(peer->cxx, addr, port, arpma::capi::to_conn_cfg(cfg));
    if (!req) return arpma::to_rpma_error(req.error());
    arpma::capi::alloc_point("alloc rpma_conn_req");
    *req_ptr = new rpma_conn_req{std::move(req).value()};
    return 0;
  });
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

int rpma_conn_req_connect(struct rpma_conn_req** req_ptr,
                          const struct rpma_conn_private_data* pdata, struct rpma_conn** conn_ptr) {
  if (req_ptr == nullptr || *req_ptr == nullptr) return RPMA_E_INVAL;
  // From here on the request is consumed, whatever happens (as librpma: rpma_conn_req_connect frees
  // it on every path).
  std::unique_ptr<rpma_conn_req> req(std::exchange(*req_ptr, nullptr));
  if (conn_ptr == nullptr || (pdata != nullptr && (pdata->ptr == nullptr || pdata->len == 0))) {
    (void)req->cxx.close();
    return RPMA_E_INVAL;
  }
  return arpma::capi::guarded([&] {
    arpma::capi::alloc_point("alloc rpma_conn");
    auto conn = std::make_unique<rpma_conn>();
    std::span<const std::uint8_t> data;
    if (pdata != nullptr) data = {static_cast<const std::uint8_t*>(pdata->ptr), pdata->len};
    auto connected = arpma::detail::connect_now(arpma::detail::access::release(req->cxx), data);
    if (!connected) return arpma::to_rpma_error(connected.error());
    conn->cxx = std::move(connected).value();
    conn->cq = {conn.get(), false};
    conn->rcq = {conn.get(), true};
    *conn_ptr = conn.release();
    return 0;
  });
}

int rpma_conn_req_get_private_data(const struct rpma_conn_req* req,
                                   struct rpma_conn_private_data* pdata) {
  if (req == nullptr || pdata == nullptr) return RPMA_E_INVAL;
  const auto data = req->cxx.private_data();
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): librpma's struct has a non-const ptr
  pdata->ptr = data.empty() ? nullptr : const_cast<std::uint8_t*>(data.data());
  pdata->len = static_cast<std::uint8_t>(data.size());
  return 0;
}

int rpma_conn_req_recv(struct rpma_conn_req* req, struct rpma_mr_local* dst, size_t offset,
                       size_t len, const void* op_context) {
  if (req == nullptr || dst == nullptr || arpma::detail::access::state(req->cxx) == nullptr)
    return RPMA_E_INVAL;
  return arpma::capi::guarded([&] {
    const auto ec = arpma::detail::post_recv(*arpma::detail::access::state(req->cxx),
                                             arpma::detail::access::state(dst->cxx), offset, len,
                                             reinterpret_cast<std::uintptr_t>(op_context));
    return arpma::to_rpma_error(ec);
  });
}

}  // extern "C"

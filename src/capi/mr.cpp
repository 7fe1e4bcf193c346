// rpma_mr_*: memory registrations and their descriptors.
#include <librpma.h>

#include "arpma/mr.hpp"
#include "capi/objects.hpp"

#include <cstring>
#include <new>

extern "C" {

int rpma_mr_reg(struct rpma_peer* peer, void* ptr, size_t size, int usage,
                struct rpma_mr_local** mr_ptr) {
  if (peer == nullptr || mr_ptr == nullptr) return RPMA_E_INVAL;
  return arpma::capi::guarded([&] {
    auto registered = arpma::local_mr::reg(peer->cxx, ptr, size, usage);
    if (!registered) return arpma::to_rpma_error(registered.error());
    arpma::capi::alloc_point("alloc rpma_mr_local");
    *mr_ptr = new rpma_mr_local{std::move(registered).value()};
    return 0;
  });
}

int rpma_mr_dereg(struct rpma_mr_local** mr_ptr) {
  if (mr_ptr == nullptr) return RPMA_E_INVAL;
  rpma_mr_local* mr = *mr_ptr;
  if (mr == nullptr) return 0;
  const std::error_code ec = mr->cxx.dereg();
  delete mr;
  *mr_ptr = nullptr;  // always, as librpma's code
  return arpma::to_rpma_error(ec);
}

int rpma_mr_get_descriptor(const struct rpma_mr_local* mr, void* desc) {
  if (mr == nullptr || desc == nullptr) return RPMA_E_INVAL;
  const auto bytes = mr->cxx.descriptor();
  std::memcpy(desc, bytes.data(), bytes.size());
  return 0;
}

int rpma_mr_get_descriptor_size(const struct rpma_mr_local* mr, size_t* desc_size) {
  if (mr == nullptr || desc_size == nullptr) return RPMA_E_INVAL;
  *desc_size = arpma::mr_descriptor_size;
  return 0;
}

int rpma_mr_remote_from_descriptor(const void* desc, size_t desc_size,
                                   struct rpma_mr_remote** mr_ptr) {
  if (desc == nullptr || mr_ptr == nullptr) return RPMA_E_INVAL;
  auto decoded =
      arpma::remote_mr::from_descriptor({static_cast<const std::uint8_t*>(desc), desc_size});
  if (!decoded) return arpma::to_rpma_error(decoded.error());
  auto* mr = arpma::capi::new_handle<rpma_mr_remote>("alloc rpma_mr_remote", decoded.value());
  if (mr == nullptr) return RPMA_E_NOMEM;
  *mr_ptr = mr;
  return 0;
}

int rpma_mr_get_ptr(const struct rpma_mr_local* mr, void** ptr) {
  if (mr == nullptr || ptr == nullptr) return RPMA_E_INVAL;
  *ptr = mr->cxx.ptr();
  return 0;
}

int rpma_mr_get_size(const struct rpma_mr_local* mr, size_t* size) {
  if (mr == nullptr || size == nullptr) return RPMA_E_INVAL;
  *size = mr->cxx.size();
  return 0;
}

int rpma_mr_remote_get_size(const struct rpma_mr_remote* mr, size_t* size) {
  if (mr == nullptr || size == nullptr) return RPMA_E_INVAL;
  *size = static_cast<size_t>(mr->cxx.size());
  return 0;
}

int rpma_mr_remote_get_flush_type(const struct rpma_mr_remote* mr, int* flush_type) {
  if (mr == nullptr || flush_type == nullptr) return RPMA_E_INVAL;
  *flush_type = mr->cxx.flush_type();
  return 0;
}

int rpma_mr_remote_delete(struct rpma_mr_remote** mr_ptr) {
  if (mr_ptr == nullptr) return RPMA_E_INVAL;
  delete *mr_ptr;
  *mr_ptr = nullptr;
  return 0;
}

int rpma_mr_advise(struct rpma_mr_local* mr, size_t offset, size_t len, int advice,
                   uint32_t flags) {
  if (mr == nullptr) return RPMA_E_INVAL;
  const std::error_code ec =
      mr->cxx.advise(offset, len, static_cast<arpma::mr_advice>(advice), flags);
  if (!ec) return 0;
  // librpma's mapping of ibv_advise_mr's errno.
  if (ec == std::errc::operation_not_supported || ec == std::errc::not_supported)
    return RPMA_E_NOSUPP;
  if (ec == std::errc::invalid_argument || ec == std::errc::bad_address ||
      ec == arpma::errc::invalid_argument)
    return RPMA_E_INVAL;
  return RPMA_E_PROVIDER;
}

int rpma_utils_ibv_context_is_odp_capable(struct ibv_context* ibv_ctx, int* is_odp_capable) {
  if (ibv_ctx == nullptr || is_odp_capable == nullptr) return RPMA_E_INVAL;
  const auto capable = arpma::is_odp_capable(ibv_ctx);
  if (!capable) return RPMA_E_INVAL;
  *is_odp_capable = capable.value() ? 1 : 0;
  return 0;
}

}  // extern "C"

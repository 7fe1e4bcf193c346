// rpma_peer_cfg_*: what a peer says about itself (direct write to PMem).
#include <librpma.h>

#include "capi/objects.hpp"

#include <cstdint>
#include <cstring>
#include <new>

extern "C" {

int rpma_peer_cfg_new(struct rpma_peer_cfg** pcfg_ptr) {
  if (pcfg_ptr == nullptr) return RPMA_E_INVAL;
  auto* pcfg = arpma::capi::new_handle<rpma_peer_cfg>("alloc rpma_peer_cfg");
  if (pcfg == nullptr) return RPMA_E_NOMEM;
  *pcfg_ptr = pcfg;
  return 0;
}

int rpma_peer_cfg_delete(struct rpma_peer_cfg** pcfg_ptr) {
  if (pcfg_ptr == nullptr) return RPMA_E_INVAL;
  delete *pcfg_ptr;
  *pcfg_ptr = nullptr;
  return 0;
}

int rpma_peer_cfg_set_direct_write_to_pmem(struct rpma_peer_cfg* pcfg, bool supported) {
  if (pcfg == nullptr) return RPMA_E_INVAL;
  pcfg->direct_write_to_pmem.store(supported);
  return 0;
}

int rpma_peer_cfg_get_direct_write_to_pmem(const struct rpma_peer_cfg* pcfg, bool* supported) {
  if (pcfg == nullptr || supported == nullptr) return RPMA_E_INVAL;
  *supported = pcfg->direct_write_to_pmem.load();
  return 0;
}

int rpma_peer_cfg_get_descriptor(const struct rpma_peer_cfg* pcfg, void* desc) {
  if (pcfg == nullptr || desc == nullptr) return RPMA_E_INVAL;
  const std::uint8_t byte = pcfg->direct_write_to_pmem.load() ? 1 : 0;
  std::memcpy(desc, &byte, sizeof byte);
  return 0;
}

int rpma_peer_cfg_get_descriptor_size(const struct rpma_peer_cfg* pcfg, size_t* desc_size) {
  if (pcfg == nullptr || desc_size == nullptr) return RPMA_E_INVAL;
  *desc_size = sizeof(std::uint8_t);
  return 0;
}

int rpma_peer_cfg_from_descriptor(const void* desc, size_t desc_size,
                                  struct rpma_peer_cfg** pcfg_ptr) {
  if (desc == nullptr || pcfg_ptr == nullptr || desc_size < sizeof(std::uint8_t))
    return RPMA_E_INVAL;
  std::uint8_t byte = 0;
  std::memcpy(&byte, desc, sizeof byte);
  auto* pcfg = arpma::capi::new_handle<rpma_peer_cfg>("alloc rpma_peer_cfg");
  if (pcfg == nullptr) return RPMA_E_NOMEM;
  pcfg->direct_write_to_pmem.store(byte != 0);
  *pcfg_ptr = pcfg;
  return 0;
}

}  // extern "C"

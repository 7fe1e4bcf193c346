// libFuzzer harness for rpma_peer_cfg_from_descriptor: the whole input is the
// descriptor, with its size.
//
// Properties (the layout: one byte, direct_write_to_pmem; extra bytes
// ignored), computed here without the library's decoder:
// - it succeeds exactly when the input has at least one byte, and then sets
//   *pcfg_ptr; otherwise RPMA_E_INVAL and *pcfg_ptr untouched;
// - rpma_peer_cfg_get_direct_write_to_pmem gives byte 0 != 0;
// - the descriptor size is 1 and rpma_peer_cfg_get_descriptor writes exactly
//   one byte, the canonical 0 or 1 of that flag (so it equals the input's
//   first byte whenever that byte is 0 or 1), and decoding it again gives
//   the same configuration;
// - rpma_peer_cfg_delete frees it and sets the pointer to NULL.
#include <librpma.h>

#include "fuzz_input.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace {

constexpr const char* kName = "peer_cfg_descriptor_fuzz";

void check(bool ok, const char* what) {
  if (!ok) fuzz::property_failed(kName, what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto* desc = new std::uint8_t[size == 0 ? 1 : size];
  if (size > 0) std::memcpy(desc, data, size);

  auto* sentinel = reinterpret_cast<rpma_peer_cfg*>(std::uintptr_t{0x1});
  rpma_peer_cfg* cfg = sentinel;
  const int rc = rpma_peer_cfg_from_descriptor(desc, size, &cfg);
  if (size == 0) {
    check(rc == RPMA_E_INVAL, "an empty descriptor must give RPMA_E_INVAL");
    check(cfg == sentinel, "a failed decode must not touch *pcfg_ptr");
    delete[] desc;
    return 0;
  }
  check(rc == 0 && cfg != sentinel && cfg != nullptr, "a non-empty descriptor must decode");

  const bool expect_direct = desc[0] != 0;
  bool direct = !expect_direct;
  check(rpma_peer_cfg_get_direct_write_to_pmem(cfg, &direct) == 0, "get_direct_write_to_pmem");
  check(direct == expect_direct, "direct_write_to_pmem is not byte 0 != 0");

  size_t desc_size = 0;
  check(rpma_peer_cfg_get_descriptor_size(cfg, &desc_size) == 0 && desc_size == 1,
        "the descriptor size is not 1");
  // Guard bytes around the output: exactly desc_size bytes are written.
  std::uint8_t out[3] = {0xAA, 0xAA, 0xAA};
  check(rpma_peer_cfg_get_descriptor(cfg, out + 1) == 0, "get_descriptor");
  check(out[0] == 0xAA && out[2] == 0xAA, "get_descriptor wrote outside its byte");
  check(out[1] == (expect_direct ? 1 : 0), "the descriptor is not the canonical flag byte");
  if (desc[0] <= 1) check(out[1] == desc[0], "a canonical descriptor does not round-trip");

  rpma_peer_cfg* again = nullptr;
  check(rpma_peer_cfg_from_descriptor(out + 1, 1, &again) == 0, "decoding the descriptor again");
  bool direct_again = !direct;
  check(rpma_peer_cfg_get_direct_write_to_pmem(again, &direct_again) == 0 && direct_again == direct,
        "decode(encode(x)) != x");

  check(rpma_peer_cfg_delete(&again) == 0 && again == nullptr, "rpma_peer_cfg_delete");
  check(rpma_peer_cfg_delete(&cfg) == 0 && cfg == nullptr, "rpma_peer_cfg_delete");
  delete[] desc;
  return 0;
}

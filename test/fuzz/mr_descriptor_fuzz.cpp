// libFuzzer harness for rpma_mr_remote_from_descriptor (and the C++
// arpma::remote_mr::from_descriptor under it): the whole input is the
// descriptor, with its size.
//
// Properties, from the layout librpma documents (21 bytes: address u64 LE,
// size u64 LE, rkey u32 LE, usage u8; extra bytes ignored), computed here
// without the library's decoder:
// - it succeeds exactly when the input has at least 21 bytes and usage != 0,
//   and then sets *mr_ptr; on failure it returns RPMA_E_INVAL and leaves
//   *mr_ptr alone;
// - rpma_mr_remote_get_size gives the encoded size, rpma_mr_remote_get_flush_type
//   the usage's flush bits and nothing else, and the region's descriptor
//   (remote_mr::descriptor) gives the first 21 input bytes back;
// - decoding that descriptor again gives the same region (a fixed point);
// - rpma_mr_remote_delete frees it and sets the pointer to NULL.
#include <librpma.h>

#include "arpma/mr.hpp"
#include "fuzz_input.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace {

constexpr const char* kName = "mr_descriptor_fuzz";
constexpr std::size_t kLayoutSize = 21;

void check(bool ok, const char* what) {
  if (!ok) fuzz::property_failed(kName, what);
}

std::uint64_t le(const std::uint8_t* p, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // Rejections log at ERROR; thousands of them per second would only slow the run.
  (void)rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_DISABLED);
  (void)rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_DISABLED);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // A private copy: the library must not read past `size` (ASan sees it).
  auto* desc = new std::uint8_t[size == 0 ? 1 : size];
  if (size > 0) std::memcpy(desc, data, size);

  auto* sentinel = reinterpret_cast<rpma_mr_remote*>(std::uintptr_t{0x1});
  rpma_mr_remote* mr = sentinel;
  const int rc = rpma_mr_remote_from_descriptor(desc, size, &mr);
  const bool expect_ok = size >= kLayoutSize && desc[20] != 0;
  if (!expect_ok) {
    check(rc == RPMA_E_INVAL, "a short descriptor or usage 0 must give RPMA_E_INVAL");
    check(mr == sentinel, "a failed decode must not touch *mr_ptr");
    delete[] desc;
    return 0;
  }
  check(rc == 0, "a descriptor of 21 bytes or more with usage != 0 must decode");
  check(mr != sentinel && mr != nullptr, "a successful decode must set *mr_ptr");

  size_t mr_size = 0;
  check(rpma_mr_remote_get_size(mr, &mr_size) == 0, "rpma_mr_remote_get_size failed");
  check(mr_size == le(desc + 8, 8), "size differs from the encoded one");
  int flush_type = -1;
  check(rpma_mr_remote_get_flush_type(mr, &flush_type) == 0, "get_flush_type failed");
  constexpr int kFlushBits =
      RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY;
  check(flush_type == (desc[20] & kFlushBits), "flush type is not the usage's flush bits");
  check((flush_type & ~kFlushBits) == 0, "flush type has bits besides the two flush types");

  // The C++ object under the handle: its fields and the descriptor it re-encodes.
  auto decoded = arpma::remote_mr::from_descriptor({desc, size});
  check(decoded.has_value(), "remote_mr::from_descriptor disagrees with the C API");
  const arpma::remote_mr& r = decoded.value();
  check(r.addr() == le(desc, 8) && r.size() == le(desc + 8, 8) &&
            r.rkey() == static_cast<std::uint32_t>(le(desc + 16, 4)) && r.usage() == desc[20],
        "decoded fields differ from the layout");
  const arpma::mr_descriptor again = r.descriptor();
  check(again.size() == kLayoutSize, "the descriptor is not 21 bytes");
  check(std::memcmp(again.data(), desc, kLayoutSize) == 0,
        "the descriptor does not give the input's 21 bytes back");
  auto twice = arpma::remote_mr::from_descriptor(again);
  check(twice.has_value() && twice.value().descriptor() == again, "decode(encode(x)) != x");

  check(rpma_mr_remote_delete(&mr) == 0 && mr == nullptr, "rpma_mr_remote_delete");
  delete[] desc;
  return 0;
}

// What the fuzz harnesses share: reading fixed-width fields from the input
// (zero once it runs out, so every input is a valid program) and failing a
// property loudly enough for libFuzzer to keep the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

namespace fuzz {

[[noreturn]] inline void property_failed(const char* harness, const char* what) {
  std::fprintf(stderr, "%s: property violated: %s\n", harness, what);
  std::abort();
}

/// Consumes the input front to back; reads past its end give zeros.
class input {
 public:
  input(const std::uint8_t* data, std::size_t size) noexcept : rest_(data, size) {}

  [[nodiscard]] bool empty() const noexcept { return rest_.empty(); }
  [[nodiscard]] std::size_t left() const noexcept { return rest_.size(); }

  std::uint8_t u8() noexcept { return static_cast<std::uint8_t>(le(1)); }
  std::uint16_t u16() noexcept { return static_cast<std::uint16_t>(le(2)); }
  std::uint32_t u32() noexcept { return static_cast<std::uint32_t>(le(4)); }
  std::uint64_t u64() noexcept { return le(8); }

  /// Up to `n` bytes as they are.
  std::span<const std::uint8_t> bytes(std::size_t n) noexcept {
    const std::size_t k = n < rest_.size() ? n : rest_.size();
    const auto out = rest_.first(k);
    rest_ = rest_.subspan(k);
    return out;
  }

 private:
  std::uint64_t le(std::size_t n) noexcept {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n && !rest_.empty(); ++i) {
      v |= static_cast<std::uint64_t>(rest_.front()) << (8 * i);
      rest_ = rest_.subspan(1);
    }
    return v;
  }

  std::span<const std::uint8_t> rest_;
};

}  // namespace fuzz

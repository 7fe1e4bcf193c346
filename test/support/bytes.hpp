// Test payloads as text: what a test writes, and what it reads back for a readable failure.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace arpma::test {

/// The bytes of `s`, to post or register.
inline std::vector<std::uint8_t> bytes(std::string_view s) { return {s.begin(), s.end()}; }

/// The first `n` bytes of `data` (at most all of them) as a string, to compare.
inline std::string text(std::span<const std::uint8_t> data, std::size_t n) {
  return {data.begin(), data.begin() + static_cast<std::ptrdiff_t>(std::min(n, data.size()))};
}

}  // namespace arpma::test

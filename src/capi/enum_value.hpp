// Reading enum arguments that come from C.
#pragma once

#include <cstring>
#include <type_traits>

namespace arpma::capi {

/// A C caller may pass any int as an enum argument. Loading an enum object
/// whose value is outside the enum's range is undefined in C++ (clang's
/// -fsanitize=enum reports it), so the value is read as its bytes instead.
template <typename Enum>
int int_value(const Enum& e) noexcept {
  std::underlying_type_t<Enum> value;
  std::memcpy(&value, &e, sizeof value);
  return static_cast<int>(value);
}

}  // namespace arpma::capi

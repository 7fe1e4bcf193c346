// The one way from arpma's implementation (and the public headers' own
// templates) to a public handle's state: every handle befriends
// detail::access, and nothing else of it is public. Not part of the API.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace arpma::detail {

template <class T>
inline constexpr bool is_unique_ptr = false;
template <class T, class D>
inline constexpr bool is_unique_ptr<std::unique_ptr<T, D>> = true;

struct access {
  /// The handle's state: a raw pointer (null when empty) for a handle that
  /// owns its state alone, the shared_ptr for one that shares it.
  template <class Handle>
  [[nodiscard]] static decltype(auto) state(Handle& h) noexcept {
    if constexpr (is_unique_ptr<std::remove_cv_t<decltype(h.state_)>>)
      return h.state_.get();
    else
      return (h.state_);
  }
  /// Gives up a solely owned state (the handle is empty after).
  template <class Handle>
  [[nodiscard]] static auto release(Handle& h) noexcept {
    return std::move(h.state_);
  }
  /// A handle around `args` (its state, made by the implementation).
  template <class Handle, class... Args>
  [[nodiscard]] static Handle make(Args&&... args) noexcept {
    return Handle(std::forward<Args>(args)...);
  }
};

}  // namespace arpma::detail

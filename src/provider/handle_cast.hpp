// Conversions between a provider's objects and the opaque handles of the
// provider interface (the handle types are never defined; only cast).
#pragma once

namespace arpma::provider {

/// The provider's object behind an opaque handle.
template <class T, class H>
T* as(H* handle) noexcept {
  return reinterpret_cast<T*>(handle);
}

/// The opaque handle for a provider's object.
template <class H, class T>
H* handle(T* object) noexcept {
  return reinterpret_cast<H*>(object);
}

}  // namespace arpma::provider

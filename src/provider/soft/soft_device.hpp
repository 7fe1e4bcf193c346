// The soft device's `struct ibv_context`: what rpma_utils_get_ibv_context
// hands out. Programs may pass it to libibverbs; every verb then fails
// (EOPNOTSUPP, or NULL with errno) instead of crashing.
#pragma once

#include <cstddef>
#include <memory>

struct ibv_context;

namespace arpma::provider {

class soft_device {
 public:
  soft_device();
  ~soft_device();
  soft_device(const soft_device&) = delete;
  soft_device& operator=(const soft_device&) = delete;
  soft_device(soft_device&&) = delete;
  soft_device& operator=(soft_device&&) = delete;

  [[nodiscard]] ibv_context* context() const noexcept { return context_; }

 private:
  /// The ibv_device, with room behind it for the fields libibverbs keeps
  /// there for its own devices (it counts references in them).
  std::unique_ptr<std::byte[]> device_;
  void* from_libibverbs_ = nullptr;   ///< the context libibverbs allocated, if it did
  std::unique_ptr<std::byte[]> own_;  ///< else ours
  ibv_context* context_ = nullptr;
};

}  // namespace arpma::provider

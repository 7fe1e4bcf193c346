// Memory registrations: arpma::local_mr (this side's, RAII) and
// arpma::remote_mr (the other side's, a value decoded from its descriptor).
#pragma once

#include "arpma/detail/access.hpp"
#include "arpma/peer.hpp"
#include "arpma/result.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <system_error>

namespace arpma {

namespace detail {
struct local_mr_state;
}

/// What a registered region is used for; the values of RPMA_MR_USAGE_*.
namespace mr_usage {
inline constexpr int read_src = 1 << 0;
inline constexpr int read_dst = 1 << 1;
inline constexpr int write_src = 1 << 2;
inline constexpr int write_dst = 1 << 3;
inline constexpr int flush_type_visibility = 1 << 4;
inline constexpr int flush_type_persistent = 1 << 5;
inline constexpr int send = 1 << 6;
inline constexpr int recv = 1 << 7;
inline constexpr int all = (1 << 8) - 1;
}  // namespace mr_usage

/// What local_mr::advise asks (ibv_advise_mr's advice values).
enum class mr_advice : int { prefetch = 0, prefetch_write = 1, prefetch_no_fault = 2 };
/// local_mr::advise's flag: complete only once the prefetch is done
/// (IBV_ADVISE_MR_FLAG_FLUSH).
inline constexpr std::uint32_t mr_advise_flush = 1;

/// librpma's wire form of a registration: address (u64), length (u64),
/// rkey (u32), usage (u8), little-endian, 21 bytes.
inline constexpr std::size_t mr_descriptor_size = 21;
using mr_descriptor = std::array<std::uint8_t, mr_descriptor_size>;

/// A registered region of this process's memory. Move-only; destroying it
/// deregisters. It keeps its peer's protection domain alive.
class local_mr {
 public:
  /// Registers [ptr, ptr + size) for `usage` (a mask of mr_usage values).
  /// Errors: errc::invalid_argument (null ptr, size 0, usage 0 or unknown
  /// bits), the provider's errno (== errc::provider).
  [[nodiscard]] static result<local_mr> reg(const peer& p, void* ptr, std::size_t size, int usage);

  local_mr() noexcept;
  local_mr(local_mr&&) noexcept;
  local_mr& operator=(local_mr&&) noexcept;
  ~local_mr();

  explicit operator bool() const noexcept { return state_ != nullptr; }
  [[nodiscard]] void* ptr() const noexcept;
  [[nodiscard]] std::size_t size() const noexcept;
  [[nodiscard]] int usage() const noexcept;
  /// What the other side needs to reach this region (send it securely:
  /// private data is not authenticated).
  [[nodiscard]] mr_descriptor descriptor() const noexcept;
  /// Advises the device on [offset, offset + len) of a region registered
  /// with On-Demand Paging (ibv_advise_mr, as rpma_mr_advise): `flags` 0 or
  /// mr_advise_flush. Errors: errc::invalid_argument (an empty object, a
  /// range outside the region or over 4 GiB), the provider's errno
  /// (EOPNOTSUPP where the device has no On-Demand Paging, EINVAL / EFAULT
  /// for what it refuses). The soft provider has nothing to fault in: a
  /// valid advice succeeds at once.
  [[nodiscard]] std::error_code advise(std::size_t offset, std::size_t len, mr_advice advice,
                                       std::uint32_t flags = 0) const noexcept;
  /// Deregisters now; the provider's error if that failed (the object is
  /// emptied either way).
  std::error_code dereg() noexcept;

 private:
  friend struct detail::access;
  explicit local_mr(std::unique_ptr<detail::local_mr_state> state) noexcept;
  std::unique_ptr<detail::local_mr_state> state_;
};

/// A region of the other side, as its descriptor described it.
class remote_mr {
 public:
  /// Decodes a descriptor. Errors: errc::invalid_argument (fewer than 21
  /// bytes, or usage 0 — as librpma). Extra bytes are ignored.
  [[nodiscard]] static result<remote_mr> from_descriptor(std::span<const std::uint8_t> desc);

  remote_mr() noexcept = default;

  [[nodiscard]] std::uint64_t addr() const noexcept { return addr_; }
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  [[nodiscard]] std::uint32_t rkey() const noexcept { return rkey_; }
  [[nodiscard]] int usage() const noexcept { return usage_; }
  /// The flush types the region supports: usage & (persistent | visibility),
  /// a mask of mr_usage values (as rpma_mr_remote_get_flush_type).
  [[nodiscard]] int flush_type() const noexcept {
    return usage_ & (mr_usage::flush_type_persistent | mr_usage::flush_type_visibility);
  }
  [[nodiscard]] mr_descriptor descriptor() const noexcept;

 private:
  std::uint64_t addr_ = 0;
  std::uint64_t size_ = 0;
  std::uint32_t rkey_ = 0;
  int usage_ = 0;
};

}  // namespace arpma

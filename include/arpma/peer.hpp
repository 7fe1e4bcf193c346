// arpma::peer: a protection domain on one RDMA device, and device lookup.
#pragma once

#include "arpma/detail/access.hpp"
#include "arpma/result.hpp"

#include <memory>
#include <string_view>

struct ibv_context;

namespace arpma {

namespace detail {
struct peer_state;
}

/// How `get_ibv_context` interprets the address (librpma's
/// RPMA_UTIL_IBV_CONTEXT_LOCAL / _REMOTE).
enum class ibv_context_type : int { local = 0, remote = 1 };

/// The device that owns `addr`: a local address is bound, a remote one is
/// resolved (up to 1000 ms). Blocking, like rpma_utils_get_ibv_context.
/// \param addr an IPv4/IPv6 address or a host name
/// \param type whether `addr` is local (bind) or remote (resolve)
/// \return the device context (owned by the provider, never freed by the caller)
/// Errors: errc::invalid_argument for an empty address; a provider error
/// (== errc::provider) when no device owns it.
[[nodiscard]] result<::ibv_context*> get_ibv_context(std::string_view addr, ibv_context_type type);

/// Whether `context`'s device does On-Demand Paging for RC reads and writes
/// (rpma_utils_ibv_context_is_odp_capable). Where it does, local_mr::reg
/// registers with On-Demand Paging when a plain registration is refused
/// with EOPNOTSUPP (FS-DAX memory), as librpma. errc::invalid_argument for a
/// null context or one no provider knows.
[[nodiscard]] result<bool> is_odp_capable(::ibv_context* context) noexcept;

/// A protection domain on one device. Movable; the PD lives as long as the
/// peer or anything created from it (connection requests keep it alive).
class peer {
 public:
  /// Allocates the PD.
  /// \param context a device context from get_ibv_context (or rdma-core's)
  /// Errors: invalid_argument (null context), errc::no_memory, or the
  /// provider's error.
  [[nodiscard]] static result<peer> create(::ibv_context* context);

  peer(peer&&) noexcept = default;
  peer& operator=(peer&&) noexcept = default;
  ~peer();

  [[nodiscard]] ::ibv_context* context() const noexcept;
  /// Releases this handle; the PD goes when nothing else uses it. Returns
  /// the provider's error if the PD was freed here and that failed.
  std::error_code close() noexcept;

 private:
  friend struct detail::access;
  explicit peer(std::shared_ptr<detail::peer_state> state) noexcept;
  std::shared_ptr<detail::peer_state> state_;
};

}  // namespace arpma

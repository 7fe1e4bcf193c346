// What a local memory registration holds.
#pragma once

#include "core/peer_state.hpp"
#include "provider/provider.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <system_error>

namespace arpma::detail {

struct local_mr_state {
  local_mr_state(std::shared_ptr<peer_state> p, provider::mr* m, void* address, std::size_t length,
                 int use) noexcept
      : peer(std::move(p)), mr(m), ptr(address), size(length), usage(use) {}
  local_mr_state(const local_mr_state&) = delete;
  local_mr_state& operator=(const local_mr_state&) = delete;
  ~local_mr_state() { (void)dereg(); }

  std::error_code dereg() noexcept;
  [[nodiscard]] std::uint32_t lkey() const noexcept { return peer->prov.mr_lkey(mr); }
  [[nodiscard]] std::uint32_t rkey() const noexcept { return peer->prov.mr_rkey(mr); }
  /// The SGE for [offset, offset + len): the caller checked the bounds.
  [[nodiscard]] provider::sge slice(std::size_t offset, std::size_t len) const noexcept;
  /// True when [offset, offset + len) lies inside the region (overflow-safe).
  [[nodiscard]] bool contains(std::size_t offset, std::size_t len) const noexcept {
    return offset <= size && len <= size - offset;
  }

  std::shared_ptr<peer_state> peer;
  provider::mr* mr;
  void* ptr;
  std::size_t size;
  int usage;
};

/// librpma's usage → ibv access mapping (rpma_peer_usage2access); the flush
/// access bits only where the device flushes natively.
[[nodiscard]] int usage_to_access(int usage, bool native_flush) noexcept;

}  // namespace arpma::detail

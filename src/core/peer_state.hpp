// What a peer is underneath: its provider, device and protection domain.
#pragma once

#include "provider/provider.hpp"

#include <system_error>

namespace arpma::detail {

struct peer_state {
  peer_state(provider::provider& p, provider::device* d, provider::pd* domain) noexcept
      : prov(p), dev(d), pd(domain) {}
  peer_state(const peer_state&) = delete;
  peer_state& operator=(const peer_state&) = delete;
  ~peer_state() { (void)release(); }

  /// Deallocates the PD now; later calls return success.
  std::error_code release() noexcept;

  provider::provider& prov;
  provider::device* dev;
  provider::pd* pd;
};

}  // namespace arpma::detail

// Waiting for a provider's connection-manager events in tests that drive a
// provider directly: bounded, by polling the channel's fd.
#pragma once

#include "provider/provider.hpp"

#include <poll.h>

#include <cerrno>
#include <chrono>
#include <optional>
#include <system_error>

namespace arpma::test {

/// The next event of `channel` within `limit`; nullopt after it, or on an
/// error other than EAGAIN.
inline std::optional<provider::cm_event> next_event(provider::provider& p,
                                                    provider::event_channel* channel,
                                                    std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    provider::cm_event event;
    const std::error_code ec = p.get_cm_event(channel, event);
    if (!ec) return event;
    if (ec.value() != EAGAIN) return std::nullopt;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd ready{p.event_channel_fd(channel), POLLIN, 0};
    (void)::poll(&ready, 1, static_cast<int>(left.count()));
  }
}

}  // namespace arpma::test

// Waiting for a provider's connection-manager events in tests that drive a
// provider directly: bounded, by polling the channel's fd.
#pragma once

#include "provider/provider.hpp"

#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <optional>
#include <system_error>

namespace arpma::test {

/// Sets O_NONBLOCK on a channel's fd, as the core's loop does to those it
/// watches (the provider makes them blocking, as rdma-core's): for tests that
/// read a provider's channels as the loop reads them.
[[nodiscard]] inline bool set_nonblocking(int fd) noexcept {
  const int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

/// The next event of `channel` within `limit`; nullopt after it, or on an
/// error other than EAGAIN. Asks the fd first: a channel starts blocking, and
/// a read of an empty one would wait past the limit.
inline std::optional<provider::cm_event> next_event(provider::provider& p,
                                                    provider::event_channel* channel,
                                                    std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd ready{p.event_channel_fd(channel), POLLIN, 0};
    if (::poll(&ready, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0))) > 0) {
      provider::cm_event event;
      const std::error_code ec = p.get_cm_event(channel, event);
      if (!ec) return event;
      if (ec.value() != EAGAIN) return std::nullopt;
    }
    if (left.count() <= 0) return std::nullopt;
  }
}

}  // namespace arpma::test

// The one way arpma takes a completion channel's events: get the event,
// acknowledge it, re-arm its CQ, with one retry policy. Used by the C++
// dispatcher, the shared completion channel, cq::async_wait, rpma_cq_wait
// and rpma_conn_wait.
#pragma once

#include "core/fd_ready.hpp"
#include "provider/provider.hpp"
#include "support/log.hpp"

#include <cstddef>
#include <cstdint>
#include <system_error>

namespace arpma::detail {

/// Acknowledges one event of `cq` and re-arms it. A failed re-arm is tried
/// once more: an unarmed CQ never signals again, so whatever waits on it
/// would wait forever (found by fault injection). The error when both fail.
inline std::error_code acknowledge_and_rearm(provider::provider& p, provider::cq* cq) noexcept {
  p.ack_cq_events(cq, 1);
  auto ec = p.req_notify_cq(cq, false);
  if (!ec) return {};
  ARPMA_LOG_FAILURE("re-arm cq", ec);
  ec = p.req_notify_cq(cq, false);
  if (ec) ARPMA_LOG_FAILURE("re-arm cq again; failing what waits on it", ec);
  return ec;
}

/// Takes every event `channel` holds now (`at_most` of them), reading only
/// what is there (a blocking fd must never block the loop). For each:
/// `ours(cq)` says whether to take it (another's event is left
/// unacknowledged); then it is acknowledged, its CQ re-armed, and
/// `taken(cq, rearm_error)` called. What is left is seen by the next wait on
/// the fd: Asio's reactor re-arms an edge-triggered descriptor for every
/// wait (EPOLL_CTL_MOD), and the kernel reports an fd that is readable then.
/// `channel_fd::nonblocking`: the caller made the fd O_NONBLOCK, so an event
/// is read without asking the fd first (EAGAIN ends the loop).
enum class channel_fd { any, nonblocking };

template <class Ours, class Taken>
void take_ready_cq_events(provider::provider& p, provider::comp_channel* channel, Ours ours,
                          Taken taken, std::size_t at_most = SIZE_MAX,
                          channel_fd mode = channel_fd::any) {
  const int fd = p.comp_channel_fd(channel);
  for (std::size_t n = 0; n < at_most && (mode == channel_fd::nonblocking || readable(fd)); ++n) {
    auto fired = p.get_cq_event(channel);
    if (!fired) break;
    if (!ours(fired.value())) continue;
    taken(fired.value(), acknowledge_and_rearm(p, fired.value()));
  }
}

}  // namespace arpma::detail

// arpma::completion_channel: one completion channel (one fd) for the CQs of
// many connections on one io_context, instead of one channel per connection.
#pragma once

#include "arpma/conn_cfg.hpp"
#include "arpma/detail/access.hpp"
#include "arpma/peer.hpp"
#include "arpma/result.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <cstddef>
#include <memory>
#include <system_error>

namespace arpma {

namespace detail {
struct comp_channel_state;
}

/// A completion channel that connections made with a conn_cfg it was
/// attached to (attach_to) create their CQ and RCQ on. Without one, every
/// connection has a channel of its own: one fd per connection (two with an
/// RCQ), which at 10,000 connections is half of a typical fd limit. With one,
/// the channel's fd is watched once on the io_context, each CQ event is
/// acknowledged, its CQ re-armed and drained by the connection that owns it.
///
/// What changes for a connection on a shared channel: its async_* operations
/// work as before; completion_queue().async_wait answers errc::shared_channel
/// (as rpma_cq_wait on a shared channel) — use the async_* operations, or
/// poll() driven by something else. The io_context must be the one the
/// connection's request is made or received on, and the channel's peer's
/// device the connection's (else the request fails with
/// errc::invalid_argument).
///
/// Each connection made with it shares its ownership: this handle can go
/// first, and the channel is destroyed with its last connection. Move-only;
/// not thread-safe (one io_context, as its connections).
class completion_channel {
 public:
  using executor_type = boost::asio::any_io_executor;

  /// Creates the channel on `p`'s device; its events are taken on `ex`.
  /// Errors: errc::invalid_argument (no executor, a closed or moved-from
  /// peer), errc::no_memory, or the provider's error (== errc::provider).
  [[nodiscard]] static result<completion_channel> create(const executor_type& ex, const peer& p);

  completion_channel() noexcept;
  completion_channel(completion_channel&&) noexcept;
  completion_channel& operator=(completion_channel&&) noexcept;
  ~completion_channel();

  explicit operator bool() const noexcept { return state_ != nullptr; }

  /// The io_context's executor given to create(); empty for an empty handle.
  [[nodiscard]] executor_type get_executor() const noexcept;
  /// The channel's fd (watched by arpma while operations are pending: read
  /// it only to see it exists); -1 for an empty handle.
  [[nodiscard]] int native_handle() const noexcept;
  /// How many CQs live on the channel now (a connection has one or two).
  [[nodiscard]] std::size_t cq_count() const noexcept;

  /// Makes connections created with `cfg` put their CQs on this channel;
  /// returns `cfg`. `cfg` does not keep the channel: keep this handle while
  /// making requests with it (their connections then keep it themselves).
  /// Overrides cfg.shared_completion_channel (CQ and RCQ share it anyway).
  conn_cfg& attach_to(conn_cfg& cfg) const noexcept {
    cfg.completion_channel = state_;
    return cfg;
  }

  /// Lets go of this handle; when no connection uses the channel it is
  /// destroyed now and the provider's error, if any, is returned.
  std::error_code close() noexcept;

 private:
  friend struct detail::access;
  explicit completion_channel(std::shared_ptr<detail::comp_channel_state> state) noexcept;
  std::shared_ptr<detail::comp_channel_state> state_;
};

}  // namespace arpma

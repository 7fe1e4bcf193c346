// What the server and the client share: the provider, the peer, the exit statuses, and the
// bounded wait for an operation that may never complete.
#pragma once

#include "args.hpp"

#include <arpma/peer.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <optional>
#include <string>

namespace arpma_perf {

namespace asio = boost::asio;
inline constexpr auto awaitable_tuple = asio::as_tuple(asio::use_awaitable);

inline constexpr int exit_ok = 0;
inline constexpr int exit_failed = 1;
inline constexpr int exit_usage = 2;
inline constexpr int exit_sigint = 130;  // 128 + SIGINT, as shells report it
inline constexpr int exit_sigterm = 143;

/// How long a side waits for a connection step, a disconnect, or (the client) any
/// completion while operations are in flight, before it gives up.
inline constexpr auto quiet_limit = std::chrono::seconds(10);
/// How long a client keeps retrying while the server is not listening yet.
inline constexpr auto connect_retry_limit = std::chrono::seconds(5);
/// Busy-poll mode's budget per wake-up (connection::set_busy_poll).
inline constexpr auto busy_poll_budget = std::chrono::microseconds(1000);

/// Makes ARPMA_PROVIDER say which provider the process uses (the option wins over the
/// environment; auto becomes verbs when an RDMA device is listed, else soft) and returns
/// its name. Call before the first peer is made.
std::string select_provider(provider_choice choice);

/// The peer for `addr` (the server's own address, or the client's way to the server); empty
/// after printing why not to stderr.
std::optional<arpma::peer> make_peer(const std::string& addr, bool server);

/// Cancels the operation its token is bound to when `limit` passes first; expired() says so.
class deadline {
 public:
  explicit deadline(const asio::any_io_executor& ex) : timer_(ex) {}
  auto arm(std::chrono::steady_clock::duration limit) {
    expired_ = false;
    armed_ = true;
    timer_.expires_after(limit);
    timer_.async_wait([this](std::error_code ec) {
      // Disarmed: the operation finished in time (also when the timer fired just as it
      // finished, this handler already queued).
      if (ec || !armed_) return;
      armed_ = false;
      expired_ = true;
      signal_.emit(asio::cancellation_type::terminal);
    });
    return asio::bind_cancellation_slot(signal_.slot(), awaitable_tuple);
  }
  void disarm() {
    armed_ = false;
    timer_.cancel();
  }
  [[nodiscard]] bool expired() const { return expired_; }

 private:
  asio::steady_timer timer_;
  asio::cancellation_signal signal_;
  bool armed_ = false;
  bool expired_ = false;
};

}  // namespace arpma_perf

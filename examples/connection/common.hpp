// What the C++ connection examples share: the greetings, argument parsing,
// printing private data, and a deadline that cancels one operation.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace example {

using namespace std::chrono_literals;

// rdma_cm carries at most 56 bytes of private data with a connect request.
inline constexpr std::string_view client_hello = "hello from client";
inline constexpr std::string_view server_hello = "hello from server";
// How long any side waits to hear from the other before giving up: 10 s, or
// $EXAMPLE_QUIET_MS (test/fault/run.py shortens it: there one side fails on
// purpose and the other's wait for it is dead time).
inline const std::chrono::milliseconds quiet_limit = [] {
  const char* env = std::getenv("EXAMPLE_QUIET_MS");  // NOLINT(concurrency-mt-unsafe): at start
  const int ms = env != nullptr ? std::atoi(env) : 0;
  return ms > 0 ? std::chrono::milliseconds(ms) : std::chrono::milliseconds(10s);
}();
// How long a client keeps retrying while the server is not listening yet:
// 5 s, or the quiet limit when that is shorter.
inline const std::chrono::milliseconds retry_limit =
    std::min(std::chrono::milliseconds(5s), quiet_limit);
inline constexpr auto retry_pause = 200ms;

inline std::span<const std::uint8_t> bytes(std::string_view s) {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): chars as bytes
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// Private data as text: transports may pad it (with zeros), so stop at the
// first NUL or at the end.
inline std::string text(std::span<const std::uint8_t> data) {
  std::string s(data.begin(), data.end());
  return s.substr(0, s.find('\0'));
}

// What a server that is not listening yet looks like to async_connect:
// REJECTED (rdma_cm over InfiniBand) or UNREACHABLE (the soft provider, iWARP).
inline bool not_listening_yet(std::error_code ec) {
  return ec == std::errc::connection_refused || ec == std::errc::host_unreachable;
}

struct args {
  std::string addr;
  std::string port;
  int count = 1;  // connections the server handles before it exits
};

// <addr> <port> [--count N]; exits with a usage message otherwise.
inline args parse_args(int argc, char* argv[], bool server) {
  const std::span<char*> argl(argv, static_cast<std::size_t>(argc));
  args a;
  bool ok = argl.size() == 3 || (server && argl.size() == 5 && argl[3] == std::string("--count"));
  if (ok) {
    a.addr = argl[1];
    a.port = argl[2];
    if (argl.size() == 5) a.count = std::atoi(argl[4]);
    ok = a.count > 0;
  }
  if (!ok) {
    std::fprintf(stderr, "usage: %s <addr> <port>%s\n", argl[0], server ? " [--count N]" : "");
    std::exit(2);  // NOLINT(concurrency-mt-unsafe)
  }
  return a;
}

// Cancels the operation it is bound to when the limit passes first: arm()
// wraps a completion token, the operation then completes with
// operation_aborted and expired() says why.
class deadline {
 public:
  explicit deadline(const boost::asio::any_io_executor& ex) : timer_(ex) {}

  template <class CompletionToken>
  auto arm(std::chrono::steady_clock::duration limit, CompletionToken&& token) {
    expired_ = false;
    armed_ = true;
    timer_.expires_after(limit);
    timer_.async_wait([this](std::error_code ec) {
      // Disarmed: the operation finished in time (also when the timer fired
      // just as it finished, its handler already queued).
      if (ec || !armed_) return;
      expired_ = true;
      armed_ = false;
      signal_.emit(boost::asio::cancellation_type::terminal);
    });
    return boost::asio::bind_cancellation_slot(signal_.slot(),
                                               std::forward<CompletionToken>(token));
  }
  void disarm() {
    armed_ = false;
    timer_.cancel();
  }
  [[nodiscard]] bool expired() const { return expired_; }

 private:
  boost::asio::steady_timer timer_;
  boost::asio::cancellation_signal signal_;
  bool armed_ = false;
  bool expired_ = false;
};

}  // namespace example

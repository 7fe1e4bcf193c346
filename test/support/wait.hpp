// Waiting in tests without sleeping for a guessed time: run a loop, or poll a
// condition, until it holds or a limit passes. Each returns whether it holds,
// for the test to check (ASSERT_TRUE(run_until(...))).
#pragma once

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <thread>

namespace arpma::test {

/// Runs `io` in 10 ms slices until `done()` or `limit`; whether it holds.
template <class Done>
[[nodiscard]] bool run_until(boost::asio::io_context& io, Done done,
                             std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < end) {
    io.restart();
    io.run_for(std::chrono::milliseconds(10));
  }
  return done();
}

/// Runs what is ready now, and nothing that waits: a few rounds, so that
/// handlers posted by the handlers run too.
inline void settle(boost::asio::io_context& io) {
  for (int i = 0; i < 5; ++i) {
    io.restart();
    (void)io.poll();
  }
}

/// Polls `done()` every millisecond (for state another thread changes, e.g.
/// a provider's progress thread) until it holds or `limit`; whether it holds.
template <class Done>
[[nodiscard]] bool eventually(Done done,
                              std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= end) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace arpma::test

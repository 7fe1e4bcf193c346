// The soft provider's progress engine: one thread that plays the NIC.
#pragma once

#include "provider/soft/soft_provider.hpp"
#include "provider/soft/soft_traffic.hpp"
#include "support/log.hpp"

#include <pthread.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <thread>

namespace arpma::provider {

// The progress thread: it plays the NIC. Every socket, acceptor and timer of
// the connection manager is used only on this thread once it has been handed
// over (application threads post to it).
class soft_provider::engine {
 public:
  engine() : guard_(io_.get_executor()), thread_([this] { run(); }) {}
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;
  engine(engine&&) = delete;
  engine& operator=(engine&&) = delete;
  // Handlers never block, so stop() ends run() after at most one handler; the
  // pending ones are destroyed with the io_context, releasing their ids.
  ~engine() {
    guard_.reset();
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  boost::asio::io_context& io() noexcept { return io_; }

  /// How long the thread keeps polling its sockets after the last handler
  /// before it sleeps in epoll_wait (limits::progress_spin).
  void set_spin(std::chrono::microseconds spin) noexcept {
    spin_ns_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(spin).count(),
                   std::memory_order_relaxed);
  }

  /// False in a child forked after the thread started: the thread is not
  /// there to join, and the epoll instance is shared with the parent.
  [[nodiscard]] bool ours() const noexcept { return owner_ == ::getpid(); }

 private:
  void run() noexcept {
    (void)::pthread_setname_np(::pthread_self(), "arpma-soft");
    for (;;) {
      try {
        loop();
        return;
      } catch (const std::exception& e) {
        ARPMA_LOG(log_level::error, "soft provider progress thread: %s", e.what());
      }
    }
  }

  // A NIC does not sleep between two frames of a stream. Woken for traffic,
  // the thread polls (epoll_wait with no timeout, through io_context::poll)
  // until no traffic has come for the spin time, so that the peer's next batch
  // finds it awake instead of paying a wake-up; only then does it sleep. What
  // moves no bytes (a timer's tick, a post from an application thread) neither
  // starts a spin nor extends one: idle links cost nothing, and a link whose
  // ack ticker runs on after its traffic does not keep a core busy for it.
  void loop() {
    using clock = std::chrono::steady_clock;
    std::uint64_t seen = soft_traffic::moved;
    while (io_.run_one() > 0) {
      const std::chrono::nanoseconds spin(spin_ns_.load(std::memory_order_relaxed));
      if (spin.count() <= 0 || soft_traffic::moved == seen) {
        seen = soft_traffic::moved;
        continue;
      }
      auto last = clock::now();
      for (;;) {
        seen = soft_traffic::moved;
        if (io_.poll() > 0 && soft_traffic::moved != seen) {
          last = clock::now();
          continue;
        }
        if (io_.stopped()) return;
        if (clock::now() - last >= spin) break;  // the last poll moved nothing: seen is current
      }
    }
  }

  pid_t owner_ = ::getpid();
  std::atomic<std::int64_t> spin_ns_{0};
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::thread thread_;
};

}  // namespace arpma::provider

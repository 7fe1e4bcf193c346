// The soft provider's progress engine: one thread that plays the NIC.
#pragma once

#include "provider/soft/soft_provider.hpp"
#include "support/log.hpp"

#include <pthread.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

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

  /// False in a child forked after the thread started: the thread is not
  /// there to join, and the epoll instance is shared with the parent.
  [[nodiscard]] bool ours() const noexcept { return owner_ == ::getpid(); }

 private:
  void run() noexcept {
    (void)::pthread_setname_np(::pthread_self(), "arpma-soft");
    for (;;) {
      try {
        io_.run();
        return;
      } catch (const std::exception& e) {
        ARPMA_LOG(log_level::error, "soft provider progress thread: %s", e.what());
      }
    }
  }

  pid_t owner_ = ::getpid();
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::thread thread_;
};

}  // namespace arpma::provider

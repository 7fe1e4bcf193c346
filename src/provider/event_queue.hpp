// An rdma_cm-like event channel in user space: a queue whose readiness is an
// eventfd in semaphore mode, so one read consumes one event, a non-blocking
// read of an empty queue fails with EAGAIN, and the fd works with epoll/Asio
// exactly like rdma-core's channel fd.
#pragma once

#include "provider/provider.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <deque>
#include <mutex>
#include <system_error>

namespace arpma::provider {

class event_queue {
 public:
  event_queue() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_SEMAPHORE | EFD_CLOEXEC)) {
    if (fd_ < 0) throw std::system_error(errno, std::system_category(), "eventfd");
  }
  event_queue(const event_queue&) = delete;
  event_queue& operator=(const event_queue&) = delete;
  ~event_queue() { ::close(fd_); }

  [[nodiscard]] int fd() const noexcept { return fd_; }

  /// Queues `event` and makes the fd readable; ignored once closed.
  void push(const cm_event& event) {
    const std::lock_guard lock(mutex_);
    if (closed_) return;
    events_.push_back(event);
    const std::uint64_t one = 1;
    (void)!::write(fd_, &one, sizeof one);
  }

  /// Takes the oldest event; EAGAIN when none is pending.
  std::error_code pop(cm_event& out) {
    std::uint64_t one = 0;
    if (::read(fd_, &one, sizeof one) != sizeof one) return {errno, std::system_category()};
    const std::lock_guard lock(mutex_);
    out = events_.front();
    events_.pop_front();
    return {};
  }

  /// Stops accepting events (the channel is being destroyed).
  void close() noexcept {
    const std::lock_guard lock(mutex_);
    closed_ = true;
  }

 private:
  int fd_;
  std::mutex mutex_;
  std::deque<cm_event> events_;
  bool closed_ = false;
};

}  // namespace arpma::provider

// An rdma_cm-like event channel in user space: a queue whose readiness is an
// eventfd in semaphore mode, so one read consumes one event, a non-blocking
// read of an empty queue fails with EAGAIN, and the fd works with epoll/Asio
// exactly like rdma-core's channel fd. Blocking at first, as that fd is.
//
// Invariant: under the mutex, the eventfd counter equals the number of queued
// events less the silent ones (push writes one, pop and extract read one per
// event while holding the mutex, so those reads never block even when the
// fd is blocking). Readiness therefore always means "an event is there".
// Silent events (push_silent) exist only while the thread that queued them is
// about to take them: it settles the rest before it returns.
#pragma once

#include "provider/provider.hpp"
#include "provider/ring.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <mutex>
#include <system_error>
#include <vector>

namespace arpma::provider {

/// A queue of `Event`s (cm events; the CQs a completion channel reports).
template <class Event>
class basic_event_queue {
 public:
  basic_event_queue() : fd_(::eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC)) {
    if (fd_ < 0) throw std::system_error(errno, std::system_category(), "eventfd");
  }
  /// Without exceptions: a failed eventfd (EMFILE, ...) is reported in `ec`
  /// and leaves an unusable queue to be destroyed.
  explicit basic_event_queue(std::error_code& ec) noexcept
      : fd_(::eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC)) {
    if (fd_ < 0) ec = {errno, std::system_category()};
  }
  basic_event_queue(const basic_event_queue&) = delete;
  basic_event_queue& operator=(const basic_event_queue&) = delete;
  basic_event_queue(basic_event_queue&&) = delete;
  basic_event_queue& operator=(basic_event_queue&&) = delete;
  ~basic_event_queue() {
    if (fd_ >= 0) ::close(fd_);
  }

  [[nodiscard]] int fd() const noexcept { return fd_; }

  /// Queues `event` and makes the fd readable; ignored once closed.
  void push(const Event& event) {
    const std::lock_guard lock(mutex_);
    if (closed_) return;
    events_.push_back(event);
    const std::uint64_t one = 1;
    (void)!::write(fd_, &one, sizeof one);
  }

  /// Queues `event` without touching the fd: for the thread that takes it
  /// again before anyone else could be told (a completion channel's reader
  /// completing into its own armed CQ). settle() announces what is left.
  void push_silent(const Event& event) {
    const std::lock_guard lock(mutex_);
    if (closed_) return;
    events_.push_back(event);
    ++silent_;
  }

  /// Makes the fd readable for the events push_silent queued and nobody took.
  void settle() noexcept {
    const std::lock_guard lock(mutex_);
    if (silent_ == 0) return;
    const std::uint64_t count = silent_;
    silent_ = 0;
    (void)!::write(fd_, &count, sizeof count);
  }

  /// Takes the oldest event if there is one, never waiting.
  bool try_pop(Event& out) {
    const std::lock_guard lock(mutex_);
    if (events_.empty()) return false;
    consume(1);
    out = events_.front();
    events_.pop_front();
    return true;
  }

  /// Takes the oldest event. With none pending: EAGAIN when the fd is
  /// non-blocking, else waits for one (as a read of rdma-core's channel fd).
  std::error_code pop(Event& out) {
    for (;;) {
      if (try_pop(out)) return {};
      const int flags = ::fcntl(fd_, F_GETFL);
      if (flags < 0) return {errno, std::system_category()};
      if ((flags & O_NONBLOCK) != 0) return {EAGAIN, std::system_category()};
      pollfd ready{fd_, POLLIN, 0};
      if (::poll(&ready, 1, -1) < 0) return {errno, std::system_category()};
    }
  }

  /// Removes the queued events `pred` selects, oldest first, and returns them
  /// (for moving an id's events to another channel, or dropping them).
  template <class Pred>
  std::vector<Event> extract(Pred pred) {
    std::vector<Event> taken;
    const std::lock_guard lock(mutex_);
    // Once round the ring: each event taken, or put back behind the rest.
    for (std::size_t i = 0, n = events_.size(); i < n; ++i) {
      Event e = events_.front();
      events_.pop_front();
      if (pred(static_cast<const Event&>(e)))
        taken.push_back(e);
      else
        events_.push_back(e);
    }
    consume(taken.size());
    return taken;
  }

  /// Number of events waiting (for tests and diagnostics).
  [[nodiscard]] std::size_t size() const {
    const std::lock_guard lock(mutex_);
    return events_.size();
  }

  /// Stops accepting events (the channel is being destroyed).
  void close() noexcept {
    const std::lock_guard lock(mutex_);
    closed_ = true;
  }

 private:
  // Called with the mutex held, for `count` events leaving the queue: the
  // silent ones first (the counter holds a token for every other event).
  void consume(std::size_t count) noexcept {
    const std::size_t quiet = std::min<std::size_t>(count, silent_);
    silent_ -= quiet;
    consume_tokens(count - quiet);
  }

  // Called with the mutex held; the counter is at least `count`.
  // NOLINTNEXTLINE(readability-make-member-function-const): drains the eventfd counter
  void consume_tokens(std::size_t count) noexcept {
    for (std::size_t i = 0; i < count; ++i) {
      std::uint64_t one = 0;
      (void)!::read(fd_, &one, sizeof one);
    }
  }

  int fd_;
  mutable std::mutex mutex_;
  ring<Event> events_;      // no allocation per event once warm
  std::size_t silent_ = 0;  // events queued by push_silent without a token
  bool closed_ = false;
};

using event_queue = basic_event_queue<cm_event>;

}  // namespace arpma::provider

// A provider event channel registered with an io_context, demultiplexing its
// rdma_cm events to the state machines that own the ids on it.
#pragma once

#include "core/asio.hpp"
#include "provider/provider.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace arpma::detail {

/// Receives the events of one cm id. Called on the channel's executor.
class cm_event_sink {
 public:
  virtual void on_cm_event(const provider::cm_event& event) = 0;

 protected:
  ~cm_event_sink() = default;
};

/// One provider event channel, shared by any number of cm ids. Each id is
/// created with a token as its context; an event is routed by that token, so
/// an event for an id whose owner has gone is dropped, never misdelivered.
/// Each sink hears its events on its own executor (dispatched there: at once
/// when the drain already runs on it), so objects on different strands of a
/// multi-threaded io_context share the channel; its routing table, holds and
/// descriptor are kept under a mutex.
/// The descriptor is watched only while some operation waits (holds the
/// channel), so io_context::run returns when arpma has nothing in flight, as
/// with any Asio I/O object; events arriving meanwhile stay in the channel
/// until the next wait reads them. It stays registered with the reactor from
/// the first hold to shutdown (no wait queued while unheld). Use from one
/// thread (the io_context's).
class cm_channel : public std::enable_shared_from_this<cm_channel> {
 public:
  static result<std::shared_ptr<cm_channel>> create(provider::provider& prov,
                                                    const asio::any_io_executor& ex);
  cm_channel(provider::provider& prov, provider::event_channel* native, asio::any_io_executor ex);
  cm_channel(const cm_channel&) = delete;
  cm_channel& operator=(const cm_channel&) = delete;
  ~cm_channel();

  [[nodiscard]] provider::event_channel* native() const noexcept { return native_; }
  [[nodiscard]] provider::provider& owner() const noexcept { return prov_; }
  [[nodiscard]] int fd() const noexcept;
  [[nodiscard]] std::size_t attached() const noexcept {
    const std::lock_guard lock(mutex_);
    return sinks_.size();
  }
  [[nodiscard]] const asio::any_io_executor& executor() const noexcept { return ex_; }

  /// Reads one event without the loop, for the C API: waits for one if the
  /// fd is blocking; errc::no_event when it is non-blocking and none is
  /// pending (EAGAIN, or ENODATA as librpma knew it).
  result<provider::cm_event> read_now();
  /// Makes the fd blocking (librpma's default, which C programs expect) or not.
  /// The provider creates it blocking: a channel never made blocking is made
  /// non-blocking when first watched, so that a drain reads until EAGAIN
  /// without asking the fd first.
  std::error_code set_blocking(bool blocking) noexcept;

  /// A fresh token to create an id with.
  [[nodiscard]] std::uint64_t reserve_token() noexcept {
    const std::lock_guard lock(mutex_);
    return next_token_++;
  }
  /// Routes events with `token` to `sink`, called on `ex` (empty: the
  /// channel's executor); attaching again changes the executor.
  void attach(std::uint64_t token, cm_event_sink* sink, const asio::any_io_executor& ex = {});
  /// Stops routing `token`.
  void detach(std::uint64_t token) noexcept;
  /// An operation starts waiting: watch the fd.
  void hold();
  /// It stopped: stop watching once nobody holds the channel.
  void release() noexcept;
  /// Drops the descriptor for good (the io_context is going away).
  void shutdown() noexcept;
  /// Reads and delivers what the channel holds now, as a wake-up of the
  /// reactor would, one drain at a time (events of one id keep their order).
  /// For a deadline: an event that arrived while the loop was late counts.
  void drain();

 private:
  struct route {
    cm_event_sink* sink = nullptr;
    asio::any_io_executor ex;
  };
  void watch_locked();
  void on_ready(const std::error_code& ec);
  /// Hands `event` to its token's sink if it is still attached.
  void deliver(const provider::cm_event& event);
  void release_descriptor() noexcept;

  provider::provider& prov_;
  provider::event_channel* native_;
  asio::any_io_executor ex_;
  std::optional<asio::posix::stream_descriptor> descriptor_;
  mutable std::mutex mutex_;
  // Held while reading: two drains (the reactor's and a deadline's) would
  // otherwise hand one id's events to its strand in either order.
  std::mutex drain_mutex_;
  std::unordered_map<std::uint64_t, route> sinks_;
  std::uint64_t next_token_ = 1;
  std::size_t holds_ = 0;
  bool watching_ = false;
  bool closed_ = false;
  // Set by set_blocking(true): the fd stays as the C program expects it.
  std::atomic<bool> made_blocking_{false};
  // The fd is known to be O_NONBLOCK: a drain needs no poll(2) per event.
  std::atomic<bool> nonblocking_{false};
};

/// Told when an io_context shuts down, before its reactor goes: owners of
/// operations that no timer or descriptor holds drop them (uncalled), as
/// Asio drops its own pending operations.
class loop_shutdown_listener {
 public:
  virtual void abandon() noexcept = 0;

 protected:
  ~loop_shutdown_listener() = default;
};
void on_loop_shutdown(const asio::any_io_executor& ex,
                      const std::shared_ptr<loop_shutdown_listener>& listener);

/// A pending operation that owns itself while it waits (an event, a peer):
/// linked into its io_context's arpma service, which destroys it uncalled
/// when the io_context shuts down, as Asio destroys its own pending
/// operations. Intrusive: linking allocates nothing.
class parked_link {
 public:
  /// The io_context goes: let go of the self-reference (no handler call).
  virtual void abandon_parked() noexcept = 0;

 protected:
  ~parked_link() = default;

 private:
  friend class parked_list;
  parked_link* prev_ = nullptr;
  parked_link* next_ = nullptr;
  bool linked_ = false;
};
/// Links `op` into `ex`'s io_context; false once that has shut down.
bool park_on_loop(const asio::any_io_executor& ex, parked_link& op);
/// Unlinks `op` (it completed).
void unpark_from_loop(const asio::any_io_executor& ex, parked_link& op) noexcept;

/// The channel shared by every id that C++ callers create on one io_context
/// with one provider: 1,000 requests in flight use one fd, not 1,000.
[[nodiscard]] result<std::shared_ptr<cm_channel>> loop_cm_channel(provider::provider& prov,
                                                                  const asio::any_io_executor& ex);

}  // namespace arpma::detail

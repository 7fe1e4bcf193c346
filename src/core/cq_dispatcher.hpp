// Completions of C++ operations: the completion channel(s) of a connection
// (or of an SRQ's receive CQ) watched on the loop, every completion handed to
// the operation that posted it.
#pragma once

#include "arpma/connection.hpp"
#include "arpma/detail/wc_op.hpp"
#include "core/asio.hpp"
#include "core/cm_channel.hpp"
#include "core/comp_channel_state.hpp"
#include "core/op_slot.hpp"
#include "provider/provider.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace arpma::detail {

/// Completes `op` with `ec` from `ex`'s queue (the system executor's when
/// `ex` runs no operations); a loop destroyed first drops it uncalled.
void fail_op(const asio::any_io_executor& ex, wc_op* op, const std::error_code& ec);

/// The longest a busy poll spins on an empty CQ before letting the handlers
/// queued meanwhile run (the busy_poll sysctl's usual 50 µs).
inline constexpr std::chrono::microseconds busy_spin_slice{50};
/// The most completions a busy poll serves in a row, once they have taken a
/// slice, before the loop's other handlers get their turn.
inline constexpr int busy_progress_rounds = 16;

/// On each wake-up, read every pending channel
/// event (until EAGAIN), acknowledge them, re-arm, and only then drain the
/// CQs — a completion that arrives between drain and arm is signalled by the
/// arm. The fds are watched only while operations are pending; a wait that
/// starts on an fd that is already readable is served at once (an edge seen
/// while nobody waited is not lost).
/// On a completion channel shared with other connections (comp_channel_state)
/// the dispatcher watches no fd of its own: it tells the channel while it
/// has operations pending, and the channel calls on_shared_event when one
/// of its CQs fired (event taken, acknowledged, CQ re-armed).
///
/// Pending operations live in a slot table: a work request's wr_id is its
/// slot and the slot's generation, so a completion finds its operation
/// without a map, and a stale or foreign wr_id finds nothing. The table
/// grows to the most operations ever pending at once and is then reused.
/// Completions run their handlers from inside the drain, on the
/// dispatcher's executor (one executor hop at most, as Asio's reactor
/// does); a handler may start operations, close or destroy the connection.
class cq_dispatcher final : public std::enable_shared_from_this<cq_dispatcher>,
                            public loop_shutdown_listener {
 public:
  /// Watches `channels` and drains `cqs` (null entries are skipped); the
  /// owner keeps them alive until close() or abandon().
  cq_dispatcher(provider::provider& prov, const std::vector<provider::comp_channel*>& channels,
                std::vector<provider::cq*> cqs, asio::any_io_executor ex,
                std::shared_ptr<comp_channel_state> shared = nullptr);
  cq_dispatcher(const cq_dispatcher&) = delete;
  cq_dispatcher& operator=(const cq_dispatcher&) = delete;
  ~cq_dispatcher();

  [[nodiscard]] const asio::any_io_executor& executor() const noexcept { return ex_; }
  /// A fresh wr_id for `op`, which the dispatcher owns until its completion
  /// (or close, or the loop's end).
  std::uint64_t add(wc_op* op);
  /// Gives `wr_id`'s operation back (its post failed).
  wc_op* remove(std::uint64_t wr_id) noexcept;
  /// Completes `op` (not pending) with `ec` from the executor's queue.
  void fail(wc_op* op, const std::error_code& ec);
  /// After a post: make sure someone looks for its completion.
  void kick();
  void set_busy_poll(std::chrono::microseconds budget) noexcept { busy_budget_ = budget; }
  /// The QP is about to go: every waiter hears on_closed, fds are let go.
  void close() noexcept;
  /// The io_context is going: waiters are dropped without a word.
  void abandon() noexcept override;

  /// Shared channel: one of the CQs fired; drain them.
  void on_shared_event();
  /// Shared channel: true the first time since the last on_shared_event.
  bool note_fired() noexcept { return !std::exchange(fired_, true); }
  /// Shared channel: a CQ could not be re-armed.
  void mark_unarmed() noexcept { unarmed_ = true; }

 private:
  struct channel {
    channel() = default;
    channel(const channel&) = delete;
    channel& operator=(const channel&) = delete;
    /// The provider owns the fd: a registered descriptor lets go of it unclosed.
    ~channel() {
      if (fd) fd->release();
    }
    provider::comp_channel* native = nullptr;
    op_slot wait_slot;  ///< the fd's one wait (before fd: it outlives the wait fd cancels)
    std::optional<asio::posix::stream_descriptor> fd;
    bool waiting = false;
    bool nonblocking = false;  ///< made so by adopt(): reads need no poll(2) first
  };

  /// Registers the channel's fd, non-blocking.
  void adopt(channel& ch);
  void watch(channel& ch);
  /// Every fd (own channels, or the shared channel) watched.
  void watch_all();
  /// Tells the shared channel whether this dispatcher still waits.
  void settle() noexcept;
  void on_readable(channel& ch);
  /// Drains on the executor: at once when the caller runs there.
  void drain_shared();
  void drain_cqs();
  void drain_into(std::span<provider::work_completion> batch);
  /// `since`: when the budget started; the epoch (from kick) for now.
  void busy_poll(std::chrono::steady_clock::time_point since);
  /// Queues busy_poll(since) behind the loop's other handlers, in poll_slot_
  /// (kick's start and the poll's yield: one at a time).
  void post_busy_poll(std::chrono::steady_clock::time_point since);
  void deliver(const provider::work_completion& wc);
  /// Completes every waiting operation with operation_aborted, each from
  /// the executor's queue (never inside the call that closed them).
  void fail_pending() noexcept;
  wc_op* take(std::uint64_t wr_id) noexcept;
  void release_fds() noexcept;
  /// Registers the channels' fds with the reactor (once, at the first operation).
  void register_channels() noexcept;

  struct slot {
    wc_op* op = nullptr;
    std::uint32_t generation = 0;
    std::uint32_t next_free = 0;
  };

  provider::provider& prov_;
  std::vector<provider::cq*> cqs_;
  asio::any_io_executor ex_;
  std::vector<std::unique_ptr<channel>> channels_;
  std::vector<slot> slots_;
  static constexpr std::uint32_t no_slot = 0xffffffffU;
  std::uint32_t free_ = no_slot;
  std::size_t pending_ = 0;
  std::uint64_t dispatched_ = 0;  ///< completions taken: busy polling's progress
  // Polled into, never cleared: clearing 32 entries per drain was three
  // quarters of the drain's own time in a busy-polled write (perf). A drain
  // nested in a handler of the drain (one that runs the loop) has its own.
  std::array<provider::work_completion, 32> batch_;
  bool draining_ = false;
  std::chrono::microseconds busy_budget_{0};
  bool busy_polling_ = false;
  op_slot poll_slot_;  ///< busy_poll's queued turn
  bool closed_ = false;
  bool registered_ = false;  ///< register_channels ran
  bool unarmed_ = false;     ///< a CQ could not be re-armed: nothing can wait for it any more
  std::shared_ptr<comp_channel_state> shared_;
  bool wants_shared_ = false;  ///< counted in shared_'s wanting
  bool fired_ = false;         ///< queued by shared_ for on_shared_event
};

}  // namespace arpma::detail

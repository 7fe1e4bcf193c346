// Completions of C++ operations: the completion channel(s) of a connection
// (or of an SRQ's receive CQ) watched on the loop, every completion handed to
// the operation that posted it.
#pragma once

#include "arpma/connection.hpp"
#include "core/asio.hpp"
#include "core/cm_channel.hpp"
#include "core/comp_channel_state.hpp"
#include "provider/provider.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace arpma::detail {

/// An operation waiting for its work completion.
class wc_waiter {
 public:
  virtual void on_wc(const provider::work_completion& wc) = 0;
  /// The queue pair is gone: the provider holds no buffer of it any more.
  virtual void on_closed() = 0;

 protected:
  ~wc_waiter() = default;
};

/// Lesson 9 and 10 of lessons.md: on each wake-up, read every pending channel
/// event (until EAGAIN), acknowledge them, re-arm, and only then drain the
/// CQs — a completion that arrives between drain and arm is signalled by the
/// arm. The fds are watched only while operations are pending; a wait that
/// starts on an fd that is already readable is served at once (an edge seen
/// while nobody waited is not lost).
/// On a completion channel shared with other connections (comp_channel_state)
/// the dispatcher watches no fd of its own: it tells the channel while it
/// has operations pending, and the channel calls on_shared_event when one
/// of its CQs fired (event taken, acknowledged, CQ re-armed).
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
  /// A fresh wr_id for `w`, which the dispatcher keeps alive until its
  /// completion (or close, or the loop's end).
  std::uint64_t add(std::shared_ptr<wc_waiter> w);
  /// Forgets `wr_id` (the post failed).
  void remove(std::uint64_t wr_id) noexcept;
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
    provider::comp_channel* native = nullptr;
    std::optional<asio::posix::stream_descriptor> fd;
    bool waiting = false;
  };

  void watch(channel& ch);
  /// Every fd (own channels, or the shared channel) watched.
  void watch_all();
  /// Tells the shared channel whether this dispatcher still waits.
  void settle() noexcept;
  void on_readable(channel& ch);
  void drain_cqs();
  void busy_poll(std::chrono::steady_clock::time_point since);
  void dispatch(const provider::work_completion& wc);
  /// Completes every waiting operation as closed (on_closed).
  void fail_pending() noexcept;

  provider::provider& prov_;
  std::vector<provider::cq*> cqs_;
  asio::any_io_executor ex_;
  std::vector<std::unique_ptr<channel>> channels_;
  std::unordered_map<std::uint64_t, std::shared_ptr<wc_waiter>> pending_;
  std::uint64_t next_id_ = 1;
  std::chrono::microseconds busy_budget_{0};
  bool busy_polling_ = false;
  bool closed_ = false;
  bool unarmed_ = false;  ///< a CQ could not be re-armed: nothing can wait for it any more
  std::shared_ptr<comp_channel_state> shared_;
  bool wants_shared_ = false;  ///< counted in shared_'s wanting
  bool fired_ = false;         ///< queued by shared_ for on_shared_event
};

}  // namespace arpma::detail

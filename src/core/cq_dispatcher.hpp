// Completions of C++ operations: the completion channel(s) of a connection
// (or of an SRQ's receive CQ) watched on the loop, every completion handed to
// the operation that posted it.
#pragma once

#include "arpma/connection.hpp"
#include "core/asio.hpp"
#include "core/cm_channel.hpp"
#include "provider/provider.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
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
class cq_dispatcher final : public std::enable_shared_from_this<cq_dispatcher>,
                            public loop_shutdown_listener {
 public:
  /// Watches `channels` and drains `cqs` (null entries are skipped); the
  /// owner keeps them alive until close() or abandon().
  cq_dispatcher(provider::provider& prov, std::vector<provider::comp_channel*> channels,
                std::vector<provider::cq*> cqs, asio::any_io_executor ex);
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

 private:
  struct channel {
    provider::comp_channel* native = nullptr;
    std::optional<asio::posix::stream_descriptor> fd;
    bool waiting = false;
  };

  void watch(channel& ch);
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
};

}  // namespace arpma::detail

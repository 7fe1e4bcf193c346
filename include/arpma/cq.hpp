// arpma::cq: a connection's completion queue, for programs that take their
// completions themselves instead of through connection::async_* operations.
#pragma once

#include "arpma/completion.hpp"
#include "arpma/detail/access.hpp"
#include "arpma/detail/wc_op.hpp"
#include "arpma/error.hpp"
#include "arpma/result.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>

#include <cstddef>
#include <span>

namespace arpma {

namespace detail {
struct conn_state;
struct srq_state;
using wait_handler = boost::asio::any_completion_handler<void(error_code)>;
/// `local`: the handler runs on the CQ's executor (asked while its type is known).
void start_cq_wait(conn_state* state, srq_state* srq, bool receive, wait_handler handler,
                   bool local);
[[nodiscard]] boost::asio::any_io_executor cq_executor(const conn_state* state,
                                                       const srq_state* srq) noexcept;

struct initiate_cq_wait {
  conn_state* state;
  srq_state* srq;
  bool receive;
  using executor_type = boost::asio::any_io_executor;
  [[nodiscard]] executor_type get_executor() const noexcept { return cq_executor(state, srq); }
  template <class Handler>
  void operator()(Handler&& handler) const {
    const bool local = runs_on(handler, cq_executor(state, srq));
    start_cq_wait(state, srq, receive, wait_handler(std::forward<Handler>(handler)), local);
  }
};
}  // namespace detail

/// A view of a connection's CQ or receive CQ (connection::completion_queue),
/// or of an SRQ's receive CQ (srq::completion_queue). Use either this or the
/// async_* data-path operations on one connection (or SRQ), not both: each
/// takes the completions it polls. Valid while its connection or SRQ lives.
class cq {
 public:
  /// Its connection's (or SRQ's) executor: async_wait runs there.
  using executor_type = boost::asio::any_io_executor;
  using default_token = boost::asio::default_completion_token_t<executor_type>;

  cq() noexcept = default;

  explicit operator bool() const noexcept { return state_ != nullptr || srq_ != nullptr; }
  [[nodiscard]] executor_type get_executor() const noexcept {
    return detail::cq_executor(state_, srq_);
  }

  /// Completes when the CQ's completion channel fires; the event is
  /// acknowledged and the CQ re-armed first, so poll() until it returns 0
  /// before waiting again. A wake-up may find nothing to poll (as with
  /// rpma_cq_wait).
  ///
  /// Completion signature: `void(arpma::error_code)`. Errors:
  /// errc::invalid_argument (empty view, no such CQ), errc::shared_channel
  /// (the CQs share one channel: not supported here, as rpma_cq_wait; an
  /// SRQ's view of an srq made without an executor is invalid_argument),
  /// operation_aborted (cancellation of any type: nothing was consumed),
  /// asio::error::in_progress (a wait on this CQ is pending already). The
  /// first wait on a CQ makes its waiter, kept with the CQ: later waits
  /// allocate nothing and leave the channel's fd in the reactor.
  template <boost::asio::completion_token_for<void(error_code)> CompletionToken = default_token>
  auto async_wait(CompletionToken&& token = default_token()) {
    return boost::asio::async_initiate<CompletionToken, void(error_code)>(
        detail::initiate_cq_wait{state_, srq_, receive_}, token);
  }

  /// Moves up to out.size() completions into `out` (ibv_poll_cq); how many.
  /// Each carries its work request's wr_id and status (empty, or a wc_errc).
  /// Errors: errc::invalid_argument, the provider's.
  [[nodiscard]] result<std::size_t> poll(std::span<completion> out);

 private:
  friend struct detail::access;
  cq(detail::conn_state* state, bool receive) noexcept : state_(state), receive_(receive) {}
  explicit cq(detail::srq_state* srq) noexcept : srq_(srq) {}

  detail::conn_state* state_ = nullptr;
  detail::srq_state* srq_ = nullptr;
  bool receive_ = false;
};

}  // namespace arpma

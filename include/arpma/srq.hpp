// arpma::srq: a shared receive queue several connections receive from, with
// an optional receive CQ of its own (librpma's rpma_srq).
#pragma once

#include "arpma/buffer.hpp"
#include "arpma/conn_cfg.hpp"
#include "arpma/connection.hpp"
#include "arpma/cq.hpp"
#include "arpma/detail/access.hpp"
#include "arpma/mr.hpp"
#include "arpma/peer.hpp"
#include "arpma/result.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <system_error>

namespace arpma {

namespace detail {
struct srq_state;
void start_srq_recv(srq_state* state, const local_mr_state* dst, std::size_t offset,
                    std::size_t len, wc_op* pending);
[[nodiscard]] const boost::asio::any_io_executor& srq_executor(const srq_state* state) noexcept;

struct initiate_srq_recv {
  srq_state* state;
  using executor_type = boost::asio::any_io_executor;
  [[nodiscard]] executor_type get_executor() const noexcept { return srq_executor(state); }
  template <class Handler>
  void operator()(Handler&& handler, const local_mr_state* dst, std::size_t offset,
                  std::size_t len) const {
    start_srq_recv(state, dst, offset, len,
                   make_wc_op(std::forward<Handler>(handler), srq_executor(state)));
  }
};
}  // namespace detail

/// The shape of an SRQ. Defaults are librpma 1.3's code (RPMA_DEFAULT_SRQ_SIZE
/// 20; its manual says 100).
struct srq_config {
  static constexpr std::uint32_t default_size = 20;

  std::uint32_t rq_size = default_size;   ///< SRQ max_wr
  std::uint32_t rcq_size = default_size;  ///< the SRQ's own receive CQ depth; 0 = none

  friend bool operator==(const srq_config&, const srq_config&) = default;
};

/// A shared receive queue on a peer's protection domain. Move-only.
///
/// Connections use it when made with a conn_cfg it was attached to
/// (attach_to): their QPs take receives from it, and — when it has an RCQ —
/// their receive completions land in that RCQ instead of a connection RCQ.
/// Each such connection shares its ownership: destroying or closing this
/// handle lets go of it, and the SRQ goes when the last connection does (a
/// conn_cfg only points at it).
///
/// Not thread-safe (one handle, one thread at a time); posting from several
/// threads is the provider's business, as with librpma.
class srq {
 public:
  /// Creates the SRQ (max_sge 1), then its RCQ (own completion channel,
  /// armed) unless cfg.rcq_size is 0.
  /// Errors: errc::invalid_argument (a closed or moved-from peer),
  /// errc::no_memory, or the provider's error (== errc::provider).
  [[nodiscard]] static result<srq> create(const peer& p, const srq_config& cfg = {});
  /// The same, for async_recv and completion_queue().async_wait: their
  /// completions are watched for on `ex` (an io_context's executor).
  [[nodiscard]] static result<srq> create(const boost::asio::any_io_executor& ex, const peer& p,
                                          const srq_config& cfg = {});

  using executor_type = boost::asio::any_io_executor;
  using default_token = boost::asio::default_completion_token_t<executor_type>;

  srq() noexcept;
  srq(srq&&) noexcept;
  srq& operator=(srq&&) noexcept;
  ~srq();

  explicit operator bool() const noexcept { return state_ != nullptr; }
  /// The executor given to create(); empty for an srq made without one.
  [[nodiscard]] executor_type get_executor() const noexcept {
    return detail::srq_executor(state_.get());
  }

  /// Posts one receive into `dst`; `wr_id` comes back in its completion.
  /// Errors: errc::invalid_argument (an empty srq or slice), the provider's
  /// error (e.g. ENOMEM when the queue is full).
  std::error_code post_recv(const local_buffer& dst, std::uint64_t wr_id);

  /// Posts one receive into `dst`; completes when *its*
  /// completion comes out of the SRQ's RCQ — whichever connection the message
  /// arrived on: completion.qp_num names it (connection::qp_num).
  ///
  /// Completion signature: `void(arpma::error_code, arpma::completion)`.
  /// Errors: errc::invalid_argument (an empty srq, one made without an
  /// executor, an empty slice), errc::not_supported (no RCQ: the
  /// receive would complete on a connection's CQ — use post_recv and that
  /// connection's completion_queue()), the provider's post error, the wc
  /// status as arpma::wc_errc, asio::error::operation_aborted when the SRQ
  /// is destroyed (its last user gone) first.
  ///
  /// Cancellation (terminal, partial): a receive stays posted until a
  /// message fills it or the SRQ goes, so `dst` must outlive the operation
  /// even after a cancellation; the operation then completes with
  /// operation_aborted when that happens, not at once.
  template <detail::data_token CompletionToken = default_token>
  auto async_recv(const local_buffer& dst, CompletionToken&& token = default_token()) {
    return boost::asio::async_initiate<CompletionToken, detail::completion_signature>(
        detail::initiate_srq_recv{state_.get()}, token, detail::access::state(dst), dst.offset(),
        dst.size());
  }

  /// The SRQ's RCQ, for programs that take the receives' completions
  /// themselves (post_recv, then completion_queue().async_wait and poll);
  /// empty without an RCQ. Use it or async_recv on one SRQ, not both.
  /// async_wait needs an srq made with an executor.
  [[nodiscard]] class cq completion_queue() const noexcept;

  /// Whether receives complete on an RCQ of the SRQ's own (rcq_size > 0)
  /// rather than on each connection's CQ/RCQ.
  [[nodiscard]] bool has_rcq() const noexcept;
  /// The fd of the RCQ's completion channel, readable once the armed RCQ
  /// got a completion; -1 without an RCQ. Blocking, as librpma's, until an
  /// asynchronous wait on the RCQ takes it into the loop non-blocking.
  [[nodiscard]] int rcq_fd() const noexcept;

  /// Makes connections created with `cfg` use this SRQ; returns `cfg`.
  /// `cfg` does not keep the SRQ: keep this handle while making requests
  /// with it (their connections then keep the SRQ themselves).
  conn_cfg& attach_to(conn_cfg& cfg) const noexcept {
    cfg.srq = state_;
    return cfg;
  }

  /// Lets go of this handle; when nothing else uses the SRQ it is destroyed
  /// now (RCQ, then SRQ) and the first provider error is returned.
  std::error_code close() noexcept;

 private:
  friend struct detail::access;
  explicit srq(std::shared_ptr<detail::srq_state> state) noexcept;
  std::shared_ptr<detail::srq_state> state_;
};

}  // namespace arpma

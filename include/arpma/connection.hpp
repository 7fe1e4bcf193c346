// arpma::connection: an RDMA connection and its events.
#pragma once

#include "arpma/buffer.hpp"
#include "arpma/completion.hpp"
#include "arpma/detail/access.hpp"
#include "arpma/detail/wc_op.hpp"
#include "arpma/error.hpp"
#include "arpma/mr.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <system_error>

namespace arpma {

/// What happened to a connection; the values are librpma's RPMA_CONN_*.
enum class conn_event : int {
  undefined = -1,   ///< RPMA_CONN_UNDEFINED
  established = 0,  ///< RPMA_CONN_ESTABLISHED
  closed = 1,       ///< RPMA_CONN_CLOSED: DISCONNECTED or TIMEWAIT_EXIT
  lost = 2,         ///< RPMA_CONN_LOST: CONNECT_ERROR or DEVICE_REMOVAL
  rejected = 3,     ///< RPMA_CONN_REJECTED
  unreachable = 4,  ///< RPMA_CONN_UNREACHABLE
};

/// librpma's text for `event` ("Connection established", ...).
[[nodiscard]] const char* to_string(conn_event event) noexcept;

/// Which flush: to persistence (the peer must place writes directly in
/// persistent memory) or to global visibility. Values of rpma_flush_type.
enum class flush_type : int { persistent = 0, visibility = 1 };

namespace detail {
struct conn_state;
struct local_mr_state;

/// One data-path operation, as the templates below describe it.
struct data_op {
  enum class kind : std::uint8_t {
    read,
    write,
    write_with_imm,
    atomic_write,
    flush,
    send,
    send_with_imm,
    recv
  };
  kind what = kind::send;
  const local_mr_state* local = nullptr;
  std::size_t local_offset = 0;
  std::optional<remote_mr> remote;
  std::size_t remote_offset = 0;
  std::size_t len = 0;
  std::uint64_t remote_len = 0;  ///< must equal len when remote is set
  std::uint32_t imm = 0;
  flush_type flush = flush_type::visibility;
  std::array<char, 8> value{};
};
/// One operation between a local slice and (when given) a remote one; both
/// given, their lengths must match (post_data_op checks).
inline data_op make_data_op(data_op::kind what, const local_buffer* local,
                            const remote_buffer* remote) {
  data_op op;
  op.what = what;
  if (local != nullptr) {
    op.local = access::state(*local);
    op.local_offset = local->offset();
    op.len = local->size();
  }
  if (remote != nullptr) {
    op.remote = remote->region();
    op.remote_offset = remote->offset();
    op.remote_len = remote->size();
    if (local == nullptr) op.len = remote->size();
  }
  return op;
}
using completion_handler = boost::asio::any_completion_handler<void(error_code, completion)>;
using completion_signature = void(error_code, completion);
template <class Token>
concept data_token = boost::asio::completion_token_for<Token, completion_signature>;
/// The connection's executor; an empty one for no state.
[[nodiscard]] const boost::asio::any_io_executor& executor_of(const conn_state* state) noexcept;
/// Registers `pending` with the connection and posts its work request; it
/// completes from its work completion (or with an error, never inline).
void start_data_op(conn_state* state, const data_op& op, wc_op* pending);

/// The initiation of every data-path operation of a connection.
struct initiate_data_op {
  conn_state* state;
  using executor_type = boost::asio::any_io_executor;
  [[nodiscard]] executor_type get_executor() const noexcept { return executor_of(state); }
  template <class Handler>
  void operator()(Handler&& handler, const data_op& op) const {
    start_data_op(state, op, make_wc_op(std::forward<Handler>(handler), executor_of(state)));
  }
};
using conn_event_handler = boost::asio::any_completion_handler<void(error_code, conn_event)>;
using disconnect_handler = boost::asio::any_completion_handler<void(error_code)>;
void start_next_event(conn_state* state, conn_event_handler handler);
void start_disconnect(conn_state* state, disconnect_handler handler);

/// The initiation of a connection's event operations: `Start` with the
/// handler type-erased as `Erased`.
template <class Erased, void (*Start)(conn_state*, Erased)>
struct initiate_conn_op {
  conn_state* state;
  using executor_type = boost::asio::any_io_executor;
  [[nodiscard]] executor_type get_executor() const noexcept { return executor_of(state); }
  template <class Handler>
  void operator()(Handler&& handler) const {
    Start(state, Erased(std::forward<Handler>(handler)));
  }
};
}  // namespace detail

/// An established connection: its cm id, QP and CQs. Made by
/// conn_req::async_connect; move-only; destroying it releases everything in
/// reverse order (QP, RCQ, CQ, completion channels, id) without waiting for
/// the peer — call async_disconnect first for an orderly close.
///
/// It keeps no work in the io_context by itself (run() returns when nothing
/// waits); events arriving meanwhile are read by the next wait on the loop. A
/// peer's disconnect is answered (rdma_disconnect) as soon as it is read.
///
/// Not thread-safe: use it, and run its operations, on the thread (or strand)
/// of the io_context it was made on. Operations in flight complete with
/// asio::error::operation_aborted when the connection is closed or destroyed.
class connection {
 public:
  /// The executor its operations and, by default, their handlers run on.
  using executor_type = boost::asio::any_io_executor;
  /// Asio's default token for the executor (none for a plain any_io_executor).
  using default_token = boost::asio::default_completion_token_t<executor_type>;

  connection() noexcept;
  connection(connection&&) noexcept;
  connection& operator=(connection&&) noexcept;
  ~connection();

  /// False for a default-constructed, moved-from or closed connection.
  explicit operator bool() const noexcept { return state_ != nullptr; }
  /// The executor of the handler that async_connect completed to (or of the
  /// loop the request was made on): a strand there makes this connection's
  /// operations and handlers serialized by it. Empty for an empty connection.
  [[nodiscard]] executor_type get_executor() const noexcept {
    return detail::executor_of(state_.get());
  }
  /// The peer's private data: the client's CONNECT_REQUEST data on the
  /// server, the server's accept data on the client (borrowed; valid while
  /// the connection lives). Transports may pad it beyond what was sent.
  [[nodiscard]] std::span<const std::uint8_t> private_data() const noexcept;
  [[nodiscard]] std::uint32_t qp_num() const noexcept;
  /// Asks for the connection to end (rdma_disconnect) without waiting;
  /// conn_event::closed follows on both sides.
  std::error_code disconnect() noexcept;
  /// Releases everything now; returns the first error met (teardown goes on).
  std::error_code close() noexcept;

  /// Waits for the next connection event (closed, lost, ...); events that
  /// arrived earlier are queued, none is lost. rdma_cm events with no
  /// librpma mapping (ADDR_CHANGE, ...) are logged and skipped.
  ///
  /// Completion signature: `void(arpma::error_code, arpma::conn_event)`.
  /// Cancellation: terminal, partial and total; the event stays queued.
  template <boost::asio::completion_token_for<void(error_code, conn_event)> CompletionToken =
                default_token>
  auto async_next_event(CompletionToken&& token = default_token()) {
    return boost::asio::async_initiate<CompletionToken, void(error_code, conn_event)>(
        detail::initiate_conn_op<detail::conn_event_handler, &detail::start_next_event>{
            state_.get()},
        token);
  }

  /// Disconnects (unless the peer already did) and completes when the
  /// connection is closed: DISCONNECTED seen, whoever asked first. Events
  /// stay queued for async_next_event.
  ///
  /// Completion signature: `void(arpma::error_code)`.
  /// Cancellation: terminal, partial and total; the disconnect stays requested.
  template <boost::asio::completion_token_for<void(error_code)> CompletionToken = default_token>
  auto async_disconnect(CompletionToken&& token = default_token()) {
    return boost::asio::async_initiate<CompletionToken, void(error_code)>(
        detail::initiate_conn_op<detail::disconnect_handler, &detail::start_disconnect>{
            state_.get()},
        token);
  }

  // ---- data path ----------------------------------------------------------
  // Each operation posts one work request and completes when its own
  // completion arrives: `void(arpma::error_code, arpma::completion)`. Its
  // buffers are slices (arpma/buffer.hpp: arpma::buffer(mr, offset, length)
  // or a whole region), checked for their range when they were made. Errors:
  // errc::invalid_argument (a local and a remote slice of different lengths,
  // an atomic write's slice not 8 aligned bytes, a closed connection), errc::not_supported (a flush
  // the region or the peer does not allow), the provider's errno when posting fails (ENOMEM: the
  // queue is full), or the completion's status as wc_errc (rem_access_err, wr_flush_err after a
  // disconnect, ...; all
  // == errc::provider).
  //
  // Buffers: the local_mr must stay registered, and its memory untouched
  // (sources) or unread (destinations), until the handler runs.
  //
  // Cancellation (terminal, partial): RDMA cannot take a posted work request
  // back, so a cancelled operation completes with operation_aborted when the
  // provider returns it — its own completion, or the flush of every
  // outstanding request when the connection is closed or lost. Only then is
  // the buffer free. Closing or destroying the connection completes every
  // operation in flight with operation_aborted (its queue pair is gone).

  /// RDMA read of `src` into `dst` (slices of the same length).
  template <detail::data_token CompletionToken = default_token>
  auto async_read(const local_buffer& dst, const remote_buffer& src,
                  CompletionToken&& token = default_token()) {
    return initiate(detail::make_data_op(detail::data_op::kind::read, &dst, &src),
                    std::forward<CompletionToken>(token));
  }
  /// RDMA write of `src` to `dst` (slices of the same length).
  template <detail::data_token CompletionToken = default_token>
  auto async_write(const remote_buffer& dst, const local_buffer& src,
                   CompletionToken&& token = default_token()) {
    return initiate(detail::make_data_op(detail::data_op::kind::write, &src, &dst),
                    std::forward<CompletionToken>(token));
  }
  /// The same, consuming a receive at the peer that completes with `imm`.
  template <detail::data_token CompletionToken = default_token>
  auto async_write_with_imm(const remote_buffer& dst, const local_buffer& src, std::uint32_t imm,
                            CompletionToken&& token = default_token()) {
    auto op = detail::make_data_op(detail::data_op::kind::write_with_imm, &src, &dst);
    op.imm = imm;
    return initiate(op, std::forward<CompletionToken>(token));
  }
  /// Writes 8 bytes as one unit to `dst`: 8 bytes at an 8-byte aligned offset.
  template <detail::data_token CompletionToken = default_token>
  auto async_atomic_write(const remote_buffer& dst, const std::array<char, 8>& value,
                          CompletionToken&& token = default_token()) {
    auto op = detail::make_data_op(detail::data_op::kind::atomic_write, nullptr, &dst);
    op.len = value.size();
    op.value = value;
    return initiate(op, std::forward<CompletionToken>(token));
  }
  /// Completes once earlier writes to `dst` are placed (visibility) or
  /// persistent (persistent).
  template <detail::data_token CompletionToken = default_token>
  auto async_flush(const remote_buffer& dst, flush_type type,
                   CompletionToken&& token = default_token()) {
    auto op = detail::make_data_op(detail::data_op::kind::flush, nullptr, &dst);
    op.flush = type;
    return initiate(op, std::forward<CompletionToken>(token));
  }
  /// A message of `src`; it consumes a receive at the peer.
  template <detail::data_token CompletionToken = default_token>
  auto async_send(const local_buffer& src, CompletionToken&& token = default_token()) {
    return initiate(detail::make_data_op(detail::data_op::kind::send, &src, nullptr),
                    std::forward<CompletionToken>(token));
  }
  template <detail::data_token CompletionToken = default_token>
  auto async_send_with_imm(const local_buffer& src, std::uint32_t imm,
                           CompletionToken&& token = default_token()) {
    auto op = detail::make_data_op(detail::data_op::kind::send_with_imm, &src, nullptr);
    op.imm = imm;
    return initiate(op, std::forward<CompletionToken>(token));
  }
  /// Receives the peer's next message (or write with immediate) into `dst`;
  /// completion.byte_len says how much arrived.
  template <detail::data_token CompletionToken = default_token>
  auto async_recv(const local_buffer& dst, CompletionToken&& token = default_token()) {
    return initiate(detail::make_data_op(detail::data_op::kind::recv, &dst, nullptr),
                    std::forward<CompletionToken>(token));
  }

  // ---- posting without waiting (completions through completion_queue()) ----
  /// Post one work request with `wr_id` and return; its completion (if
  /// `signaled`, or on error) is the program's to poll from completion_queue().
  /// The errors of the async_* operations that posting can give.
  std::error_code post_write(const remote_buffer& dst, const local_buffer& src, std::uint64_t wr_id,
                             bool signaled = true);
  std::error_code post_read(const local_buffer& dst, const remote_buffer& src, std::uint64_t wr_id,
                            bool signaled = true);
  std::error_code post_send(const local_buffer& src, std::uint64_t wr_id, bool signaled = true);
  /// A message carrying `imm` (host order) in its receive completion.
  std::error_code post_send_with_imm(const local_buffer& src, std::uint32_t imm,
                                     std::uint64_t wr_id, bool signaled = true);
  std::error_code post_recv(const local_buffer& dst, std::uint64_t wr_id);

  /// The CQ (or, with `receive`, the receive CQ; empty when there is none)
  /// for programs that poll completions themselves (include arpma/cq.hpp).
  /// Use it instead of the async_* operations on this connection, not with.
  [[nodiscard]] class cq completion_queue(bool receive = false) const noexcept;

  /// Busy polling: after each wake-up or post, poll the CQ for up to
  /// `budget` without a completion before sleeping on the completion channel
  /// again; on the loop's thread, the loop's other handlers (and its reactor)
  /// get their turn after 50 µs of polls that find nothing, or after 16
  /// completions served in a row that took 50 µs at least. Zero (the
  /// default): fd mode only.
  void set_busy_poll(std::chrono::microseconds budget) noexcept;

 private:
  friend struct detail::access;
  explicit connection(std::unique_ptr<detail::conn_state> state) noexcept;
  template <class CompletionToken>
  auto initiate(const detail::data_op& op, CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, detail::completion_signature>(
        detail::initiate_data_op{state_.get()}, token, op);
  }

  std::unique_ptr<detail::conn_state> state_;
};

}  // namespace arpma

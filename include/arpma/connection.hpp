// arpma::connection: an RDMA connection and its events.
#pragma once

#include "arpma/error.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <cstdint>
#include <memory>
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

namespace detail {
struct conn_state;
using conn_event_handler = boost::asio::any_completion_handler<void(error_code, conn_event)>;
using disconnect_handler = boost::asio::any_completion_handler<void(error_code)>;
void start_next_event(conn_state* state, conn_event_handler handler);
void start_disconnect(conn_state* state, disconnect_handler handler);
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
  connection() noexcept;
  explicit connection(std::unique_ptr<detail::conn_state> state) noexcept;
  connection(connection&&) noexcept;
  connection& operator=(connection&&) noexcept;
  ~connection();

  /// False for a default-constructed, moved-from or closed connection.
  explicit operator bool() const noexcept { return state_ != nullptr; }
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
  template <class CompletionToken>
  auto async_next_event(CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(error_code, conn_event)>(
        [](auto handler, detail::conn_state* state) {
          detail::conn_event_handler h(std::move(handler));
          detail::start_next_event(state, std::move(h));
        },
        token, state_.get());
  }

  /// Disconnects (unless the peer already did) and completes when the
  /// connection is closed: DISCONNECTED seen, whoever asked first. Events
  /// stay queued for async_next_event.
  ///
  /// Completion signature: `void(arpma::error_code)`.
  /// Cancellation: terminal, partial and total; the disconnect stays requested.
  template <class CompletionToken>
  auto async_disconnect(CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(error_code)>(
        [](auto handler, detail::conn_state* state) {
          detail::disconnect_handler h(std::move(handler));
          detail::start_disconnect(state, std::move(h));
        },
        token, state_.get());
  }

  /// Internal: the state the C API and the data path work on.
  [[nodiscard]] detail::conn_state* state() const noexcept { return state_.get(); }

 private:
  std::unique_ptr<detail::conn_state> state_;
};

}  // namespace arpma

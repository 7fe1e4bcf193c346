// arpma::conn_req and the seed operation: async_conn_req_new.
#pragma once

#include "arpma/buffer.hpp"
#include "arpma/conn_cfg.hpp"
#include "arpma/connection.hpp"
#include "arpma/detail/access.hpp"
#include "arpma/error.hpp"
#include "arpma/peer.hpp"
#include "arpma/result.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace arpma {

class conn_req;

namespace detail {
struct conn_state;
struct peer_state;

using conn_req_handler = boost::asio::any_completion_handler<void(error_code, conn_req)>;
using connection_handler = boost::asio::any_completion_handler<void(error_code, connection)>;

/// A request born on the io_context's shared event channel (the blocking
/// rpma_conn_req_new gives each request a channel of its own, without a loop).
void start_conn_req_new(boost::asio::any_io_executor ex, std::shared_ptr<peer_state> peer,
                        std::string addr, std::string port, conn_cfg cfg, conn_req_handler handler);
void start_connect(boost::asio::any_io_executor ex, conn_req req,
                   std::vector<std::uint8_t> private_data, connection_handler handler);
/// The executor of a request's state (empty for none or a C flavour one).
[[nodiscard]] boost::asio::any_io_executor executor_of_request(const conn_state* state) noexcept;

using conn_req_signature = void(error_code, conn_req);
using connect_signature = void(error_code, connection);

/// async_connect's initiation: runs on the handler's associated executor,
/// or the request's own.
struct initiate_connect {
  boost::asio::any_io_executor ex;
  using executor_type = boost::asio::any_io_executor;
  [[nodiscard]] executor_type get_executor() const noexcept { return ex; }
  // `Request` is conn_req, complete only where this is called.
  template <class Handler, class Request>
  void operator()(Handler&& handler, Request&& req, std::vector<std::uint8_t> pdata) const {
    boost::asio::any_io_executor io = boost::asio::get_associated_executor(handler, ex);
    connection_handler h(std::forward<Handler>(handler));
    start_connect(std::move(io), std::forward<Request>(req), std::move(pdata), std::move(h));
  }
};

/// async_conn_req_new's initiation on `ex`, or (`on_handlers`) on the
/// handler's associated executor.
struct initiate_conn_req_new {
  boost::asio::any_io_executor ex;
  bool on_handlers = false;
  using executor_type = boost::asio::any_io_executor;
  [[nodiscard]] executor_type get_executor() const noexcept { return ex; }
  template <class Handler>
  void operator()(Handler&& handler, std::shared_ptr<peer_state> peer, std::string addr,
                  std::string port, const conn_cfg& cfg) const {
    boost::asio::any_io_executor io =
        on_handlers ? boost::asio::any_io_executor(boost::asio::get_associated_executor(handler))
                    : ex;
    conn_req_handler h(std::forward<Handler>(handler));
    start_conn_req_new(std::move(io), std::move(peer), std::move(addr), std::move(port), cfg,
                       std::move(h));
  }
};
}  // namespace detail

/// A connection request: outgoing (a cm id with its address and route
/// resolved) or incoming (from endpoint::async_next_conn_req), with its CQ
/// (and RCQ) armed and its RC queue pair created. Move-only; destroying it
/// releases all of that in reverse order (QP, RCQ, CQ, completion channels,
/// id), as rpma_conn_req_delete does — and rejects an incoming request.
class conn_req {
 public:
  using executor_type = boost::asio::any_io_executor;
  using default_token = boost::asio::default_completion_token_t<executor_type>;

  conn_req() noexcept;
  conn_req(conn_req&&) noexcept;
  conn_req& operator=(conn_req&&) noexcept;
  ~conn_req();

  /// False for a default-constructed or moved-from request.
  explicit operator bool() const noexcept { return state_ != nullptr; }
  /// The loop the request was made (or received) on; empty for an empty
  /// request or one of the blocking C flavour.
  [[nodiscard]] executor_type get_executor() const noexcept {
    return detail::executor_of_request(state_.get());
  }
  /// The queue pair number (0 when empty).
  [[nodiscard]] std::uint32_t qp_num() const noexcept;
  /// True when the request has a separate receive CQ (cfg.rcq_size > 0).
  [[nodiscard]] bool has_rcq() const noexcept;
  /// True for a request that came in through an endpoint.
  [[nodiscard]] bool incoming() const noexcept;
  /// The client's private data of an incoming request (borrowed; empty for
  /// an outgoing one). Transports may pad it beyond what was sent.
  [[nodiscard]] std::span<const std::uint8_t> private_data() const noexcept;
  /// Releases everything now; returns the first error met (teardown goes on).
  std::error_code close() noexcept;
  /// Refuses an incoming request, sending `private_data` (at most 148 bytes)
  /// with the REJECTED event, and releases everything. errc::invalid_argument
  /// for an outgoing or empty request (which is left as it was).
  std::error_code reject(std::span<const std::uint8_t> private_data = {}) noexcept;
  /// Posts a receive into `dst` on the request's queue pair before it
  /// connects, as rpma_conn_req_recv does: a message the peer sends the moment
  /// the connection is established finds a buffer waiting, where one posted
  /// after ESTABLISHED could come too late. Its completion, with `wr_id`, is
  /// polled from the connection's completion_queue() (the receive CQ when the
  /// cfg has one); a connect that fails flushes it with the request.
  /// Errors: errc::invalid_argument (an empty request), the provider's ENOMEM
  /// when the receive queue is full; the request is left as it was.
  std::error_code post_recv(const local_buffer& dst, std::uint64_t wr_id);

  /// Connects an outgoing request or accepts an incoming one, sending
  /// `private_data` (at most 56 bytes to connect, 196 to accept, as rdma_cm
  /// over InfiniBand; the provider's EINVAL beyond), and completes when the
  /// connection is established. The request is consumed in every case: on
  /// failure everything it held is released (an incoming one rejected).
  ///
  /// Runs on the handler's associated executor, or on the loop the request
  /// was made on; the id moves to that loop's shared event channel if needed.
  /// A request the blocking conn_req_new made has no loop (get_executor() is
  /// empty): its handler must bring one (bind_executor, a coroutine's).
  ///
  /// Completion signature: `void(arpma::error_code, arpma::connection)`.
  /// Errors: std::errc::connection_refused (REJECTED), host_unreachable
  /// (UNREACHABLE), connection_aborted (CONNECT_ERROR), connection_reset
  /// (DISCONNECTED before ESTABLISHED; when accepting, also a client that
  /// disconnects at once: rdma_cm may handle its DREQ before its RTU) — all
  /// `== errc::provider`;
  /// errc::invalid_argument for an empty request or for no loop to run on
  /// (the request then released as on any failure); operation_aborted when
  /// cancelled (terminal or partial: the attempt is torn down).
  template <
      boost::asio::completion_token_for<detail::connect_signature> CompletionToken = default_token>
  auto async_connect(std::span<const std::uint8_t> private_data,
                     CompletionToken&& token = default_token()) {
    auto ex = get_executor();
    return boost::asio::async_initiate<CompletionToken, detail::connect_signature>(
        detail::initiate_connect{std::move(ex)}, token, std::move(*this),
        std::vector<std::uint8_t>(private_data.begin(), private_data.end()));
  }

 private:
  friend struct detail::access;
  explicit conn_req(std::unique_ptr<detail::conn_state> state) noexcept;
  std::unique_ptr<detail::conn_state> state_;
};

/// Creates an outgoing connection request to `addr`:`port` (numeric IPv4 or
/// IPv6, or a host name resolved without blocking the loop), as
/// rpma_conn_req_new does but without blocking: the cm id lives on the
/// io_context's shared event channel, and address then route resolution
/// complete through its descriptor, each within `cfg.timeout`.
///
/// \param ex    an io_context executor: the loop that runs the operation
/// \param p     the peer whose protection domain the QP uses
/// \param addr  the server's address: numeric IPv4/IPv6 or a host name
/// \param port  the server's port, numeric or a service name
/// \param cfg   queue sizes, completion channel sharing, resolution timeout
/// \param token any Asio completion token
///
/// Completion signature: `void(arpma::error_code, arpma::conn_req)`
/// (arpma::error_code converts to the std::error_code; a handler may take either).
/// Errors: errc::invalid_argument (empty addr or port, negative timeout);
/// std::errc::timed_out (a phase's event had not arrived when its cfg.timeout
/// deadline was handled; one already waiting counts); errc::no_memory; the
/// provider's errno for a failed call or an ADDR_ERROR/ROUTE_ERROR event (all
/// compare equal to errc::provider); asio::error::operation_aborted when
/// cancelled.
///
/// Cancellation: terminal and partial. The request is torn down and the
/// handler is called with operation_aborted; nothing is left behind.
/// Destroying the io_context mid-flight releases everything without calling
/// the handler. `ex` must be an io_context executor; the peer may go away
/// before completion (the request keeps its PD alive).
template <boost::asio::completion_token_for<detail::conn_req_signature> CompletionToken =
              boost::asio::default_completion_token_t<boost::asio::any_io_executor>>
auto async_conn_req_new(
    const boost::asio::any_io_executor& ex, const peer& p, std::string_view addr,
    std::string_view port, const conn_cfg& cfg,
    CompletionToken&& token =
        boost::asio::default_completion_token_t<boost::asio::any_io_executor>()) {
  return boost::asio::async_initiate<CompletionToken, detail::conn_req_signature>(
      detail::initiate_conn_req_new{ex, false}, token, detail::access::state(p), std::string(addr),
      std::string(port), cfg);
}

/// The same, on the executor associated with the completion handler — e.g.
/// `co_await arpma::async_conn_req_new(peer, addr, port, cfg, asio::use_awaitable)`.
/// A handler without an io_context executor gets errc::invalid_argument.
template <boost::asio::completion_token_for<detail::conn_req_signature> CompletionToken>
auto async_conn_req_new(const peer& p, std::string_view addr, std::string_view port,
                        const conn_cfg& cfg, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, detail::conn_req_signature>(
      detail::initiate_conn_req_new{{}, true}, token, detail::access::state(p), std::string(addr),
      std::string(port), cfg);
}

/// Blocking form: runs a private event loop until the request is ready.
/// The id gets an event channel of its own (no shared state with any loop).
[[nodiscard]] result<conn_req> conn_req_new(const peer& p, std::string_view addr,
                                            std::string_view port, const conn_cfg& cfg = {});

}  // namespace arpma

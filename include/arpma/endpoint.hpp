// arpma::endpoint: a listening endpoint that hands out incoming requests.
#pragma once

#include "arpma/conn_cfg.hpp"
#include "arpma/conn_req.hpp"
#include "arpma/detail/access.hpp"
#include "arpma/error.hpp"
#include "arpma/peer.hpp"
#include "arpma/result.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>

#include <cstdint>
#include <memory>
#include <string_view>
#include <system_error>

namespace arpma {

namespace detail {
struct endpoint_state;
void start_next_conn_req(endpoint_state* state, conn_cfg cfg, conn_req_handler handler);
[[nodiscard]] boost::asio::any_io_executor executor_of(const endpoint_state* state) noexcept;

struct initiate_next_conn_req {
  endpoint_state* state;
  using executor_type = boost::asio::any_io_executor;
  [[nodiscard]] executor_type get_executor() const noexcept { return executor_of(state); }
  template <class Handler>
  void operator()(Handler&& handler, const conn_cfg& cfg) const {
    start_next_conn_req(state, cfg, conn_req_handler(std::forward<Handler>(handler)));
  }
};
}  // namespace detail

/// A cm id listening on a local address (rpma_ep_listen). Incoming
/// CONNECT_REQUESTs are taken as they arrive — each gets its own token at
/// once, so no event of a pending request is ever read as the endpoint's —
/// and wait in a queue for async_next_conn_req.
///
/// Like an Asio acceptor, it keeps no work in the io_context by itself: a
/// request arriving while nobody waits stays in the event channel until the
/// next async_next_conn_req (or any arpma wait on the loop) reads it.
///
/// Not thread-safe: use it on the thread (or strand) of its io_context.
/// Move-only; destroying it is shutdown(): requests not yet handed out are
/// rejected, operations in flight complete with operation_aborted;
/// requests and connections handed out live on.
class endpoint {
 public:
  using executor_type = boost::asio::any_io_executor;
  using default_token = boost::asio::default_completion_token_t<executor_type>;

  /// Binds `addr`:`port` (numeric, or a name resolved at once; port "0"
  /// picks a free one) and listens, on `ex`'s shared event channel.
  /// Errors: errc::invalid_argument (empty addr or port, not an io_context
  /// executor), the provider's errno (EADDRINUSE, EADDRNOTAVAIL, ...).
  [[nodiscard]] static result<endpoint> listen(const boost::asio::any_io_executor& ex,
                                               const peer& p, std::string_view addr,
                                               std::string_view port);

  endpoint() noexcept;
  endpoint(endpoint&&) noexcept;
  endpoint& operator=(endpoint&&) noexcept;
  ~endpoint();

  explicit operator bool() const noexcept { return state_ != nullptr; }
  /// The executor given to listen(); empty for an empty endpoint.
  [[nodiscard]] executor_type get_executor() const noexcept;
  /// The port listened on (host order): what "0" picked.
  [[nodiscard]] std::uint16_t port() const noexcept;
  /// Stops listening and releases the id; see the class comment.
  std::error_code shutdown() noexcept;

  /// Completes with the next incoming request, its QP and CQs created with
  /// `cfg` before it is accepted (as librpma does). Accept it with
  /// conn_req::async_connect, refuse it with conn_req::reject or by
  /// destroying it; its private data is conn_req::private_data().
  ///
  /// Completion signature: `void(arpma::error_code, arpma::conn_req)`.
  /// Errors: the provider's errno when the queues cannot be made (the
  /// request is rejected); operation_aborted on cancellation (terminal,
  /// partial, total: no request is lost) or shutdown.
  template <
      boost::asio::completion_token_for<detail::conn_req_signature> CompletionToken = default_token>
  auto async_next_conn_req(const conn_cfg& cfg, CompletionToken&& token = default_token()) {
    return boost::asio::async_initiate<CompletionToken, detail::conn_req_signature>(
        detail::initiate_next_conn_req{state_.get()}, token, cfg);
  }

 private:
  friend struct detail::access;
  explicit endpoint(std::unique_ptr<detail::endpoint_state> state) noexcept;
  std::unique_ptr<detail::endpoint_state> state_;
};

}  // namespace arpma

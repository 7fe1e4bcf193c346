// rpma_conn_req_connect as an asynchronous operation, and what else a request
// can do before it becomes a connection.
#include "arpma/conn_req.hpp"
#include "arpma/error.hpp"
#include "core/conn_state.hpp"
#include "core/parked_op.hpp"
#include "support/log.hpp"

#include <limits>

namespace arpma::detail {
namespace {

// Owns the request until ESTABLISHED hands it to the connection; any other
// ending releases it (an incoming one is rejected on the way).
class connect_op final : public parked_op<connect_op, connection>, public conn_watcher {
 public:
  connect_op(asio::any_io_executor ex, std::unique_ptr<conn_state> state,
             std::vector<std::uint8_t> pdata, handler_type handler)
      : parked_op(std::move(ex), std::move(handler)),
        state_(std::move(state)),
        pdata_(std::move(pdata)) {}

  void start() {
    park(asio::cancellation_type::terminal | asio::cancellation_type::partial);
    asio::post(executor(), [self = shared_from_this()] { self->begin(); });
  }

  void poke() override {
    asio::post(executor(), [self = shared_from_this()] { self->check(); });
  }
  void gone() override {}  // the request is ours: it cannot go under us
  void cancelled() { fail(aborted()); }

 private:
  void begin() {
    if (done()) return;
    try {
      send();
    } catch (const std::system_error& e) {
      fail(e.code());
    } catch (const std::bad_alloc&) {
      fail(make_error_code(errc::no_memory));
    }
  }

  void send() {
    if (pdata_.size() > std::numeric_limits<std::uint8_t>::max())
      return fail(make_error_code(errc::invalid_argument));
    // Another io_context's request moves to this one's channel (a strand
    // of the same io_context is the same loop: the channel stays).
    if (&asio::query(state_->cm_events->executor(), asio::execution::context) !=
        &asio::query(executor(), asio::execution::context)) {
      auto shared = loop_cm_channel(state_->prov(), executor());
      if (!shared) return fail(shared.error());
      if (auto ec = state_->move_to(shared.value())) return fail(ec);
    }
    state_->ex = executor();
    state_->attach();
    hold(state_->cm_events);
    state_->watch(shared_from_this());
    const auto len = static_cast<std::uint8_t>(pdata_.size());
    if (auto ec = state_->start_connect(pdata_.empty() ? nullptr : pdata_.data(), len))
      return fail(ec);
    check();  // an incoming request may have heard from its client already
  }

  void check() {
    if (done()) return;
    while (!state_->inbox.empty()) {
      const auto ev = state_->inbox.front();
      state_->inbox.pop_front();
      if (ev.type == provider::cm_event_type::established) return succeed();
      if (ev.type == provider::cm_event_type::disconnected && state_->passive &&
          state_->phase == conn_phase::connected) {
        state_->inbox.push_front(ev);  // established, then over (conn_state::note)
        return succeed();
      }
      if (auto ec = connect_failure(ev)) {
        ARPMA_LOG(log_level::notice, "connecting: %s", provider::to_string(ev.type));
        return fail(ec);
      }
      ARPMA_LOG(log_level::warning, "connecting: %s ignored", provider::to_string(ev.type));
    }
  }

  void succeed() {
    state_->unwatch(this);
    complete({}, access::make<connection>(std::move(state_)));
  }

  void fail(const std::error_code& ec) {
    if (state_) {
      state_->unwatch(this);
      state_.reset();  // reverse-order teardown; an incoming request is rejected
    }
    complete(ec, connection());
  }

  std::unique_ptr<conn_state> state_;
  std::vector<std::uint8_t> pdata_;
};

}  // namespace

void start_connect(asio::any_io_executor ex, conn_req req, std::vector<std::uint8_t> private_data,
                   connection_handler handler) {
  auto state = access::release(req);
  // A handler without a loop runs on the request's; one the blocking call made
  // has none (its private loop runs only inside blocking calls: the connect
  // would wait there for ever).
  if (state && !runs_operations(ex))
    if (const auto* own = async_executor_of(state.get())) ex = *own;
  if (!state || !runs_operations(ex)) {
    return fail_at_once(std::move(handler), make_error_code(errc::invalid_argument), connection());
  }
  std::make_shared<connect_op>(std::move(ex), std::move(state), std::move(private_data),
                               std::move(handler))
      ->start();
}

}  // namespace arpma::detail

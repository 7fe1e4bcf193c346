// arpma::connection: its events (rpma_conn_next_event) and its end.
#include "arpma/connection.hpp"

#include "arpma/cq.hpp"
#include "arpma/error.hpp"
#include "core/conn_state.hpp"
#include "core/cq_dispatcher.hpp"
#include "core/parked_op.hpp"
#include "core/post.hpp"
#include "support/log.hpp"

namespace arpma {

const char* to_string(conn_event event) noexcept {
  switch (event) {
    case conn_event::established: return "Connection established";
    case conn_event::closed: return "Connection closed";
    case conn_event::lost: return "Connection lost";
    case conn_event::rejected: return "Connection rejected";
    case conn_event::unreachable: return "Connection unreachable";
    case conn_event::undefined: break;
  }
  return "Undefined connection event";
}

namespace detail {

conn_event to_conn_event(provider::cm_event_type type) noexcept {
  using t = provider::cm_event_type;
  switch (type) {
    case t::established: return conn_event::established;
    case t::connect_error:
    case t::device_removal: return conn_event::lost;
    case t::disconnected:
    case t::timewait_exit: return conn_event::closed;
    case t::rejected: return conn_event::rejected;
    case t::unreachable: return conn_event::unreachable;
    default: return conn_event::undefined;
  }
}

namespace {

constexpr auto any_cancellation = asio::cancellation_type::terminal |
                                  asio::cancellation_type::partial | asio::cancellation_type::total;

// Shared by the waits on a connection: they end when it goes away.
template <class Derived, class... Results>
class conn_wait : public parked_op<Derived, Results...>, public conn_watcher {
 public:
  using typename parked_op<Derived, Results...>::handler_type;

  conn_wait(asio::any_io_executor ex, conn_state* state, handler_type handler)
      : parked_op<Derived, Results...>(std::move(ex), std::move(handler)), state_(state) {}

  void start() {
    this->park(any_cancellation);
    this->hold(state_->cm_events);
    state_->watch(this->shared_from_this());
    poke();
  }
  void poke() override {
    asio::post(this->executor(), [self = this->shared_from_this()] {
      if (!self->done() && self->state_ != nullptr) self->check();
    });
  }
  void gone() override {
    state_ = nullptr;
    this->complete(aborted(), Results{}...);
  }
  void cancelled() {
    if (state_ != nullptr) state_->unwatch(this);
    this->complete(aborted(), Results{}...);
  }

 protected:
  void finish(const std::error_code& ec, Results... results) {
    if (state_ != nullptr) state_->unwatch(this);
    this->complete(ec, std::move(results)...);
  }

  conn_state* state_;
};

class next_event_op final : public conn_wait<next_event_op, conn_event> {
 public:
  using conn_wait::conn_wait;

  void check() {
    while (!state_->inbox.empty()) {
      const auto ev = state_->inbox.front();
      state_->inbox.pop_front();
      const auto mapped = to_conn_event(ev.type);
      if (mapped != conn_event::undefined) return finish({}, mapped);
      ARPMA_LOG(log_level::warning, "connection: %s has no connection event; skipped",
                provider::to_string(ev.type));
    }
  }
};

class disconnect_op final : public conn_wait<disconnect_op> {
 public:
  using conn_wait::conn_wait;

  void check() {
    if (state_->closed) finish({});
  }
};

}  // namespace

std::error_code request_disconnect(conn_state& state) noexcept {
  if (state.closed || state.disconnect_sent) return {};
  const auto ec = state.prov().disconnect(state.id);
  if (ec) {
    ARPMA_LOG_FAILURE("disconnect", ec);
    return ec;
  }
  state.disconnect_sent = true;
  ARPMA_LOG(log_level::notice, "Requesting for disconnection");
  return {};
}

void start_next_event(conn_state* state, conn_event_handler handler) {
  if (async_executor_of(state) == nullptr)
    return fail_at_once(std::move(handler), make_error_code(errc::invalid_argument),
                        conn_event::undefined);
  std::make_shared<next_event_op>(state->ex, state, std::move(handler))->start();
}

void start_disconnect(conn_state* state, disconnect_handler handler) {
  if (async_executor_of(state) == nullptr)
    return fail_at_once(std::move(handler), make_error_code(errc::invalid_argument));
  if (auto ec = request_disconnect(*state))
    return fail_on_loop(state->loop(), std::move(handler), ec);
  std::make_shared<disconnect_op>(state->ex, state, std::move(handler))->start();
}

}  // namespace detail

connection::connection() noexcept = default;
connection::connection(std::unique_ptr<detail::conn_state> state) noexcept
    : state_(std::move(state)) {}
connection::connection(connection&&) noexcept = default;
connection& connection::operator=(connection&&) noexcept = default;
connection::~connection() = default;

std::span<const std::uint8_t> connection::private_data() const noexcept {
  if (!state_) return {};
  return state_->private_data;
}

std::uint32_t connection::qp_num() const noexcept {
  return state_ && state_->has_qp ? state_->prov().qp_num(state_->id) : 0;
}

std::error_code connection::disconnect() noexcept {
  if (!state_) return make_error_code(errc::invalid_argument);
  return detail::request_disconnect(*state_);
}

std::error_code connection::close() noexcept {
  if (!state_) return {};
  const auto ec = state_->destroy();
  state_.reset();
  return ec;
}

namespace {

std::error_code post_now(detail::conn_state* state, const detail::data_op& op, std::uint64_t wr_id,
                         bool signaled) {
  if (state == nullptr || !state->has_qp) return make_error_code(errc::invalid_argument);
  return detail::post_data_op(*state, op, wr_id, signaled);
}

}  // namespace

std::error_code connection::post_write(const remote_buffer& dst, const local_buffer& src,
                                       std::uint64_t wr_id, bool signaled) {
  const auto op = detail::make_data_op(detail::data_op::kind::write, &src, &dst);
  return post_now(state_.get(), op, wr_id, signaled);
}

std::error_code connection::post_read(const local_buffer& dst, const remote_buffer& src,
                                      std::uint64_t wr_id, bool signaled) {
  const auto op = detail::make_data_op(detail::data_op::kind::read, &dst, &src);
  return post_now(state_.get(), op, wr_id, signaled);
}

std::error_code connection::post_send(const local_buffer& src, std::uint64_t wr_id, bool signaled) {
  const auto op = detail::make_data_op(detail::data_op::kind::send, &src, nullptr);
  return post_now(state_.get(), op, wr_id, signaled);
}

std::error_code connection::post_send_with_imm(const local_buffer& src, std::uint32_t imm,
                                               std::uint64_t wr_id, bool signaled) {
  auto op = detail::make_data_op(detail::data_op::kind::send_with_imm, &src, nullptr);
  op.imm = imm;
  return post_now(state_.get(), op, wr_id, signaled);
}

std::error_code connection::post_recv(const local_buffer& dst, std::uint64_t wr_id) {
  const auto op = detail::make_data_op(detail::data_op::kind::recv, &dst, nullptr);
  return post_now(state_.get(), op, wr_id, true);
}

void connection::set_busy_poll(std::chrono::microseconds budget) noexcept {
  if (detail::async_executor_of(state_.get()) == nullptr) return;
  state_->completions().set_busy_poll(budget);
}

cq connection::completion_queue(bool receive) const noexcept {
  return detail::queue_of(state_.get(), receive) != nullptr
             ? detail::access::make<cq>(state_.get(), receive)
             : cq();
}

}  // namespace arpma

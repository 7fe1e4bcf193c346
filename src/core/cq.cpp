// arpma::cq: waiting on a completion channel from the loop, and polling.
#include "arpma/cq.hpp"

#include "arpma/connection.hpp"
#include "arpma/srq.hpp"
#include "core/completion_of.hpp"
#include "core/conn_state.hpp"
#include "core/cq_events.hpp"
#include "core/fd_ready.hpp"
#include "core/parked_op.hpp"
#include "core/srq_state.hpp"
#include "support/log.hpp"

#include <array>
#include <optional>

namespace arpma {
namespace detail {

// Waits on the CQ's own channel fd. One per CQ, made by its first wait and
// kept with it (cq_state::waiter): the fd stays in the reactor, non-blocking,
// and a wait allocates nothing. A wait takes every event there (each
// acknowledged, the CQ re-armed), then completes. Told by its connection (or
// SRQ) when the CQ goes (aborted), and by the io_context's end, before the
// reactor goes, to let go of the fd: the provider's, never closed here.
class cq_waiter final : public std::enable_shared_from_this<cq_waiter>,
                        public conn_watcher,
                        public loop_shutdown_listener {
 public:
  cq_waiter(asio::any_io_executor ex, provider::provider& prov, const cq_state& q)
      : ex_(std::move(ex)), prov_(prov), channel_(q.own_channel) {}
  cq_waiter(const cq_waiter&) = delete;
  cq_waiter& operator=(const cq_waiter&) = delete;
  ~cq_waiter() { release(); }

  /// Watches the owner and the loop, and takes the fd into the reactor.
  std::error_code open(watcher_list& owner) {
    if (auto ec = adopt_non_blocking(fd_, ex_, prov_.comp_channel_fd(channel_))) return ec;
    owner.add(shared_from_this());
    on_loop_shutdown(ex_, shared_from_this());
    return {};
  }

  void start(wait_handler handler, bool local) {
    if (handler_ || !fd_) {
      const std::error_code ec =
          fd_ ? std::error_code(make_error_code(asio::error::in_progress)) : aborted();
      return fail_on_loop(ex_, std::move(handler), ec);
    }
    // Not by assignment: Boost 1.81's move assignment of an
    // any_completion_handler copies its argument as an lvalue and so wraps it
    // in itself, endlessly.
    handler_.swap(handler);
    local_ = local;
    if (!local) work_ = track_handler_work(handler_, ex_);
    auto slot = asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected())
      slot.assign(
          [weak = weak_from_this(), ex = ex_, wait = ++generation_](asio::cancellation_type) {
            if (auto self = weak.lock())
              asio::post(ex, [self, wait] {
                if (self->generation_ == wait) self->end(aborted());
              });
          });
    arm();
  }

  void poke() override {}
  void gone() override {  // the CQ goes: never touched again
    end(aborted());
    release();
  }
  void abandon() noexcept override {
    abandoned_ = true;
    work_.reset();
    if (handler_) {
      auto slot = asio::get_associated_cancellation_slot(handler_);
      if (slot.is_connected()) slot.clear();
      auto dropped = std::move(handler_);  // uncalled, as Asio drops its own
    }
    release();
  }

 private:
  void arm() {
    if (waiting_ || !fd_) return;
    waiting_ = true;
    fd_->async_wait(asio::posix::stream_descriptor::wait_read,
                    [self = shared_from_this()](const error_code& ec) { self->on_readable(ec); });
  }

  void on_readable(const error_code& ec) {
    waiting_ = false;
    if (abandoned_ || !fd_ || !handler_) return;
    if (ec) return arm();  // cancelled for a wait that ended; this one goes on
    std::error_code rearm;
    take_ready_cq_events(
        prov_, channel_, [](provider::cq*) { return true; },
        [&rearm](provider::cq*, const std::error_code& e) {
          if (e) rearm = e;
        },
        SIZE_MAX, channel_fd::nonblocking);
    end(rearm);
  }

  void end(const std::error_code& ec) {
    if (!handler_ || abandoned_) return;
    ++generation_;
    auto slot = asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) slot.clear();
    // A wait ended early leaves no fd wait behind to hold the loop.
    if (waiting_ && ec) fd_->cancel();
    if (!local_) return post_completion(ex_, std::move(work_), std::move(handler_), ec);
    asio::post(
        ex_, [h = std::move(handler_), e = to_completion_error(ec)]() mutable { std::move(h)(e); });
  }

  void release() noexcept {
    if (!fd_) return;
    fd_->release();  // the provider owns the fd; a pending wait is dropped
    fd_.reset();
  }

  asio::any_io_executor ex_;
  provider::provider& prov_;
  provider::comp_channel* channel_;
  std::optional<asio::posix::stream_descriptor> fd_;
  wait_handler handler_;
  handler_work work_;
  std::uint64_t generation_ = 0;  ///< which wait a cancellation was for
  bool local_ = false;
  bool waiting_ = false;
  bool abandoned_ = false;
};

void retire(cq_waiter& waiter) noexcept { waiter.gone(); }

namespace {

result<std::size_t> poll_into(provider::provider& p, provider::cq* cq, std::span<completion> out) {
  return poll_converted(p, cq, out,
                        [](const provider::work_completion& wc, completion& o) noexcept {
                          o = completion_of(wc, true);
                        });
}

// The CQ's waiter, made by its first wait; null (and `ec` set) on failure.
cq_waiter* waiter_of(const cq_state& q, const asio::any_io_executor& ex, provider::provider& prov,
                     watcher_list& owner, std::error_code& ec) {
  if (q.waiter) return q.waiter.get();
  auto w = std::make_shared<cq_waiter>(ex, prov, q);
  if ((ec = w->open(owner))) return nullptr;
  q.waiter = std::move(w);
  return q.waiter.get();
}

}  // namespace

void start_cq_wait(conn_state* state, srq_state* srq, bool receive, wait_handler handler,
                   bool local) {
  std::error_code ec;
  if (srq != nullptr) {
    const auto* q = queue_of(srq);
    if (q == nullptr || !srq->ex)
      return fail_on_loop(srq->ex, std::move(handler), make_error_code(errc::invalid_argument));
    auto* w = waiter_of(*q, srq->ex, srq->prov(), srq->waiters, ec);
    if (w == nullptr) return fail_on_loop(srq->ex, std::move(handler), ec);
    return w->start(std::move(handler), local);
  }
  const auto* q = queue_of(state, receive);
  if (q == nullptr || async_executor_of(state) == nullptr) {
    return fail_on_loop(state != nullptr ? state->loop() : asio::any_io_executor(),
                        std::move(handler), make_error_code(errc::invalid_argument));
  }
  if (state->conn_comp_channel != nullptr || state->attached_comp_channel)
    return fail_on_loop(state->loop(), std::move(handler), make_error_code(errc::shared_channel));
  auto* w = waiter_of(*q, state->ex, state->prov(), state->waiters(), ec);
  if (w == nullptr) return fail_on_loop(state->ex, std::move(handler), ec);
  w->start(std::move(handler), local);
}

asio::any_io_executor cq_executor(const conn_state* state, const srq_state* srq) noexcept {
  if (srq != nullptr) return srq->ex;
  const auto* ex = async_executor_of(state);
  return ex != nullptr ? *ex : asio::any_io_executor();
}

}  // namespace detail

result<std::size_t> cq::poll(std::span<completion> out) {
  if (srq_ != nullptr) {
    const auto* q = detail::queue_of(srq_);
    if (q == nullptr) return make_error_code(errc::invalid_argument);
    return detail::poll_into(srq_->prov(), q->cq, out);
  }
  const auto* q = detail::queue_of(state_, receive_);
  if (q == nullptr) return make_error_code(errc::invalid_argument);
  return detail::poll_into(state_->prov(), q->cq, out);
}

}  // namespace arpma

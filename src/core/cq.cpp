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
namespace {

// Waits on the CQ's own channel fd; takes every event there (each
// acknowledged, the CQ re-armed), then completes. Owned by its fd wait, no
// timer; told by its connection (or SRQ) when the CQ goes (aborted), and by
// the io_context's end, before the reactor goes, to let go of the fd: the
// provider's, never closed here.
class cq_wait final : public std::enable_shared_from_this<cq_wait>,
                      public conn_watcher,
                      public loop_shutdown_listener {
 public:
  cq_wait(asio::any_io_executor ex, wait_handler handler, provider::provider& prov,
          const cq_state& q)
      : ex_(std::move(ex)),
        handler_(std::move(handler)),
        work_(track_handler_work(handler_, ex_)),
        prov_(prov),
        channel_(q.own_channel) {}
  cq_wait(const cq_wait&) = delete;
  cq_wait& operator=(const cq_wait&) = delete;
  ~cq_wait() { release(); }

  void start(watcher_list& owner) {
    owner.add(shared_from_this());
    on_loop_shutdown(ex_, shared_from_this());
    auto slot = asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected())
      slot.assign([weak = weak_from_this(), ex = ex_](asio::cancellation_type) {
        if (auto self = weak.lock()) asio::post(ex, [self] { self->end(aborted()); });
      });
    when_readable(fd_, ex_, prov_.comp_channel_fd(channel_),
                  [self = shared_from_this()](const std::error_code& ec) {
                    if (!ec) self->take();
                  });
  }

  void poke() override {}
  void gone() override { end(aborted()); }  // the CQ goes: never touched again
  void abandon() noexcept override {
    abandoned_ = true;
    work_.reset();
    release();  // the handler goes, uncalled, with the wait that owns this
  }

 private:
  void take() {
    if (done_) return;
    std::error_code rearm;
    take_ready_cq_events(
        prov_, channel_, [](provider::cq*) { return true; },
        [&rearm](provider::cq*, const std::error_code& ec) {
          if (ec) rearm = ec;
        });
    end(rearm);
  }

  void end(const std::error_code& ec) {
    if (done_ || abandoned_) return;
    done_ = true;
    release();
    auto slot = asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) slot.clear();
    post_completion(ex_, std::move(work_), std::move(handler_), ec);
  }

  void release() noexcept {
    if (!fd_) return;
    fd_->release();  // the provider owns the fd
    fd_.reset();
  }

  asio::any_io_executor ex_;
  wait_handler handler_;
  handler_work work_;
  provider::provider& prov_;
  provider::comp_channel* channel_;
  std::optional<asio::posix::stream_descriptor> fd_;
  bool done_ = false;
  bool abandoned_ = false;
};

result<std::size_t> poll_into(provider::provider& p, provider::cq* cq, std::span<completion> out) {
  return poll_converted(p, cq, out,
                        [](const provider::work_completion& wc, completion& o) noexcept {
                          o = completion_of(wc, true);
                        });
}

}  // namespace

void start_cq_wait(conn_state* state, srq_state* srq, bool receive, wait_handler handler) {
  if (srq != nullptr) {
    const auto* q = queue_of(srq);
    if (q == nullptr || !srq->ex)
      return fail_on_loop(srq->ex, std::move(handler), make_error_code(errc::invalid_argument));
    std::make_shared<cq_wait>(srq->ex, std::move(handler), srq->prov(), *q)->start(srq->waiters);
    return;
  }
  const auto* q = queue_of(state, receive);
  if (q == nullptr || async_executor_of(state) == nullptr) {
    return fail_on_loop(state != nullptr ? state->loop() : asio::any_io_executor(),
                        std::move(handler), make_error_code(errc::invalid_argument));
  }
  if (state->conn_comp_channel != nullptr || state->attached_comp_channel)
    return fail_on_loop(state->loop(), std::move(handler), make_error_code(errc::shared_channel));
  std::make_shared<cq_wait>(state->ex, std::move(handler), state->prov(), *q)
      ->start(state->waiters());
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

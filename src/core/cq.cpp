// arpma::cq: waiting on a completion channel from the loop, and polling.
#include "arpma/cq.hpp"

#include "arpma/connection.hpp"
#include "arpma/srq.hpp"
#include "core/conn_state.hpp"
#include "core/fd_ready.hpp"
#include "core/log_internal.hpp"
#include "core/parked_op.hpp"
#include "core/poll_wc.hpp"
#include "core/srq_state.hpp"

#include <arpa/inet.h>

#include <array>
#include <optional>

namespace arpma {
namespace detail {
namespace {

const cq_state* queue_of(const conn_state* state, bool receive) {
  if (state == nullptr) return nullptr;
  const auto& q = receive ? state->rcq : state->cq;
  return q.cq != nullptr ? &q : nullptr;
}

const cq_state* queue_of(const srq_state* srq) {
  return srq != nullptr && srq->peer && srq->rcq.cq != nullptr ? &srq->rcq : nullptr;
}

// Waits on the CQ's own channel fd; takes every event there, acknowledges
// it and re-arms, then completes.
class cq_wait final : public parked_op<cq_wait> {
 public:
  cq_wait(asio::any_io_executor ex, wait_handler handler, provider::provider& prov,
          const cq_state& q)
      : parked_op(std::move(ex), std::move(handler)), prov_(prov), queue_(q) {}

  void start() {
    constexpr auto any = asio::cancellation_type::terminal | asio::cancellation_type::partial |
                         asio::cancellation_type::total;
    park(any);
    when_readable(fd_, executor(), prov_.comp_channel_fd(queue_.own_channel),
                  [self = shared_from_this()](const std::error_code& ec) {
                    if (!ec) self->take();
                  });
  }

  void cancelled() {
    release();
    complete(aborted());
  }

 private:
  void take() {
    if (done()) return;
    release();
    auto& p = prov_;
    const int fd = p.comp_channel_fd(queue_.own_channel);
    while (readable(fd)) {
      auto fired = p.get_cq_event(queue_.own_channel);
      if (!fired) break;
      p.ack_cq_events(fired.value(), 1);
    }
    if (auto ec = p.req_notify_cq(queue_.cq, false)) {
      ARPMA_LOG_FAILURE("re-arm cq", ec);
      return complete(ec);
    }
    complete({});
  }

  void release() noexcept {
    if (!fd_) return;
    fd_->release();  // the provider owns the fd
    fd_.reset();
  }

  provider::provider& prov_;
  const cq_state& queue_;
  std::optional<asio::posix::stream_descriptor> fd_;
};

void to_ibv_wc(const provider::work_completion& wc, ibv_wc& o) noexcept {
  o = ibv_wc{};
  o.wr_id = wc.wr_id;
  o.status = static_cast<ibv_wc_status>(wc.status);
  o.opcode = static_cast<ibv_wc_opcode>(wc.opcode);
  o.vendor_err = wc.vendor_err;
  o.byte_len = wc.byte_len;
  o.imm_data = htonl(wc.imm_data);  // ibv_wc carries it in network order
  o.qp_num = wc.qp_num;
  o.wc_flags = wc.with_imm ? IBV_WC_WITH_IMM : 0;
}

template <std::size_t Batch>
result<std::size_t> poll_batches(provider::provider& p, provider::cq* cq, std::span<ibv_wc> out) {
  std::array<provider::work_completion, Batch> batch;
  std::size_t got = 0;
  while (got < out.size()) {
    const auto want = std::min(batch.size(), out.size() - got);
    auto polled = p.poll_cq(cq, std::span(batch.data(), want));
    if (!polled) return polled.error();
    for (std::size_t i = 0; i < polled.value(); ++i) to_ibv_wc(batch[i], out[got++]);
    if (polled.value() < want) break;
  }
  return got;
}

}  // namespace

result<std::size_t> poll_into(provider::provider& p, provider::cq* cq, std::span<ibv_wc> out) {
  // The usual call (rpma_cq_get_wc with 1) gets a batch of one: sixteen
  // entries to initialise per poll cost a few percent of a 64 B write's
  // round trip in the Soft-RoCE guest.
  if (out.size() == 1) return poll_batches<1>(p, cq, out);
  return poll_batches<16>(p, cq, out);
}

void start_cq_wait(conn_state* state, srq_state* srq, bool receive, wait_handler handler) {
  if (srq != nullptr) {
    const auto* q = queue_of(srq);
    if (q == nullptr || !srq->ex)
      return fail_on_loop(srq->ex, std::move(handler), make_error_code(errc::invalid_argument));
    std::make_shared<cq_wait>(srq->ex, std::move(handler), srq->prov(), *q)->start();
    return;
  }
  const auto* q = queue_of(state, receive);
  if (q == nullptr || !state->attached) {
    return fail_on_loop(state != nullptr ? state->loop() : asio::any_io_executor(),
                        std::move(handler), make_error_code(errc::invalid_argument));
  }
  if (state->shared_channel != nullptr || state->common_channel)
    return fail_on_loop(state->loop(), std::move(handler), make_error_code(errc::shared_channel));
  std::make_shared<cq_wait>(state->channel->executor(), std::move(handler), state->prov(), *q)
      ->start();
}

}  // namespace detail

result<std::size_t> cq::poll(std::span<ibv_wc> out) {
  if (srq_ != nullptr) {
    const auto* q = detail::queue_of(srq_);
    if (q == nullptr) return make_error_code(errc::invalid_argument);
    return detail::poll_into(srq_->prov(), q->cq, out);
  }
  const auto* q = detail::queue_of(state_, receive_);
  if (q == nullptr) return make_error_code(errc::invalid_argument);
  return detail::poll_into(state_->prov(), q->cq, out);
}

cq srq::completion_queue() const noexcept {
  return detail::queue_of(state_.get()) != nullptr ? cq(state_.get()) : cq();
}

cq connection::completion_queue(bool receive) const noexcept {
  return detail::queue_of(state_.get(), receive) != nullptr ? cq(state_.get(), receive) : cq();
}

}  // namespace arpma

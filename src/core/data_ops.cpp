// connection::async_read / write / ... : one work request each, completed by
// its own work completion.
#include "arpma/connection.hpp"

#include "arpma/error.hpp"
#include "core/conn_state.hpp"
#include "core/cq_dispatcher.hpp"
#include "core/parked_op.hpp"
#include "core/post.hpp"
#include "core/srq_state.hpp"

namespace arpma {
namespace detail {
namespace {

std::error_code status_error(provider::wc_status status) {
  return make_error_code(static_cast<wc_errc>(static_cast<int>(status)));
}

completion to_completion(const provider::work_completion& wc) {
  completion out;
  out.byte_len = wc.byte_len;
  out.opcode = static_cast<wc_opcode>(static_cast<int>(wc.opcode));
  if (wc.with_imm) out.imm = wc.imm_data;
  out.qp_num = wc.qp_num;
  return out;
}

}  // namespace

std::error_code post(conn_state& st, const data_op& op, std::uint64_t wr_id, bool signaled) {
  const post_options opts{signaled, wr_id};
  using k = data_op::kind;
  const remote_mr* remote = op.remote ? &*op.remote : nullptr;
  switch (op.what) {
    case k::read:
      return post_read(st, op.local, op.local_offset, remote, op.remote_offset, op.len, opts);
    case k::write:
    case k::write_with_imm:
      return post_write(st, remote, op.remote_offset, op.local, op.local_offset, op.len,
                        op.what == k::write_with_imm ? std::optional(op.imm) : std::nullopt, opts);
    case k::atomic_write: {
      if (remote == nullptr) return make_error_code(errc::invalid_argument);
      char value[8];
      std::copy(op.value.begin(), op.value.end(), value);
      return post_atomic_write(st, *remote, op.remote_offset, value, opts);
    }
    case k::flush:
      if (remote == nullptr) return make_error_code(errc::invalid_argument);
      return post_flush(
          st, *remote, op.remote_offset, op.len,
          op.flush == flush_type::persistent ? flush_kind::persistent : flush_kind::visibility,
          opts);
    case k::send:
    case k::send_with_imm:
      return post_send(st, op.local, op.local_offset, op.len,
                       op.what == k::send_with_imm ? std::optional(op.imm) : std::nullopt, opts);
    case k::recv: return post_recv(st, op.local, op.local_offset, op.len, wr_id);
  }
  return make_error_code(errc::invalid_argument);
}

namespace {

// Posted once; completes from its work completion. A cancellation only
// marks it: the buffer is the provider's until the completion comes back.
class data_op_wait final : public parked_op<data_op_wait, completion>, public wc_waiter {
 public:
  data_op_wait(asio::any_io_executor ex, handler_type handler)
      : parked_op(std::move(ex), std::move(handler)) {}

  /// Posts with `post_as(wr_id)`, the wr_id being the dispatcher's for this.
  template <class Post>
  void start(cq_dispatcher& dispatcher, const Post& post_as) {
    // Kept alive by the dispatcher, not by a timer (see cq_dispatcher::abandon).
    park(asio::cancellation_type::terminal | asio::cancellation_type::partial, false);
    const auto wr_id = dispatcher.add(shared_from_this());
    if (auto ec = post_as(wr_id)) {
      dispatcher.remove(wr_id);
      return complete(ec, completion{});
    }
    dispatcher.kick();
  }

  void on_wc(const provider::work_completion& wc) override {
    if (cancelled_) return complete(aborted(), completion{});
    if (wc.status != provider::wc_status::success)
      return complete(status_error(wc.status), to_completion(wc));
    complete({}, to_completion(wc));
  }
  void on_closed() override { complete(aborted(), completion{}); }
  void cancelled() { cancelled_ = true; }

 private:
  bool cancelled_ = false;
};

}  // namespace

void start_data_op(conn_state* state, const data_op& op, completion_handler handler) {
  if (state == nullptr || !state->attached || !state->has_qp) {
    return fail_on_loop(state != nullptr ? state->loop() : asio::any_io_executor(),
                        std::move(handler), make_error_code(errc::invalid_argument), completion{});
  }
  auto wait = std::make_shared<data_op_wait>(state->channel->executor(), std::move(handler));
  wait->start(state->completions(wait->executor()),
              [&](std::uint64_t wr_id) { return post(*state, op, wr_id, true); });
}

void start_srq_recv(srq_state* state, const local_mr_state* dst, std::size_t offset,
                    std::size_t len, completion_handler handler) {
  const auto loop = state != nullptr ? state->ex : asio::any_io_executor();
  if (state == nullptr || state->peer == nullptr || !state->ex || dst == nullptr)
    return fail_on_loop(loop, std::move(handler), make_error_code(errc::invalid_argument),
                        completion{});
  // Without an RCQ of its own the receive completes on whichever
  // connection's CQ took it; only that connection's owner can poll it.
  if (state->rcq.cq == nullptr)
    return fail_on_loop(loop, std::move(handler), make_error_code(errc::not_supported),
                        completion{});
  auto wait = std::make_shared<data_op_wait>(state->ex, std::move(handler));
  wait->start(state->completions(),
              [&](std::uint64_t wr_id) { return state->post_recv(dst, offset, len, wr_id); });
}

cq_dispatcher& conn_state::completions(const asio::any_io_executor& ex) {
  if (!dispatcher) {
    dispatcher = std::make_shared<cq_dispatcher>(
        prov(), std::vector{shared_channel, cq.own_channel, rcq.own_channel},
        std::vector{cq.cq, rcq.cq}, ex, common_channel);
    on_loop_shutdown(ex, dispatcher);
    if (common_channel) {
      common_channel->bind(cq.cq, dispatcher);
      if (rcq.cq != nullptr) common_channel->bind(rcq.cq, dispatcher);
    }
  }
  return *dispatcher;
}

}  // namespace detail

namespace {

std::error_code post_now(detail::conn_state* state, const detail::data_op& op, std::uint64_t wr_id,
                         bool signaled) {
  if (state == nullptr || !state->has_qp) return make_error_code(errc::invalid_argument);
  return detail::post(*state, op, wr_id, signaled);
}

}  // namespace

std::error_code connection::post_write(const remote_mr& dst, std::size_t dst_offset,
                                       const local_mr& src, std::size_t src_offset, std::size_t len,
                                       std::uint64_t wr_id, bool signaled) {
  const auto op = detail::make_data_op(detail::data_op::kind::write, src.state(), src_offset, &dst,
                                       dst_offset, len);
  return post_now(state_.get(), op, wr_id, signaled);
}

std::error_code connection::post_read(const local_mr& dst, std::size_t dst_offset,
                                      const remote_mr& src, std::size_t src_offset, std::size_t len,
                                      std::uint64_t wr_id, bool signaled) {
  const auto op = detail::make_data_op(detail::data_op::kind::read, dst.state(), dst_offset, &src,
                                       src_offset, len);
  return post_now(state_.get(), op, wr_id, signaled);
}

std::error_code connection::post_send(const local_mr& src, std::size_t offset, std::size_t len,
                                      std::uint64_t wr_id, bool signaled) {
  const auto op =
      detail::make_data_op(detail::data_op::kind::send, src.state(), offset, nullptr, 0, len);
  return post_now(state_.get(), op, wr_id, signaled);
}

std::error_code connection::post_recv(const local_mr& dst, std::size_t offset, std::size_t len,
                                      std::uint64_t wr_id) {
  const auto op =
      detail::make_data_op(detail::data_op::kind::recv, dst.state(), offset, nullptr, 0, len);
  return post_now(state_.get(), op, wr_id, true);
}

void connection::set_busy_poll(std::chrono::microseconds budget) noexcept {
  if (!state_ || !state_->attached) return;
  state_->completions(state_->channel->executor()).set_busy_poll(budget);
}

}  // namespace arpma

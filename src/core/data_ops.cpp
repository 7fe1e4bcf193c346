// connection::async_read / write / ... : one work request each, completed by
// its own work completion.
#include "arpma/connection.hpp"

#include "arpma/error.hpp"
#include "core/conn_state.hpp"
#include "core/cq_dispatcher.hpp"
#include "core/post.hpp"
#include "core/srq_state.hpp"

namespace arpma::detail {

std::error_code post_data_op(conn_state& st, const data_op& op, std::uint64_t wr_id,
                             bool signaled) {
  const post_options opts{signaled, wr_id};
  using k = data_op::kind;
  const remote_mr* remote = op.remote ? &*op.remote : nullptr;
  if (remote != nullptr && op.remote_len != op.len) return make_error_code(errc::invalid_argument);
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
      return post_flush(st, *remote, op.remote_offset, op.len, op.flush, opts);
    case k::send:
    case k::send_with_imm:
      return post_send(st, op.local, op.local_offset, op.len,
                       op.what == k::send_with_imm ? std::optional(op.imm) : std::nullopt, opts);
    case k::recv: return post_recv(st, op.local, op.local_offset, op.len, wr_id);
  }
  return make_error_code(errc::invalid_argument);
}

namespace {

// Registered first, so the work request carries its wr_id; taken back and
// failed from the queue if the post fails.
template <class Post>
void start_wc_op(cq_dispatcher& dispatcher, wc_op* op, const Post& post_as) {
  const auto wr_id = dispatcher.add(op);
  if (auto ec = post_as(wr_id)) return dispatcher.fail(dispatcher.remove(wr_id), ec);
  dispatcher.kick();
}

const asio::any_io_executor& no_executor() noexcept {
  static const asio::any_io_executor none;
  return none;
}

}  // namespace

const asio::any_io_executor& executor_of(const conn_state* state) noexcept {
  const auto* ex = async_executor_of(state);
  return ex != nullptr ? *ex : no_executor();
}

void start_data_op(conn_state* state, const data_op& op, wc_op* pending) {
  if (async_executor_of(state) == nullptr || !state->has_qp)
    return fail_op(executor_of(state), pending, make_error_code(errc::invalid_argument));
  start_wc_op(state->completions(), pending,
              [&](std::uint64_t wr_id) { return post_data_op(*state, op, wr_id, true); });
}

void start_srq_recv(srq_state* state, const local_mr_state* dst, std::size_t offset,
                    std::size_t len, wc_op* pending) {
  const auto& loop = state != nullptr ? state->ex : no_executor();
  if (state == nullptr || state->peer == nullptr || !state->ex || dst == nullptr)
    return fail_op(loop, pending, make_error_code(errc::invalid_argument));
  // Without an RCQ of its own the receive completes on whichever
  // connection's CQ took it; only that connection's owner can poll it.
  if (state->rcq.cq == nullptr) return fail_op(loop, pending, make_error_code(errc::not_supported));
  start_wc_op(state->completions(), pending,
              [&](std::uint64_t wr_id) { return state->post_recv(dst, offset, len, wr_id); });
}

const asio::any_io_executor& srq_executor(const srq_state* state) noexcept {
  return state != nullptr ? state->ex : no_executor();
}

cq_dispatcher& conn_state::completions() {
  if (!dispatcher) {
    dispatcher = std::make_shared<cq_dispatcher>(
        prov(), std::vector{conn_comp_channel, cq.own_channel, rcq.own_channel},
        std::vector{cq.cq, rcq.cq}, ex, attached_comp_channel);
    on_loop_shutdown(ex, dispatcher);
    if (attached_comp_channel) {
      attached_comp_channel->bind(cq.cq, dispatcher);
      if (rcq.cq != nullptr) attached_comp_channel->bind(rcq.cq, dispatcher);
    }
  }
  return *dispatcher;
}

}  // namespace arpma::detail

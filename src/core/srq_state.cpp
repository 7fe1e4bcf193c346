#include "core/srq_state.hpp"

#include "arpma/error.hpp"
#include "core/cm_channel.hpp"
#include "core/cq_dispatcher.hpp"
#include "support/log.hpp"

#include <limits>
#include <new>

namespace arpma::detail {

result<std::shared_ptr<srq_state>> srq_state::create(std::shared_ptr<peer_state> p,
                                                     std::uint32_t rq_size,
                                                     std::uint32_t rcq_size) {
  if (!p) return make_error_code(errc::invalid_argument);
  std::shared_ptr<srq_state> state;
  try {
    state = std::make_shared<srq_state>(std::move(p));
  } catch (const std::bad_alloc&) {
    return make_error_code(errc::no_memory);
  }
  auto& prov = state->prov();
  auto created = prov.create_srq(state->peer->pd, rq_size, 1);
  if (!created) {
    ARPMA_LOG_FAILURE("create srq", created.error());
    return created.error();
  }
  state->srq = created.value();
  if (rcq_size > 0)
    if (auto ec = make_cq(prov, state->peer->dev, rcq_size, nullptr, state->rcq))
      return ec;  // `state` destroys the SRQ on the way out
  return state;
}

std::error_code srq_state::destroy() noexcept {
  if (!peer) return {};
  waiters.gone_all();
  if (dispatcher) {
    // The RCQ goes: nothing posted through it can complete any more.
    dispatcher->close();
    dispatcher.reset();
  }
  auto& p = prov();
  std::error_code first = destroy_cq(p, rcq);
  if (srq != nullptr) {
    const auto ec = p.destroy_srq(srq);
    if (ec) ARPMA_LOG_FAILURE("destroy srq", ec);
    if (!first) first = ec;
    srq = nullptr;
  }
  peer.reset();
  return first;
}

cq_dispatcher& srq_state::completions() {
  if (!dispatcher) {
    dispatcher = std::make_shared<cq_dispatcher>(prov(), std::vector{rcq.own_channel},
                                                 std::vector{rcq.cq}, ex);
    on_loop_shutdown(ex, dispatcher);
  }
  return *dispatcher;
}

std::error_code srq_state::post_recv(const local_mr_state* dst, std::size_t offset, std::size_t len,
                                     std::uint64_t wr_id) const {
  const auto invalid = make_error_code(errc::invalid_argument);
  if (srq == nullptr || len > std::numeric_limits<std::uint32_t>::max()) return invalid;
  provider::recv_wr wr;
  wr.wr_id = wr_id;
  if (dst == nullptr) {
    if (offset != 0 || len != 0) return invalid;
  } else {
    if (!dst->contains(offset, len)) return invalid;
    wr.local = dst->slice(offset, len);
  }
  if (auto ec = prov().post_srq_recv(srq, wr)) {
    ARPMA_LOG_FAILURE("post srq recv", ec);
    return ec;
  }
  return {};
}

}  // namespace arpma::detail

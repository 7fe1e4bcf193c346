#include "arpma/srq.hpp"

#include "arpma/error.hpp"
#include "core/srq_state.hpp"

#include <utility>

namespace arpma {

result<srq> srq::create(const peer& p, const srq_config& cfg) {
  if (!detail::access::state(p) || detail::access::state(p)->pd == nullptr)
    return make_error_code(errc::invalid_argument);
  auto state = detail::srq_state::create(detail::access::state(p), cfg.rq_size, cfg.rcq_size);
  if (!state) return state.error();
  return srq(std::move(state).value());
}

result<srq> srq::create(const boost::asio::any_io_executor& ex, const peer& p,
                        const srq_config& cfg) {
  if (!ex) return make_error_code(errc::invalid_argument);
  auto made = create(p, cfg);
  if (made) made.value().state_->ex = ex;
  return made;
}

srq::srq() noexcept = default;
srq::srq(std::shared_ptr<detail::srq_state> state) noexcept : state_(std::move(state)) {}
srq::srq(srq&&) noexcept = default;
srq& srq::operator=(srq&&) noexcept = default;
srq::~srq() = default;

std::error_code srq::post_recv(const local_buffer& dst, std::uint64_t wr_id) {
  if (!state_ || detail::access::state(dst) == nullptr)
    return make_error_code(errc::invalid_argument);
  return state_->post_recv(detail::access::state(dst), dst.offset(), dst.size(), wr_id);
}

cq srq::completion_queue() const noexcept {
  return detail::queue_of(state_.get()) != nullptr ? detail::access::make<cq>(state_.get()) : cq();
}

bool srq::has_rcq() const noexcept { return state_ && state_->rcq.cq != nullptr; }

int srq::rcq_fd() const noexcept {
  if (!has_rcq()) return -1;
  return state_->prov().comp_channel_fd(state_->rcq.own_channel);
}

std::error_code srq::close() noexcept {
  auto state = std::exchange(state_, nullptr);
  if (!state || state.use_count() > 1) return {};
  return state->destroy();
}

}  // namespace arpma

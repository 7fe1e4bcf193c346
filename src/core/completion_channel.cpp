#include "arpma/completion_channel.hpp"

#include "arpma/error.hpp"
#include "core/comp_channel_state.hpp"

#include <utility>

namespace arpma {

result<completion_channel> completion_channel::create(const executor_type& ex, const peer& p) {
  if (!ex || !detail::access::state(p) || detail::access::state(p)->pd == nullptr)
    return make_error_code(errc::invalid_argument);
  auto state = detail::comp_channel_state::create(detail::access::state(p), ex);
  if (!state) return state.error();
  return completion_channel(std::move(state).value());
}

completion_channel::completion_channel() noexcept = default;
completion_channel::completion_channel(std::shared_ptr<detail::comp_channel_state> state) noexcept
    : state_(std::move(state)) {}
completion_channel::completion_channel(completion_channel&&) noexcept = default;
completion_channel& completion_channel::operator=(completion_channel&&) noexcept = default;
completion_channel::~completion_channel() = default;

completion_channel::executor_type completion_channel::get_executor() const noexcept {
  return state_ ? state_->ex : executor_type();
}

int completion_channel::native_handle() const noexcept { return state_ ? state_->fd() : -1; }

std::size_t completion_channel::cq_count() const noexcept {
  return state_ ? state_->cq_count() : 0;
}

std::error_code completion_channel::close() noexcept {
  auto state = std::exchange(state_, nullptr);
  if (!state || state.use_count() > 1) return {};
  return state->destroy();
}

}  // namespace arpma

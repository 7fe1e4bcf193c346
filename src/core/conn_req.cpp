// arpma::conn_req: a connection request's own members (what it is, and how it
// ends without connecting). Making one: conn_req_new.cpp, endpoint.cpp;
// connecting it: connect.cpp.
#include "arpma/conn_req.hpp"

#include "arpma/error.hpp"
#include "core/conn_state.hpp"
#include "core/post.hpp"
#include "provider/provider.hpp"
#include "support/log.hpp"

namespace arpma {

conn_req::conn_req() noexcept = default;
conn_req::conn_req(std::unique_ptr<detail::conn_state> state) noexcept : state_(std::move(state)) {}
conn_req::conn_req(conn_req&&) noexcept = default;
conn_req& conn_req::operator=(conn_req&&) noexcept = default;
conn_req::~conn_req() = default;

boost::asio::any_io_executor detail::executor_of_request(const detail::conn_state* state) noexcept {
  const auto* ex = async_executor_of(state);
  return ex != nullptr ? *ex : boost::asio::any_io_executor();
}

std::uint32_t conn_req::qp_num() const noexcept {
  return state_ && state_->has_qp ? state_->prov().qp_num(state_->id) : 0;
}

bool conn_req::has_rcq() const noexcept { return state_ && state_->rcq.cq != nullptr; }

std::error_code conn_req::close() noexcept {
  if (!state_) return {};
  const auto ec = state_->destroy();
  state_.reset();
  return ec;
}

bool conn_req::incoming() const noexcept { return state_ && state_->passive; }

std::span<const std::uint8_t> conn_req::private_data() const noexcept {
  if (!state_ || !state_->passive) return {};
  return state_->private_data;
}

std::error_code conn_req::reject(std::span<const std::uint8_t> private_data) noexcept {
  if (!state_ || !state_->passive || private_data.size() > provider::max_reject_private_data)
    return make_error_code(errc::invalid_argument);
  const auto len = static_cast<std::uint8_t>(private_data.size());
  auto ec =
      state_->prov().reject(state_->id, private_data.empty() ? nullptr : private_data.data(), len);
  if (ec) ARPMA_LOG_FAILURE("reject", ec);
  state_->phase = detail::conn_phase::refused;  // the refusal is said (or failed): say no more
  const auto teardown = close();
  return ec ? ec : teardown;
}

std::error_code conn_req::post_recv(const local_buffer& dst, std::uint64_t wr_id) {
  if (!state_ || !state_->has_qp) return make_error_code(errc::invalid_argument);
  const auto op = detail::make_data_op(detail::data_op::kind::recv, &dst, nullptr);
  return detail::post_data_op(*state_, op, wr_id, true);
}

}  // namespace arpma

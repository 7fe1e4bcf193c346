#include "core/direct_cq.hpp"

#include "arpma/error.hpp"
#include "core/cq_events.hpp"

namespace arpma::detail {

std::error_code direct_cq::wait() const {
  if (shared_) return make_error_code(errc::shared_channel);
  auto fired = prov_->get_cq_event(channel_);
  if (!fired) return make_error_code(errc::no_completion);
  if (acknowledge_and_rearm(*prov_, fired.value())) return make_error_code(errc::provider);
  return {};
}

int direct_cq::fd() const noexcept {
  return channel_ != nullptr ? prov_->comp_channel_fd(channel_) : -1;
}

result<bool> wait_shared_channel(const conn_state* conn) {
  if (conn == nullptr) return make_error_code(errc::invalid_argument);
  if (conn->conn_comp_channel == nullptr) return make_error_code(errc::not_shared_channel);
  auto& p = conn->prov();
  auto fired = p.get_cq_event(conn->conn_comp_channel);
  if (!fired) return make_error_code(errc::no_completion);
  const bool receive = fired.value() == conn->rcq.cq && conn->rcq.cq != nullptr;
  if (!receive && fired.value() != conn->cq.cq) return make_error_code(errc::unknown);
  if (acknowledge_and_rearm(p, fired.value())) return make_error_code(errc::provider);
  return receive;
}

result<int> shared_channel_fd(const conn_state* conn) noexcept {
  if (conn == nullptr || conn->conn_comp_channel == nullptr)
    return make_error_code(errc::not_shared_channel);
  return conn->prov().comp_channel_fd(conn->conn_comp_channel);
}

}  // namespace arpma::detail

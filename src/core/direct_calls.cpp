#include "core/direct_calls.hpp"

#include "arpma/error.hpp"
#include "core/conn_state.hpp"
#include "core/endpoint_state.hpp"
#include "core/thread_loop.hpp"
#include "support/log.hpp"

namespace arpma::detail {

result<endpoint> listen_now(const std::shared_ptr<peer_state>& p, const std::string& addr,
                            const std::string& port) {
  // Empty strings are refused as endpoint::listen refuses them (the provider
  // would report an empty address as its own failure and an empty port as
  // "any port").
  if (!p || addr.empty() || port.empty()) return make_error_code(errc::invalid_argument);
  auto channel = cm_channel::create(p->prov, thread_loop().get_executor());
  if (!channel) return channel.error();
  if (auto ec = channel.value()->set_blocking(true)) return ec;
  const auto token = channel.value()->reserve_token();
  auto state = std::make_unique<endpoint_state>(p, channel.value(), token);
  if (auto ec = state->listen(addr, port)) return ec;
  return access::make<endpoint>(std::move(state));
}

result<conn_req> next_conn_req_now(endpoint_state* ep, const conn_cfg& cfg) {
  if (ep == nullptr) return make_error_code(errc::invalid_argument);
  auto request = ep->next_request_now(cfg);
  if (!request) return request.error();
  return access::make<conn_req>(std::move(request).value());
}

result<connection> connect_now(std::unique_ptr<conn_state> state,
                               std::span<const std::uint8_t> private_data) {
  if (!state) return make_error_code(errc::invalid_argument);
  if (private_data.size() > 255) return make_error_code(errc::invalid_argument);
  // The fds the connection hands out behave as librpma's: blocking. Its
  // completion channels are so as the provider made them (nothing of the C
  // flavour watches them on a loop); the event channel is pinned so.
  if (auto ec = state->cm_events->set_blocking(true)) return ec;
  const auto len = static_cast<std::uint8_t>(private_data.size());
  if (auto ec = state->start_connect(private_data.empty() ? nullptr : private_data.data(), len))
    return ec;  // `state` lets go on the way out; an incoming request is rejected
  return access::make<connection>(std::move(state));
}

result<conn_event> next_event_now(conn_state* state) {
  if (state == nullptr) return make_error_code(errc::invalid_argument);
  auto event = state->cm_events->read_now();
  if (!event) return event.error();
  state->note(event.value());
  const auto mapped = to_conn_event(event.value().type);
  if (mapped == conn_event::undefined) {
    ARPMA_LOG(log_level::warning, "Unexpected event received: %s",
              provider::to_string(event.value().type));
    return make_error_code(errc::unknown);
  }
  ARPMA_LOG(log_level::notice, "%s", to_string(mapped));
  return mapped;
}

int event_fd(const endpoint_state* ep) noexcept { return ep != nullptr ? ep->channel->fd() : -1; }

int event_fd(const conn_state* conn) noexcept {
  return conn != nullptr ? conn->cm_events->fd() : -1;
}

}  // namespace arpma::detail

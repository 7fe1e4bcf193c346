// The passive side: rpma_ep_listen / rpma_ep_next_conn_req as arpma::endpoint.
#include "arpma/endpoint.hpp"

#include "arpma/error.hpp"
#include "core/endpoint_state.hpp"
#include "core/parked_op.hpp"
#include "support/log.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include <cstring>
#include <utility>

namespace arpma {
namespace detail {
namespace {

void keep_first(std::error_code& first, const std::error_code& next) {
  if (!first) first = next;
}

std::error_code gai_error(int rc) {
  if (rc == EAI_SYSTEM) return {errno, std::system_category()};
  if (rc == EAI_MEMORY) return make_error_code(errc::no_memory);
  return std::make_error_code(std::errc::address_not_available);
}

}  // namespace

result<bind_address> passive_address(const std::string& addr, const std::string& port) {
  addrinfo hints{};
  hints.ai_flags = AI_PASSIVE;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(addr.c_str(), port.c_str(), &hints, &found); rc != 0) {
    const auto ec = gai_error(rc);
    ARPMA_LOG(log_level::error, "cannot resolve %s:%s: %s", addr.c_str(), port.c_str(),
              ::gai_strerror(rc));
    return ec;
  }
  bind_address out;
  std::memcpy(&out.storage, found->ai_addr, found->ai_addrlen);
  ::freeaddrinfo(found);
  return out;
}

std::error_code endpoint_state::listen(const std::string& addr, const std::string& port) {
  auto created = prov().create_id(channel->native(), token);
  if (!created) {
    ARPMA_LOG_FAILURE("create id", created.error());
    return created.error();
  }
  id = created.value();
  auto where = passive_address(addr, port);
  if (!where) return where.error();
  if (auto ec = prov().bind_addr(id, where.value().get())) {
    ARPMA_LOG_FAILURE("bind addr", ec);
    return ec;
  }
  if (auto ec = prov().listen(id, 0)) {
    ARPMA_LOG_FAILURE("listen", ec);
    return ec;
  }
  ARPMA_LOG(log_level::notice, "Waiting for incoming connection on %s:%s", addr.c_str(),
            port.c_str());
  return {};
}

std::error_code endpoint_state::destroy() noexcept {
  if (!peer) return {};
  std::error_code first;
  watchers_.gone_all();
  for (auto& request : pending) keep_first(first, request->destroy());
  pending.clear();
  if (channel) channel->detach(token);  // a C endpoint's was never attached: nothing to erase
  if (id != nullptr) {
    const auto ec = prov().destroy_id(id);
    if (ec) ARPMA_LOG_FAILURE("destroy id", ec);
    keep_first(first, ec);
    id = nullptr;
  }
  channel.reset();
  peer.reset();
  return first;
}

std::unique_ptr<conn_state> endpoint_state::take_request(const provider::cm_event& event,
                                                         std::shared_ptr<cm_channel> on) {
  const auto request_token = on->reserve_token();
  auto request = std::make_unique<conn_state>(peer, std::move(on), request_token);
  request->id = event.id;
  request->passive = true;
  request->private_data.assign(event.private_data.begin(),
                               event.private_data.begin() + event.private_data_len);
  return request;
}

void endpoint_state::on_cm_event(const provider::cm_event& event) {
  if (event.type != provider::cm_event_type::connect_request || event.id == id) {
    // A pending request's event read before it had a token of its own
    // (providers that stamp the context when queueing) goes to that request.
    for (auto& request : pending)
      if (request->id == event.id) return request->on_cm_event(event);
    ARPMA_LOG(log_level::warning, "endpoint: %s ignored", provider::to_string(event.type));
    return;
  }
  std::unique_ptr<conn_state> request;
  try {
    request = take_request(event, channel);
    pending.push_back(nullptr);  // may throw: before anything changes hands
  } catch (const std::bad_alloc&) {
    ARPMA_LOG(log_level::error, "no memory for an incoming request: rejected");
    (void)prov().reject(event.id, nullptr, 0);
    (void)prov().destroy_id(event.id);
    return;
  }
  // Its own token at once: no later event of this id reads as the endpoint's.
  prov().set_context(event.id, request->token);
  request->ex = ex;
  request->attach();
  pending.back() = std::move(request);
  watchers_.poke_all();
}

result<std::unique_ptr<conn_state>> endpoint_state::next_request_now(const conn_cfg& cfg) {
  auto event = channel->read_now();
  if (!event) return event.error();
  const auto& ev = event.value();
  if (ev.type != provider::cm_event_type::connect_request) {
    ARPMA_LOG(log_level::error, "Unexpected event received: %s", provider::to_string(ev.type));
    return make_error_code(errc::invalid_argument);
  }
  // The request gets the channel that will be its connection's fd now, so
  // its events never reach the endpoint's fd (librpma moves it only at accept).
  std::unique_ptr<conn_state> request;
  try {
    auto own = cm_channel::create(prov(), channel->executor());
    if (!own) throw std::system_error(own.error());
    request = take_request(ev, std::move(own).value());
  } catch (const std::system_error& e) {
    // The provider's own error (a failed create_event_channel is EIO, EMFILE,
    // ...: RPMA_E_PROVIDER), not no_memory.
    ARPMA_LOG(log_level::error, "cannot take an incoming request: rejected");
    (void)prov().reject(ev.id, nullptr, 0);
    (void)prov().destroy_id(ev.id);
    return e.code();
  } catch (const std::exception&) {
    ARPMA_LOG(log_level::error, "cannot take an incoming request: rejected");
    (void)prov().reject(ev.id, nullptr, 0);
    (void)prov().destroy_id(ev.id);
    return make_error_code(errc::no_memory);
  }
  if (auto ec = request->cm_events->set_blocking(true))
    return ec;  // request rejects on the way out
  if (auto ec = prov().migrate_id(ev.id, request->cm_events->native())) {
    ARPMA_LOG_FAILURE("migrate id", ec);
    return ec;
  }
  prov().set_context(ev.id, request->token);
  if (auto ec = request->build_queues(cfg)) return ec;
  return request;
}

namespace {

class next_conn_req_op final : public parked_op<next_conn_req_op, conn_req>, public conn_watcher {
 public:
  next_conn_req_op(asio::any_io_executor ex, endpoint_state* state, conn_cfg cfg,
                   handler_type handler)
      : parked_op(std::move(ex), std::move(handler)), state_(state), cfg_(std::move(cfg)) {}

  void start() {
    constexpr auto all = asio::cancellation_type::terminal | asio::cancellation_type::partial |
                         asio::cancellation_type::total;
    park(all);
    hold(state_->channel);
    state_->watch(shared_from_this());
    poke();
  }

  void poke() override {
    asio::post(executor(), [self = shared_from_this()] { self->take(); });
  }
  void gone() override {
    state_ = nullptr;
    complete(aborted(), conn_req());
  }
  void cancelled() {
    if (state_ != nullptr) state_->unwatch(this);
    complete(aborted(), conn_req());
  }

 private:
  void take() {
    if (done() || state_ == nullptr || state_->pending.empty()) return;
    auto request = std::move(state_->pending.front());
    state_->pending.pop_front();
    state_->unwatch(this);
    if (auto ec = request->build_queues(cfg_)) return complete(ec, conn_req());
    complete({}, access::make<conn_req>(std::move(request)));
  }

  endpoint_state* state_;
  conn_cfg cfg_;
};

}  // namespace

void start_next_conn_req(endpoint_state* state, conn_cfg cfg, conn_req_handler handler) {
  if (state == nullptr) {
    return fail_at_once(std::move(handler), make_error_code(errc::invalid_argument), conn_req());
  }
  std::make_shared<next_conn_req_op>(state->ex, state, std::move(cfg), std::move(handler))->start();
}

}  // namespace detail

result<endpoint> endpoint::listen(const asio::any_io_executor& ex, const peer& p,
                                  std::string_view addr, std::string_view port) {
  if (!detail::access::state(p) || addr.empty() || port.empty() || !detail::runs_operations(ex))
    return make_error_code(errc::invalid_argument);
  auto channel = detail::loop_cm_channel(detail::access::state(p)->prov, ex);
  if (!channel) return channel.error();
  const auto token = channel.value()->reserve_token();
  auto state =
      std::make_unique<detail::endpoint_state>(detail::access::state(p), channel.value(), token);
  state->ex = ex;
  if (auto ec = state->listen(std::string(addr), std::string(port))) return ec;
  state->channel->attach(state->token, state.get(), state->ex);
  return endpoint(std::move(state));
}

endpoint::endpoint() noexcept = default;
endpoint::endpoint(std::unique_ptr<detail::endpoint_state> state) noexcept
    : state_(std::move(state)) {}
endpoint::endpoint(endpoint&&) noexcept = default;
endpoint& endpoint::operator=(endpoint&&) noexcept = default;
endpoint::~endpoint() = default;

asio::any_io_executor detail::executor_of(const detail::endpoint_state* state) noexcept {
  return state != nullptr ? state->ex : asio::any_io_executor();
}

endpoint::executor_type endpoint::get_executor() const noexcept {
  return state_ ? state_->ex : executor_type();
}

std::uint16_t endpoint::port() const noexcept {
  return state_ && state_->id != nullptr ? state_->prov().local_port(state_->id) : 0;
}

std::error_code endpoint::shutdown() noexcept {
  if (!state_) return {};
  const auto ec = state_->destroy();
  state_.reset();
  return ec;
}

}  // namespace arpma

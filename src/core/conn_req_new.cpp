// The seed: rpma_conn_req_new as a composed asynchronous operation.
#include "arpma/conn_req.hpp"
#include "arpma/error.hpp"
#include "core/asio.hpp"
#include "core/cm_channel.hpp"
#include "core/conn_state.hpp"
#include "core/error_internal.hpp"
#include "core/parked_op.hpp"
#include "core/sync_wait.hpp"
#include "support/log.hpp"

#include <charconv>
#include <optional>

namespace arpma {
namespace detail {
namespace {

using tcp = asio::ip::tcp;

std::error_code event_error(const provider::cm_event& ev, int fallback) {
  const int status = ev.status < 0 ? -ev.status : ev.status;
  return {status != 0 ? status : fallback, std::system_category()};
}

std::optional<tcp::endpoint> numeric_endpoint(const std::string& addr, const std::string& port) {
  std::uint16_t number = 0;
  const char* end = port.data() + port.size();
  const auto [ptr, ec] = std::from_chars(port.data(), end, number);
  if (ec != std::errc{} || ptr != end) return std::nullopt;
  boost::system::error_code parse_error;
  const auto ip = asio::ip::make_address(addr, parse_error);
  if (parse_error) return std::nullopt;
  return tcp::endpoint(ip, number);
}

// Lifetime: a parked operation (owned by itself while it runs, linked into
// its io_context's arpma service), so a destroyed io_context destroys it, and
// with it every resource and the handler, without calling anything. Asio's
// own waits (name resolution, the deadline) hold it weakly.
class conn_req_new_op final : public cm_event_sink, public parked_op<conn_req_new_op, conn_req> {
 public:
  enum class stage { starting, name, addr, route, done };

  conn_req_new_op(asio::any_io_executor ex, std::shared_ptr<peer_state> peer, std::string addr,
                  std::string port, conn_cfg cfg, channel_mode mode, conn_req_handler handler)
      : parked_op(std::move(ex), std::move(handler)),
        peer_(std::move(peer)),
        addr_(std::move(addr)),
        port_(std::move(port)),
        cfg_(std::move(cfg)),
        mode_(mode) {}

  conn_req_new_op(const conn_req_new_op&) = delete;
  conn_req_new_op& operator=(const conn_req_new_op&) = delete;

  // Destroyed mid-flight (io_context gone): req_'s teardown detaches the id.
  ~conn_req_new_op() = default;

  void start() {
    park(asio::cancellation_type::terminal | asio::cancellation_type::partial);
    // Everything runs from the loop, never inside the initiating function.
    asio::post(executor(), [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->begin();
    });
  }

  void cancelled() { finish(aborted()); }

  void on_cm_event(const provider::cm_event& ev) override {
    switch (stage_) {
      case stage::addr:
        if (ev.type == provider::cm_event_type::addr_resolved) return resolve_route();
        if (ev.type == provider::cm_event_type::addr_error) {
          const auto ec = event_error(ev, EHOSTUNREACH);
          ARPMA_LOG_FAILURE("address resolution (ADDR_ERROR)", ec);
          return finish(ec);
        }
        break;
      case stage::route:
        if (ev.type == provider::cm_event_type::route_resolved) return build_queues();
        if (ev.type == provider::cm_event_type::route_error) {
          const auto ec = event_error(ev, ENETUNREACH);
          ARPMA_LOG_FAILURE("route resolution (ROUTE_ERROR)", ec);
          return finish(ec);
        }
        break;
      default: break;
    }
    ARPMA_LOG(log_level::error, "unexpected %s while resolving %s:%s", provider::to_string(ev.type),
              addr_.c_str(), port_.c_str());
    finish(std::make_error_code(std::errc::protocol_error));
  }

 private:
  provider::provider& prov() const noexcept { return peer_->prov; }

  // Asio reports resource exhaustion (no fd, no memory) by throwing; here it
  // becomes the operation's error instead of escaping from io_context::run.
  void begin() {
    try {
      begin_steps();
    } catch (const std::system_error& e) {
      finish(e.code());
    } catch (const std::bad_alloc&) {
      finish(make_error_code(errc::no_memory));
    }
  }

  void begin_steps() {
    if (stage_ != stage::starting) return;
    if (peer_ == nullptr || peer_->pd == nullptr || addr_.empty() || port_.empty() ||
        cfg_.timeout.count() < 0)
      return finish(make_error_code(errc::invalid_argument));
    const auto& ex = executor();
    auto channel = mode_ == channel_mode::shared ? loop_cm_channel(prov(), ex)
                                                 : cm_channel::create(prov(), ex);
    if (!channel) return finish(channel.error());
    auto& ch = *channel.value();
    req_ = std::make_unique<conn_state>(peer_, channel.value(), ch.reserve_token());
    req_->ex = ex;
    auto id = prov().create_id(ch.native(), req_->token);
    if (!id) {
      ARPMA_LOG_FAILURE("create id", id.error());
      return finish(id.error());
    }
    req_->id = id.value();
    ch.attach(req_->token, this, ex);
    hold(channel.value());
    arm_deadline();
    if (auto endpoint = numeric_endpoint(addr_, port_)) return resolve_addr(*endpoint);
    stage_ = stage::name;
    resolver_.emplace(ex);
    resolver_->async_resolve(
        addr_, port_,
        [weak = weak_from_this()](const std::error_code& ec, const tcp::resolver::results_type& r) {
          if (auto self = weak.lock()) self->on_name_resolved(ec, r);
        });
  }

  void on_name_resolved(const std::error_code& ec, const tcp::resolver::results_type& results) {
    if (stage_ != stage::name) return;
    if (ec) {
      ARPMA_LOG_FAILURE("name resolution", ec);
      return finish(ec);
    }
    resolve_addr(results.begin()->endpoint());
  }

  void resolve_addr(const tcp::endpoint& endpoint) {
    stage_ = stage::addr;
    if (auto ec = prov().resolve_addr(req_->id, endpoint.data(), timeout_ms())) {
      ARPMA_LOG_FAILURE("resolve addr", ec);
      return finish(ec);
    }
  }

  void resolve_route() {
    stage_ = stage::route;
    arm_deadline();
    if (auto ec = prov().resolve_route(req_->id, timeout_ms())) {
      ARPMA_LOG_FAILURE("resolve route", ec);
      return finish(ec);
    }
  }

  void build_queues() {
    if (auto ec = req_->build_queues(cfg_)) return finish(ec);
    ARPMA_LOG(log_level::notice, "Requesting a connection to %s:%s", addr_.c_str(), port_.c_str());
    finish({});
  }

  int timeout_ms() const noexcept { return static_cast<int>(cfg_.timeout.count()); }

  // Only with a timeout: a timer is never what keeps the operation alive.
  void arm_deadline() {
    if (cfg_.timeout.count() <= 0) return;
    if (!timer_) timer_.emplace(executor());
    timer_->expires_after(cfg_.timeout);
    timer_->async_wait([weak = weak_from_this()](const std::error_code& ec) {
      auto self = weak.lock();
      if (!ec && self && self->stage_ != stage::done) {
        ARPMA_LOG(log_level::error, "resolving %s:%s timed out after %lld ms", self->addr_.c_str(),
                  self->port_.c_str(), static_cast<long long>(self->cfg_.timeout.count()));
        self->finish(std::make_error_code(std::errc::timed_out));
      }
    });
  }

  void finish(const std::error_code& ec) {
    if (stage_ == stage::done) return;
    stage_ = stage::done;
    if (timer_) timer_->cancel();
    if (resolver_) resolver_->cancel();
    conn_req result;
    if (req_) {
      if (req_->cm_events) req_->cm_events->detach(req_->token);
      if (ec) {
        req_.reset();  // reverse-order teardown
      } else {
        // The flavour is chosen here: a request made on a loop (the shared
        // channel) is the C++ flavour, its events queued for async_connect and
        // get_executor() that loop; the blocking call's (a channel of its own,
        // the C API's fd) keeps the blocking flavour until connected.
        if (mode_ == channel_mode::shared) req_->attach();
        result = access::make<conn_req>(std::move(req_));
      }
    }
    // Posted: never run inside the channel drain that delivered the event.
    complete(ec, std::move(result));
  }

  std::shared_ptr<peer_state> peer_;
  std::string addr_;
  std::string port_;
  conn_cfg cfg_;
  channel_mode mode_;
  std::optional<asio::steady_timer> timer_;
  std::optional<tcp::resolver> resolver_;
  std::unique_ptr<conn_state> req_;
  stage stage_ = stage::starting;
};

}  // namespace

void start_conn_req_new(asio::any_io_executor ex, std::shared_ptr<peer_state> peer,
                        std::string addr, std::string port, conn_cfg cfg, channel_mode mode,
                        conn_req_handler handler) {
  if (!runs_operations(ex))
    return fail_at_once(std::move(handler), make_error_code(errc::invalid_argument), conn_req{});
  std::make_shared<conn_req_new_op>(std::move(ex), std::move(peer), std::move(addr),
                                    std::move(port), std::move(cfg), mode, std::move(handler))
      ->start();
}

}  // namespace detail

result<conn_req> conn_req_new(const peer& p, std::string_view addr, std::string_view port,
                              const conn_cfg& cfg) {
  return detail::sync_wait<conn_req>([&](const asio::any_io_executor& ex, auto handler) {
    detail::start_conn_req_new(ex, detail::access::state(p), std::string(addr), std::string(port),
                               cfg, detail::channel_mode::dedicated, std::move(handler));
  });
}

}  // namespace arpma

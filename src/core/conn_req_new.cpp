// The seed: rpma_conn_req_new as a composed asynchronous operation.
#include "arpma/conn_req.hpp"
#include "arpma/error.hpp"
#include "core/asio.hpp"
#include "core/cm_channel.hpp"
#include "core/conn_state.hpp"
#include "core/direct_calls.hpp"
#include "core/error_internal.hpp"
#include "core/parked_op.hpp"
#include "core/thread_loop.hpp"
#include "support/log.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdint>
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

/// One resolution step: the event that ends it, the one that fails it and the
/// errno that failure means when its status carries none.
struct resolve_step {
  provider::cm_event_type ok;
  provider::cm_event_type failed;
  int fallback;
  const char* what;
};
constexpr resolve_step addr_step{provider::cm_event_type::addr_resolved,
                                 provider::cm_event_type::addr_error, EHOSTUNREACH,
                                 "address resolution (ADDR_ERROR)"};
constexpr resolve_step route_step{provider::cm_event_type::route_resolved,
                                  provider::cm_event_type::route_error, ENETUNREACH,
                                  "route resolution (ROUTE_ERROR)"};

/// How `ev` ends `step`: success ({}), its failure (logged), or nullopt for
/// an event the step does not expect. Both paths (async and blocking) judge here.
std::optional<std::error_code> judge(const resolve_step& step, const provider::cm_event& ev) {
  if (ev.type == step.ok) return std::error_code{};
  if (ev.type != step.failed) return std::nullopt;
  const auto ec = event_error(ev, step.fallback);
  ARPMA_LOG_FAILURE(step.what, ec);
  return ec;
}

// Lifetime: a parked operation (owned by itself while it runs, linked into
// its io_context's arpma service), so a destroyed io_context destroys it, and
// with it every resource and the handler, without calling anything. Asio's
// own waits (name resolution, the deadline) hold it weakly.
class conn_req_new_op final : public cm_event_sink, public parked_op<conn_req_new_op, conn_req> {
 public:
  enum class stage { starting, name, addr, route, done };

  conn_req_new_op(asio::any_io_executor ex, std::shared_ptr<peer_state> peer, std::string addr,
                  std::string port, conn_cfg cfg, conn_req_handler handler)
      : parked_op(std::move(ex), std::move(handler)),
        peer_(std::move(peer)),
        addr_(std::move(addr)),
        port_(std::move(port)),
        cfg_(std::move(cfg)) {}

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
    const bool addr = stage_ == stage::addr;
    if (addr || stage_ == stage::route) {
      if (const auto verdict = judge(addr ? addr_step : route_step, ev)) {
        if (*verdict) return finish(*verdict);
        return addr ? resolve_route() : build_queues();
      }
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
    auto channel = loop_cm_channel(prov(), ex);
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
      if (!ec && self && self->stage_ != stage::done) self->on_deadline();
    });
  }

  // A loop that runs late (a busy or descheduled machine) sees the deadline
  // and the phase's event together, and may take the deadline first: the
  // event then waits unread in the channel or behind this handler. librpma,
  // trusting the kernel's timeout alone, succeeds there; so does this: what
  // has arrived by now is read and delivered first, and the phase fails only
  // if it is still where it was (CI's Soft-iWARP guest, frozen past 1 s).
  void on_deadline() {
    const auto phase = stage_;
    const auto channel = req_->cm_events;  // alive while it delivers
    channel->drain();
    if (stage_ != phase) return;
    asio::post(executor(), [weak = weak_from_this(), phase] {
      auto self = weak.lock();
      if (!self || self->stage_ != phase) return;
      ARPMA_LOG(log_level::error, "resolving %s:%s timed out after %lld ms", self->addr_.c_str(),
                self->port_.c_str(), static_cast<long long>(self->cfg_.timeout.count()));
      self->finish(std::make_error_code(std::errc::timed_out));
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
        // A request made on a loop (the shared channel) is the C++ flavour,
        // its events queued for async_connect and get_executor() that loop;
        // conn_req_new_now's (a channel of its own, the C API's fd) keeps the
        // blocking flavour until connected.
        req_->attach();
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
  std::optional<asio::steady_timer> timer_;
  std::optional<tcp::resolver> resolver_;
  std::unique_ptr<conn_state> req_;
  stage stage_ = stage::starting;
};

}  // namespace

void start_conn_req_new(asio::any_io_executor ex, std::shared_ptr<peer_state> peer,
                        std::string addr, std::string port, conn_cfg cfg,
                        conn_req_handler handler) {
  if (!runs_operations(ex))
    return fail_at_once(std::move(handler), make_error_code(errc::invalid_argument), conn_req{});
  std::make_shared<conn_req_new_op>(std::move(ex), std::move(peer), std::move(addr),
                                    std::move(port), std::move(cfg), std::move(handler))
      ->start();
}

namespace {

using deadline = std::optional<std::chrono::steady_clock::time_point>;

/// The next event of the request's own channel, waited for in poll(2) (the
/// fd is the request's alone, so nothing else needs the loop meanwhile).
result<provider::cm_event> next_event_before(cm_channel& ch, const deadline& until) {
  for (;;) {
    int wait_ms = -1;
    if (until) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(*until - std::chrono::steady_clock::now());
      // Past the deadline, one last look: an event that came while this
      // thread was not running still counts (as in the asynchronous path).
      wait_ms = static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, INT_MAX));
    }
    pollfd pfd{ch.fd(), POLLIN, 0};
    const int n = ::poll(&pfd, 1, wait_ms);
    if (n < 0 && errno != EINTR) return std::error_code(errno, std::system_category());
    if (n == 0 && wait_ms == 0) return std::make_error_code(std::errc::timed_out);
    if (n <= 0) continue;
    auto event = ch.read_now();
    if (event || event.error() != errc::no_event) return event;
  }
}

/// Waits for the event that ends `step`, judged as the asynchronous
/// operation judges it.
std::error_code await_step(cm_channel& ch, const deadline& until, const resolve_step& step) {
  auto ev = next_event_before(ch, until);
  if (!ev) return ev.error();
  if (const auto verdict = judge(step, ev.value())) return *verdict;
  ARPMA_LOG(log_level::error, "unexpected %s during %s", provider::to_string(ev.value().type),
            step.what);
  return std::make_error_code(std::errc::protocol_error);
}

result<tcp::endpoint> endpoint_of(const std::string& addr, const std::string& port) {
  if (auto numeric = numeric_endpoint(addr, port)) return *numeric;
  tcp::resolver resolver(thread_loop());
  boost::system::error_code ec;
  const auto results = resolver.resolve(addr, port, ec);
  if (ec || results.empty()) {
    const std::error_code err = ec ? std::error_code(ec) : make_error_code(errc::unknown);
    ARPMA_LOG_FAILURE("name resolution", err);
    return err;
  }
  return results.begin()->endpoint();
}

/// Resolves the address and the route of `req`'s id, as the asynchronous
/// operation does, within `cfg.timeout` for both.
std::error_code resolve_now(conn_state& req, const tcp::endpoint& endpoint, const conn_cfg& cfg,
                            const std::string& addr, const std::string& port) {
  auto& prov = req.prov();
  const int timeout_ms = static_cast<int>(cfg.timeout.count());
  deadline until;
  if (cfg.timeout.count() > 0) until = std::chrono::steady_clock::now() + cfg.timeout;
  auto& ch = *req.cm_events;
  std::error_code ec = prov.resolve_addr(req.id, endpoint.data(), timeout_ms);
  if (ec) ARPMA_LOG_FAILURE("resolve addr", ec);
  if (!ec) ec = await_step(ch, until, addr_step);
  if (!ec && until) until = std::chrono::steady_clock::now() + cfg.timeout;
  if (!ec && (ec = prov.resolve_route(req.id, timeout_ms))) ARPMA_LOG_FAILURE("resolve route", ec);
  if (!ec) ec = await_step(ch, until, route_step);
  if (ec == std::errc::timed_out)
    ARPMA_LOG(log_level::error, "resolving %s:%s timed out after %lld ms", addr.c_str(),
              port.c_str(), static_cast<long long>(cfg.timeout.count()));
  return ec;
}

}  // namespace

result<conn_req> conn_req_new_now(const std::shared_ptr<peer_state>& peer, const std::string& addr,
                                  const std::string& port, const conn_cfg& cfg) {
  if (peer == nullptr || peer->pd == nullptr || addr.empty() || port.empty() ||
      cfg.timeout.count() < 0)
    return make_error_code(errc::invalid_argument);
  auto endpoint = endpoint_of(addr, port);
  if (!endpoint) return endpoint.error();
  const auto& ex = thread_loop().get_executor();
  auto channel = cm_channel::create(peer->prov, ex);
  if (!channel) return channel.error();
  auto req = std::make_unique<conn_state>(peer, channel.value(), channel.value()->reserve_token());
  req->ex = ex;
  auto id = peer->prov.create_id(channel.value()->native(), req->token);
  if (!id) {
    ARPMA_LOG_FAILURE("create id", id.error());
    return id.error();
  }
  req->id = id.value();
  if (auto ec = resolve_now(*req, endpoint.value(), cfg, addr, port)) return ec;
  if (auto ec = req->build_queues(cfg)) return ec;
  ARPMA_LOG(log_level::notice, "Requesting a connection to %s:%s", addr.c_str(), port.c_str());
  return access::make<conn_req>(std::move(req));
}

}  // namespace detail

result<conn_req> conn_req_new(const peer& p, std::string_view addr, std::string_view port,
                              const conn_cfg& cfg) {
  return detail::conn_req_new_now(detail::access::state(p), std::string(addr), std::string(port),
                                  cfg);
}

}  // namespace arpma

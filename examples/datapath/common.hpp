// What the C++ data-path examples share, on top of the connection examples'
// common.hpp (arguments, the 10 s deadline): making the peer, connecting
// with retries, accepting with the server's region descriptor as private
// data, closing, one bounded data-path step, and a receive posted now and
// awaited later.
#pragma once

#include "../connection/common.hpp"

#include <arpma/buffer.hpp>
#include <arpma/conn_req.hpp>
#include <arpma/connection.hpp>
#include <arpma/endpoint.hpp>
#include <arpma/error.hpp>
#include <arpma/mr.hpp>
#include <arpma/peer.hpp>
#include <arpma/srq.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace example {

namespace asio = boost::asio;

inline constexpr auto awaitable_tuple = asio::as_tuple(asio::use_awaitable);

// The peer for `addr` (local: the server's address; remote: the client's
// way to it); empty after printing why not.
inline std::optional<arpma::peer> make_peer(const char* who, const std::string& addr,
                                            arpma::ibv_context_type type) {
  auto device = arpma::get_ibv_context(addr, type);
  if (!device) {
    std::printf("%s: no RDMA device for %s: %s\n", who, addr.c_str(),
                device.error().message().c_str());
    return std::nullopt;
  }
  auto peer = arpma::peer::create(device.value());
  if (!peer) {
    std::printf("%s: cannot create the peer: %s\n", who, peer.error().message().c_str());
    return std::nullopt;
  }
  return std::move(peer.value());
}

// Listens on a.addr:a.port; empty after printing why not ("cannot listen"
// tells run-pair.sh to try another port).
inline std::optional<arpma::endpoint> listen(const char* who, asio::io_context& io,
                                             const arpma::peer& peer, const args& a) {
  auto ep = arpma::endpoint::listen(io.get_executor(), peer, a.addr, a.port);
  if (!ep) {
    std::printf("%s: cannot listen on %s:%s: %s\n", who, a.addr.c_str(), a.port.c_str(),
                ep.error().message().c_str());
    return std::nullopt;
  }
  std::printf("%s: listening on %s:%u\n", who, a.addr.c_str(), unsigned{ep.value().port()});
  return std::move(ep.value());
}

// Runs `body` on the loop until nothing is left to do; prints "done" or
// "FAILED" and returns the exit status.
inline int run(const char* who, asio::io_context& io, asio::awaitable<bool> body) {
  bool ok = false;
  asio::co_spawn(io, std::move(body), [&](const std::exception_ptr& e, bool result) {
    try {
      if (e) std::rethrow_exception(e);
      ok = result;
    } catch (const std::exception& x) {
      std::printf("%s: %s\n", who, x.what());
    }
  });
  io.run();
  std::printf("%s: %s\n", who, ok ? "done" : "FAILED");
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}

// Registers [ptr, +size) for `usage`; empty after printing why not.
inline arpma::local_mr reg(const char* who, const arpma::peer& peer, void* ptr, std::size_t size,
                           int usage) {
  auto mr = arpma::local_mr::reg(peer, ptr, size, usage);
  if (!mr) {
    std::printf("%s: registering %zu bytes failed: %s\n", who, size, mr.error().message().c_str());
    return {};
  }
  return std::move(mr.value());
}

inline void report(const char* who, const char* step, std::error_code ec, const deadline& dl) {
  if (dl.expired())
    std::printf("%s: %s: nothing heard for %lld ms, giving up\n", who, step,
                static_cast<long long>(example::quiet_limit.count()));
  else
    std::printf("%s: %s failed: %s\n", who, step, ec.message().c_str());
}

// One data-path operation, bounded by the deadline: `start(token)` starts it
// (e.g. conn.async_write(..., token)). The completion, or empty after
// printing what went wrong.
template <class Start>
asio::awaitable<std::optional<arpma::completion>> step(const char* who, const char* what,
                                                       deadline& dl, Start start) {
  auto [ec, done] = co_await start(dl.arm(quiet_limit, awaitable_tuple));
  dl.disarm();
  if (ec) {
    report(who, what, ec, dl);
    co_return std::nullopt;
  }
  co_return done;
}

// The client's connection to the server at a.addr:a.port, retrying for up to
// 5 s while the server is not listening yet; empty after printing why not.
inline asio::awaitable<arpma::connection> connect(const char* who, const arpma::peer& peer,
                                                  const args& a, const arpma::conn_cfg& cfg = {}) {
  const auto ex = co_await asio::this_coro::executor;
  deadline dl(ex);
  asio::steady_timer pause(ex);
  const auto give_up = std::chrono::steady_clock::now() + retry_limit;
  for (int attempt = 1;; ++attempt) {
    auto [req_ec, req] = co_await arpma::async_conn_req_new(peer, a.addr, a.port, cfg,
                                                            dl.arm(quiet_limit, awaitable_tuple));
    dl.disarm();
    if (req_ec) {
      report(who, "creating the connection request", req_ec, dl);
      co_return arpma::connection{};
    }
    auto [ec, conn] = co_await req.async_connect({}, dl.arm(quiet_limit, awaitable_tuple));
    dl.disarm();
    if (!ec) co_return std::move(conn);
    if (!not_listening_yet(ec) || std::chrono::steady_clock::now() > give_up) {
      report(who, "connecting", ec, dl);
      co_return arpma::connection{};
    }
    pause.expires_after(retry_pause);
    co_await pause.async_wait(awaitable_tuple);
  }
}

// The server's region as the client decodes it from the accept's private
// data (librpma's 21-byte descriptor); empty after printing why not.
inline std::optional<arpma::remote_mr> server_region(const char* who,
                                                     const arpma::connection& conn) {
  auto remote = arpma::remote_mr::from_descriptor(conn.private_data());
  if (!remote) {
    std::printf("%s: the server's private data is no region descriptor: %s\n", who,
                remote.error().message().c_str());
    return std::nullopt;
  }
  std::printf("%s: the server's region: %llu bytes\n", who,
              static_cast<unsigned long long>(remote.value().size()));
  return remote.value();
}

// Accepts a request with `pdata` (the server's descriptor, and more) as the
// accept's private data; empty after printing why not.
inline asio::awaitable<arpma::connection> accept(const char* who, arpma::conn_req req,
                                                 std::span<const std::uint8_t> pdata) {
  deadline dl(co_await asio::this_coro::executor);
  auto [ec, conn] = co_await req.async_connect(pdata, dl.arm(quiet_limit, awaitable_tuple));
  dl.disarm();
  if (ec) {
    report(who, "accepting", ec, dl);
    co_return arpma::connection{};
  }
  std::printf("%s: connection established%s\n", who,
              pdata.empty() ? "" : ", region descriptor sent in the private data");
  co_return std::move(conn);
}

// The next request on the endpoint (its connection shaped by `cfg`),
// accepted with `pdata`; empty after printing why not.
inline asio::awaitable<arpma::connection> accept_next(const char* who, arpma::endpoint& ep,
                                                      std::span<const std::uint8_t> pdata,
                                                      const arpma::conn_cfg& cfg = {}) {
  deadline dl(co_await asio::this_coro::executor);
  auto [ec, req] = co_await ep.async_next_conn_req(cfg, dl.arm(quiet_limit, awaitable_tuple));
  dl.disarm();
  if (ec) {
    report(who, "waiting for a connection request", ec, dl);
    co_return arpma::connection{};
  }
  co_return co_await accept(who, std::move(req), pdata);
}

// Waits for the other side ("client" or "server") to disconnect, then
// closes too.
inline asio::awaitable<bool> wait_closed(const char* who, arpma::connection& conn,
                                         const char* other = "client") {
  deadline dl(co_await asio::this_coro::executor);
  auto [ec, event] = co_await conn.async_next_event(dl.arm(quiet_limit, awaitable_tuple));
  dl.disarm();
  if (ec) {
    const std::string step = std::string("waiting for the ") + other + " to disconnect";
    report(who, step.c_str(), ec, dl);
    co_return false;
  }
  if (event != arpma::conn_event::closed) {
    std::printf("%s: unexpected connection event: %s\n", who, arpma::to_string(event));
    co_return false;
  }
  auto [close_ec] = co_await conn.async_disconnect(dl.arm(quiet_limit, awaitable_tuple));
  dl.disarm();
  if (close_ec) {
    report(who, "disconnecting", close_ec, dl);
    co_return false;
  }
  std::printf("%s: %s disconnected, connection closed\n", who, other);
  co_return true;
}

// Disconnects and waits until the connection is closed.
inline asio::awaitable<bool> disconnect(const char* who, arpma::connection& conn) {
  deadline dl(co_await asio::this_coro::executor);
  auto [ec] = co_await conn.async_disconnect(dl.arm(quiet_limit, awaitable_tuple));
  dl.disarm();
  if (ec) {
    report(who, "disconnecting", ec, dl);
    co_return false;
  }
  std::printf("%s: disconnected, connection closed\n", who);
  co_return true;
}

// A receive posted now and awaited later. With asio::use_awaitable an
// operation starts only when awaited, but a receive must be posted before
// the peer sends: post() starts it at once with a plain handler, wait()
// awaits its completion, bounded. The state is shared with the handler, so
// a receive that the closing connection completes later finds it alive.
class posted_recv {
 public:
  explicit posted_recv(asio::any_io_executor ex) : ex_(std::move(ex)) {}

  // Posts a receive into [offset, +len) of mr on `queue` (a connection, or
  // an SRQ with a receive CQ); one at a time: wait() for it before the next
  // post().
  template <class Queue>
  void post(Queue& queue, const arpma::local_mr& mr, std::size_t offset, std::size_t len) {
    state_ = std::make_shared<state>(ex_);
    queue.async_recv(arpma::buffer(mr, offset, len).value(),
                     [s = state_](std::error_code ec, arpma::completion c) {
                       s->got.emplace(ec, c);
                       s->wake.cancel();
                     });
  }

  // The receive's completion, or empty after printing why not.
  asio::awaitable<std::optional<arpma::completion>> wait(const char* who, const char* what) {
    const std::shared_ptr<state> s = state_;
    if (!s->got) {
      s->wake.expires_after(quiet_limit);
      co_await s->wake.async_wait(awaitable_tuple);
    }
    if (!s->got) {
      std::printf("%s: %s: nothing heard for %lld ms, giving up\n", who, what,
                  static_cast<long long>(example::quiet_limit.count()));
      co_return std::nullopt;
    }
    if (s->got->first) {
      std::printf("%s: %s failed: %s\n", who, what, s->got->first.message().c_str());
      co_return std::nullopt;
    }
    co_return s->got->second;
  }

 private:
  struct state {
    explicit state(const asio::any_io_executor& ex) : wake(ex) {}
    std::optional<std::pair<std::error_code, arpma::completion>> got;
    asio::steady_timer wake;
  };
  asio::any_io_executor ex_;
  std::shared_ptr<state> state_;
};

// Text in [p, p + max): up to the first NUL.
inline std::string text_at(const void* p, std::size_t max) {
  const std::string_view v(static_cast<const char*>(p), max);
  return std::string(v.substr(0, v.find('\0')));
}

}  // namespace example

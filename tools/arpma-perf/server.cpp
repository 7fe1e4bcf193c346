#include "server.hpp"

#include "protocol.hpp"
#include "setup.hpp"

#include <arpma/conn_req.hpp>
#include <arpma/connection.hpp>
#include <arpma/endpoint.hpp>
#include <arpma/mr.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/this_coro.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>

namespace arpma_perf {
namespace {

// Receives per connection and operation in flight at the client. One each would do for send
// lat (a message's receive is posted again before its echo leaves); a bw client's next send
// may come before the handler of its previous one ran.
constexpr std::uint32_t receives_per_op = 2;

// The queues of every accepted connection: its configuration is fixed before the request's
// private data says what the client will do.
arpma::conn_cfg server_cfg() {
  arpma::conn_cfg cfg;
  cfg.sq_size = receives_per_op * max_queue_depth;  // echoes: one per receiver at most
  cfg.rq_size = receives_per_op * max_queue_depth;
  cfg.cq_size = cfg.sq_size + cfg.rq_size;
  return cfg;
}

class server {
 public:
  server(asio::io_context& io, const arpma::peer& peer, const options& o, arpma::endpoint ep,
         const arpma::local_mr& region)
      : io_(io),
        peer_(peer),
        opts_(o),
        ep_(std::move(ep)),
        region_(region.descriptor()),
        signals_(io, SIGINT, SIGTERM) {}

  asio::awaitable<void> run();
  [[nodiscard]] bool failed() const { return failed_; }
  /// After run() threw: stops serving and waiting for signals, so the loop can end.
  void abandon() {
    stop();
    signals_.cancel();
  }

 private:
  void wait_signal();
  asio::awaitable<void> serve(arpma::conn_req req, hello h);
  asio::awaitable<void> serve_connection(arpma::connection& conn, const hello& h);
  void connection_done(const hello& h);
  void stop();
  void finish_if_idle();

  asio::io_context& io_;
  const arpma::peer& peer_;
  const options& opts_;
  arpma::endpoint ep_;
  arpma::mr_descriptor region_;
  asio::signal_set signals_;
  struct run_state {
    std::uint32_t accepted = 0;
    std::uint32_t done = 0;
  };
  std::map<std::uint64_t, run_state> runs_;
  std::set<arpma::connection*> live_;
  std::size_t serving_ = 0;
  std::uint32_t runs_done_ = 0;
  bool accepting_ = true;
  bool stopping_ = false;
  bool failed_ = false;
};

void server::wait_signal() {
  signals_.async_wait([this](std::error_code ec, int n) {
    if (ec) return;                      // the server ended
    if (stopping_) std::_Exit(exit_ok);  // a second signal: do not wait for the clients
    std::printf("arpma-perf server: %s, stopping\n", n == SIGINT ? "SIGINT" : "SIGTERM");
    stop();
    wait_signal();
  });
}

void server::stop() {
  stopping_ = true;
  (void)ep_.shutdown();  // ends the wait for the next request
  for (arpma::connection* c : live_) (void)c->disconnect();
  finish_if_idle();
}

void server::finish_if_idle() {
  if (!accepting_ && serving_ == 0) signals_.cancel();
}

asio::awaitable<void> server::run() {
  wait_signal();
  const arpma::conn_cfg cfg = server_cfg();
  while (!stopping_) {
    auto [ec, req] = co_await ep_.async_next_conn_req(cfg, awaitable_tuple);
    if (ec) {
      if (!stopping_) {
        std::fprintf(stderr, "arpma-perf server: waiting for a client: %s\n", ec.message().c_str());
        failed_ = true;
      }
      break;
    }
    const auto h = decode(req.private_data());
    if (!h) {
      std::printf("arpma-perf server: rejected a request that is not arpma-perf's\n");
      (void)req.reject();
      continue;
    }
    ++serving_;
    asio::co_spawn(io_, serve(std::move(req), *h), asio::detached);
  }
  accepting_ = false;
  if (!stopping_) stop();
  finish_if_idle();
}

// One connection: accepted with the region's descriptor, then served until it closes.
asio::awaitable<void> server::serve(arpma::conn_req req, hello h) {
  run_state& run = runs_[h.run_id];
  if (run.accepted++ == 0)
    std::printf("arpma-perf server: run from a client: %s %s, %u connection(s), qd %u\n",
                std::string(to_string(h.op)).c_str(), std::string(to_string(h.test)).c_str(),
                h.conns, h.qd);
  deadline dl(co_await asio::this_coro::executor);
  auto [ec, conn] = co_await req.async_connect(region_, dl.arm(quiet_limit));
  dl.disarm();
  if (ec) {
    std::fprintf(stderr, "arpma-perf server: accepting: %s\n", ec.message().c_str());
  } else {
    live_.insert(&conn);
    if (stopping_) (void)conn.disconnect();
    co_await serve_connection(conn, h);
    live_.erase(&conn);
  }
  connection_done(h);
  --serving_;
  finish_if_idle();
}

// A send test's receives on one connection, each posted again as soon as its message is in,
// before the echo (send lat) leaves: the client's next message always finds one (RC with an
// empty receive queue answers RNR, and rdma_cm's QPs make the sender wait 655 ms then). The
// echoes' completions are off the critical path, as in perftest's ib_send_lat. Callbacks, not
// coroutines: nothing is allocated per message.
class receivers {
 public:
  receivers(arpma::connection& conn, const arpma::local_mr& mr, std::size_t max, bool echo,
            asio::steady_timer& wake)
      : conn_(conn), mr_(mr), max_(max), echo_(echo), wake_(wake) {}
  void start(std::uint32_t count) {
    for (std::uint32_t i = 0; i < count; ++i) receive();
  }
  [[nodiscard]] bool done() const { return outstanding_ == 0; }

 private:
  void receive() {
    ++outstanding_;
    conn_.async_recv(arpma::buffer(mr_, 0, max_).value(),
                     [this](const std::error_code& ec, const arpma::completion& got) {
                       if (!ec) on_message(got);
                       finished();
                     });
  }
  void on_message(const arpma::completion& got) {
    receive();
    if (!echo_) return;
    ++outstanding_;
    conn_.async_send(arpma::buffer(mr_, max_, got.byte_len).value(),
                     [this](const std::error_code& ec, const arpma::completion&) {
                       if (ec) (void)conn_.disconnect();  // the client learns it
                       finished();
                     });
  }
  void finished() {
    if (--outstanding_ == 0) wake_.cancel();
  }

  arpma::connection& conn_;
  const arpma::local_mr& mr_;
  std::size_t max_;
  bool echo_;
  asio::steady_timer& wake_;
  std::size_t outstanding_ = 0;
};

// Receivers for a send test, then waiting until the client disconnects (or stop() does).
asio::awaitable<void> server::serve_connection(arpma::connection& conn, const hello& h) {
  const auto ex = co_await asio::this_coro::executor;
  if (h.mode == poll_mode::busy_poll) conn.set_busy_poll(busy_poll_budget);
  std::vector<char> memory;
  arpma::local_mr mr;
  asio::steady_timer wake(ex, asio::steady_timer::time_point::max());
  std::optional<receivers> recv;
  if (h.op == op_kind::send) {
    memory.assign(2 * std::size_t{h.max_size}, 's');
    auto reg = arpma::local_mr::reg(peer_, memory.data(), memory.size(),
                                    arpma::mr_usage::send | arpma::mr_usage::recv);
    if (reg) {
      mr = std::move(reg.value());
      recv.emplace(conn, mr, h.max_size, h.test == test_kind::lat, wake);
      recv->start(receives_per_op * h.qd);
    } else {
      std::fprintf(stderr, "arpma-perf server: registering %zu bytes: %s\n", memory.size(),
                   reg.error().message().c_str());
      (void)conn.disconnect();  // the client learns it from its failing sends
    }
  }
  (void)co_await conn.async_next_event(awaitable_tuple);  // closed or lost
  deadline dl(ex);
  (void)co_await conn.async_disconnect(dl.arm(quiet_limit));
  dl.disarm();
  (void)conn.close();  // completes the operations in flight (aborted)
  while (recv && !recv->done()) (void)co_await wake.async_wait(awaitable_tuple);
}

void server::connection_done(const hello& h) {
  run_state& run = runs_[h.run_id];
  if (++run.done < h.conns) return;
  runs_.erase(h.run_id);
  ++runs_done_;
  std::printf("arpma-perf server: run done (%u run(s) served)\n", runs_done_);
  if (opts_.clients != 0 && runs_done_ >= opts_.clients && !stopping_) stop();
}

}  // namespace

int run_server(const options& opts, const std::string& provider) {
  auto peer = make_peer(opts.addr, true);
  if (!peer) return exit_failed;
  std::vector<char> region(max_message_size, 'r');
  auto mr = arpma::local_mr::reg(*peer, region.data(), region.size(),
                                 arpma::mr_usage::write_dst | arpma::mr_usage::read_src |
                                     arpma::mr_usage::flush_type_visibility);
  if (!mr) {
    std::fprintf(stderr, "arpma-perf server: registering %zu bytes: %s\n", region.size(),
                 mr.error().message().c_str());
    return exit_failed;
  }
  asio::io_context io;
  auto ep = arpma::endpoint::listen(io.get_executor(), *peer, opts.addr, opts.port);
  if (!ep) {
    std::fprintf(stderr, "arpma-perf server: cannot listen on %s:%s: %s\n", opts.addr.c_str(),
                 opts.port.c_str(), ep.error().message().c_str());
    return exit_failed;
  }
  std::printf("arpma-perf server: listening on %s:%u, %s provider\n", opts.addr.c_str(),
              unsigned{ep.value().port()}, provider.c_str());
  server s(io, *peer, opts, std::move(ep.value()), mr.value());
  bool crashed = false;
  asio::co_spawn(io, s.run(), [&](const std::exception_ptr& e) {
    crashed = e != nullptr;
    if (crashed) s.abandon();
  });
  io.run();
  return s.failed() || crashed ? exit_failed : exit_ok;
}

}  // namespace arpma_perf

// Connections per second with K connections in flight on one thread (issue 6's
// "arpma with 64 requests in flight" side; bench/rxe-compare.sh sets it against
// librpma's sequential loop). A server on its own thread and io_context accepts
// everything; the client keeps K connects (resolve, connect, ESTABLISHED,
// disconnect, CLOSED) in flight until N are done. Prints "connect_per_s X".
// With --channel shared each side's connections put their CQs on one
// arpma::completion_channel instead of a channel each (one fd and one
// channel creation less per connection and side).
//
// --role server / client split the two sides over two processes (two hosts:
// bench/conn_rtt.sh): the client first connects once, untimed, retrying for up
// to 60 s until the server listens; the server serves that one and N more,
// then exits (or after 180 s).
//
//   conn_setup_bench ADDR PORT N K [--json FILE] [--channel shared|own]
//                    [--role both|server|client]
#include "arpma/completion_channel.hpp"
#include "arpma/conn_req.hpp"
#include "arpma/connection.hpp"
#include "arpma/endpoint.hpp"
#include "arpma/peer.hpp"

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

namespace asio = boost::asio;

namespace {

struct client {
  asio::io_context& io;
  const arpma::peer& peer;
  std::string addr;
  std::string port;
  int total;
  arpma::conn_cfg cfg;
  int started = 0;
  int done = 0;
  int failed = 0;

  void start_one() {
    if (started == total) return;
    ++started;
    arpma::async_conn_req_new(
        io.get_executor(), peer, addr, port, cfg, [this](std::error_code ec, arpma::conn_req req) {
          if (ec) return finish(false);
          req.async_connect({}, [this](std::error_code ec2, arpma::connection c) {
            if (ec2) return finish(false);
            auto conn = std::make_shared<arpma::connection>(std::move(c));
            conn->async_disconnect([this, conn](std::error_code ec3) { finish(!ec3); });
          });
        });
  }
  void finish(bool ok) {
    ++done;
    if (!ok) ++failed;
    start_one();
  }
};

/// The cfg of one side: on `channel` if there is one.
arpma::conn_cfg side_cfg(const arpma::completion_channel& channel) {
  arpma::conn_cfg cfg;
  channel.attach_to(cfg);
  return cfg;
}

struct options {
  std::string addr;
  std::string port;
  int n = 0;
  int k = 0;
  const char* json = nullptr;
  bool shared = false;
  std::string role = "both";
};

bool parse(int argc, char** argv, options& o) {
  if (argc < 5) return false;
  o.addr = argv[1];
  o.port = argv[2];
  o.n = std::atoi(argv[3]);
  o.k = std::atoi(argv[4]);
  for (int i = 5; i < argc; i += 2) {
    if (i + 1 >= argc) return false;
    const std::string opt = argv[i];
    const std::string val = argv[i + 1];
    if (opt == "--json")
      o.json = argv[i + 1];
    else if (opt == "--channel" && (val == "shared" || val == "own"))
      o.shared = val == "shared";
    else if (opt == "--role" && (val == "both" || val == "server" || val == "client"))
      o.role = val;
    else
      return false;
  }
  return o.n > 0 && o.k > 0;
}

/// Serves on its own thread until `stop`, or (limit > 0) until `limit` connections ended.
class server_side {
 public:
  server_side(const arpma::peer& peer, const options& o) {
    auto ep = arpma::endpoint::listen(io_.get_executor(), peer, o.addr, o.port);
    if (!ep) {
      std::fprintf(stderr, "listen: %s\n", ep.error().message().c_str());
      return;
    }
    ep_ = std::move(ep.value());
    if (o.shared) channel_ = arpma::completion_channel::create(io_.get_executor(), peer).value();
    cfg_ = side_cfg(channel_);
    accept_next();
    ok_ = true;
  }
  bool listening() const { return ok_; }
  int accepted() const { return accepted_; }
  int ended() const { return ended_; }
  int failed() const { return failed_; }
  const std::string& last_error() const { return last_error_; }
  // Until `stop`, or (limit > 0) until `limit` connections ended; a lossy link must not hold
  // the server (a DISCONNECTED lost, a request whose RTU was lost never accepted): it also
  // stops once `linger` passed without a connection accepted, after the first.
  void run_until(const std::atomic<bool>& stop, int limit, std::chrono::seconds max,
                 std::chrono::seconds linger = std::chrono::seconds(10)) {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + max;
    int seen = 0;
    auto since = clock::now();
    while (!stop && (limit == 0 || ended_ + failed_ < limit) && clock::now() < deadline) {
      if (accepted_ + failed_ != seen) {
        seen = accepted_ + failed_;
        since = clock::now();
      }
      if (limit > 0 && seen > 0 && clock::now() - since >= linger) break;
      io_.run_for(std::chrono::milliseconds(20));
    }
  }

 private:
  // Accepts requests until stopped; each connection waits for its end.
  void accept_next() {
    ep_.async_next_conn_req(cfg_, [this](std::error_code ec, arpma::conn_req req) {
      if (ec) return;
      accept_next();
      req.async_connect({}, [this](std::error_code ec2, arpma::connection c) {
        if (ec2) {
          ++failed_;
          last_error_ = ec2.message();
          return;
        }
        ++accepted_;
        auto conn = std::make_shared<arpma::connection>(std::move(c));
        conn->async_next_event([this, conn](std::error_code, arpma::conn_event) { ++ended_; });
      });
    });
  }

  asio::io_context io_;
  arpma::endpoint ep_;
  arpma::completion_channel channel_;
  arpma::conn_cfg cfg_;
  int accepted_ = 0;
  int ended_ = 0;
  int failed_ = 0;
  std::string last_error_;
  bool ok_ = false;
};

/// One untimed connection, retried every 20 ms for up to 60 s: the server may start later.
bool wait_for_server(const arpma::peer& peer, const options& o) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    asio::io_context io;
    client probe{io, peer, o.addr, o.port, 1, {}};
    probe.start_one();
    io.run_for(std::chrono::seconds(10));
    if (probe.done == 1 && probe.failed == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

/// K in flight until N are done (or 120 s): the timed part.
int run_client(const arpma::peer& peer, const options& o) {
  asio::io_context io;
  arpma::completion_channel channel;
  if (o.shared) channel = arpma::completion_channel::create(io.get_executor(), peer).value();
  client c{io, peer, o.addr, o.port, o.n, side_cfg(channel)};
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o.k; ++i) c.start_one();
  const auto deadline = t0 + std::chrono::seconds(120);
  while (c.done < o.n && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_for(std::chrono::milliseconds(10));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("connect_per_s %.1f (done %d, failed %d, in flight %d, %s)\n", c.done / seconds,
              c.done, c.failed, o.k,
              o.shared ? "shared completion channels" : "own completion channels");
  if (o.json != nullptr) {
    if (FILE* f = std::fopen(o.json, "w")) {
      std::fprintf(f,
                   "{\n  \"bench\": \"conn_setup_bench\",\n  \"connections\": %d,\n"
                   "  \"in_flight\": %d,\n  \"done\": %d,\n  \"failed\": %d,\n"
                   "  \"seconds\": %.6f,\n  \"connect_per_s\": %.1f\n}\n",
                   o.n, o.k, c.done, c.failed, seconds, c.done / seconds);
      std::fclose(f);
    }
  }
  return c.done == o.n && c.failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: %s ADDR PORT N K [--json FILE] [--channel shared|own] "
                 "[--role both|server|client]\n",
                 argv[0]);
    return 2;
  }
  auto dev = arpma::get_ibv_context(o.addr, arpma::ibv_context_type::local);
  if (!dev) dev = arpma::get_ibv_context(o.addr, arpma::ibv_context_type::remote);
  if (!dev) return 1;
  auto peer = arpma::peer::create(dev.value()).value();
  std::atomic<bool> stop{false};
  if (o.role == "server") {
    server_side server(peer, o);
    if (!server.listening()) return 1;
    server.run_until(stop, o.n + 1, std::chrono::seconds(180));
    std::printf("accepted %d, ended %d (of %d); accepts that failed %d%s%s\n", server.accepted(),
                server.ended(), o.n + 1, server.failed(),
                server.failed() != 0 ? ", the last: " : "", server.last_error().c_str());
    // An accept may fail with connection_reset when the client's disconnect reaches this side's
    // CM before its RTU; the client counted that connection, so it is no failure here.
    return server.accepted() + server.failed() == o.n + 1 ? 0 : 1;
  }
  if (o.role == "client") return wait_for_server(peer, o) ? run_client(peer, o) : 1;
  server_side server(peer, o);
  if (!server.listening()) return 1;
  std::thread thread([&] { server.run_until(stop, 0, std::chrono::seconds(300)); });
  const int rc = run_client(peer, o);
  stop = true;
  thread.join();
  return rc;
}

// Connections per second with K connections in flight on one thread (issue 6's
// "arpma with 64 requests in flight" side; bench/rxe-compare.sh sets it against
// librpma's sequential loop). A server on its own thread and io_context accepts
// everything; the client keeps K connects (resolve, connect, ESTABLISHED,
// disconnect, CLOSED) in flight until N are done. Prints "connect_per_s X".
// With --channel shared each side's connections put their CQs on one
// arpma::completion_channel instead of a channel each (one fd and one
// channel creation less per connection and side).
//
//   conn_setup_bench ADDR PORT N K [--json FILE] [--channel shared|own]
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

// Accepts requests forever (until stopped); each connection waits for its end.
void accept_next(arpma::endpoint& ep, const arpma::conn_cfg& cfg) {
  ep.async_next_conn_req(cfg, [&ep, cfg](std::error_code ec, arpma::conn_req req) {
    if (ec) return;
    accept_next(ep, cfg);
    req.async_connect({}, [](std::error_code ec2, arpma::connection c) {
      if (ec2) return;
      auto conn = std::make_shared<arpma::connection>(std::move(c));
      conn->async_next_event([conn](std::error_code, arpma::conn_event) {});
    });
  });
}

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

}  // namespace

int main(int argc, char** argv) {
  const char* json = nullptr;
  bool shared = false;
  bool usage = argc < 5;
  for (int i = 5; i < argc && !usage; i += 2) {
    if (i + 1 >= argc)
      usage = true;
    else if (std::strcmp(argv[i], "--json") == 0)
      json = argv[i + 1];
    else if (std::strcmp(argv[i], "--channel") == 0 &&
             (std::strcmp(argv[i + 1], "shared") == 0 || std::strcmp(argv[i + 1], "own") == 0))
      shared = std::strcmp(argv[i + 1], "shared") == 0;
    else
      usage = true;
  }
  if (usage) {
    std::fprintf(stderr, "usage: %s ADDR PORT N K [--json FILE] [--channel shared|own]\n", argv[0]);
    return 2;
  }
  const std::string addr = argv[1];
  const std::string port = argv[2];
  const int n = std::atoi(argv[3]);
  const int k = std::atoi(argv[4]);
  auto dev = arpma::get_ibv_context(addr, arpma::ibv_context_type::local);
  if (!dev) return 1;
  auto peer = arpma::peer::create(dev.value()).value();

  asio::io_context server_io;
  auto ep = arpma::endpoint::listen(server_io.get_executor(), peer, addr, port);
  if (!ep) {
    std::fprintf(stderr, "listen: %s\n", ep.error().message().c_str());
    return 1;
  }
  arpma::completion_channel server_channel;
  if (shared)
    server_channel = arpma::completion_channel::create(server_io.get_executor(), peer).value();
  accept_next(ep.value(), side_cfg(server_channel));
  std::atomic<bool> stop{false};
  std::thread server([&] {
    while (!stop) server_io.run_for(std::chrono::milliseconds(20));
  });

  asio::io_context io;
  arpma::completion_channel client_channel;
  if (shared) client_channel = arpma::completion_channel::create(io.get_executor(), peer).value();
  client c{io, peer, addr, port, n, side_cfg(client_channel)};
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < k; ++i) c.start_one();
  const auto deadline = t0 + std::chrono::seconds(120);
  while (c.done < n && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_for(std::chrono::milliseconds(10));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stop = true;
  server.join();
  std::printf("connect_per_s %.1f (done %d, failed %d, in flight %d, %s)\n", c.done / seconds,
              c.done, c.failed, k,
              shared ? "shared completion channels" : "own completion channels");
  if (json != nullptr) {
    if (FILE* f = std::fopen(json, "w")) {
      std::fprintf(f,
                   "{\n  \"bench\": \"conn_setup_bench\",\n  \"connections\": %d,\n"
                   "  \"in_flight\": %d,\n  \"done\": %d,\n  \"failed\": %d,\n"
                   "  \"seconds\": %.6f,\n  \"connect_per_s\": %.1f\n}\n",
                   n, k, c.done, c.failed, seconds, c.done / seconds);
      std::fclose(f);
    }
  }
  return c.done == n && c.failed == 0 ? 0 : 1;
}

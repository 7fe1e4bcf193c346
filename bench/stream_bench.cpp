// arpma::stream against asio::ip::tcp::socket, the same code over both
// (issue 21): the rate of small HTTP/1.1 requests with Boost.Beast (one
// client, keep-alive, one request in flight) and the throughput of 64 KiB
// writes streamed one way. Server and client are two threads of this
// process, each with its own io_context; on loopback the RDMA side is the
// soft provider (or whatever device serves the address: rxe in the guest).
// TCP and RDMA rounds alternate so both see the same load; prints each
// round, the medians and the median of the per-round ratios (targets:
// >= 0.7x TCP on soft, >= 1.0x on rxe). Bounded: a few seconds per round.
//
//   stream_bench [--quick] [--rounds R] [--addr A] [--slots N] [--slot-size B] [--busy-poll US]
//                [--only tcp|stream] [--test http|bulk]
//   (A: 127.0.0.1; --only and --test: one side, one test, for perf and strace)
#include <arpma/endpoint.hpp>
#include <arpma/peer.hpp>
#include <arpma/stream.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using clock_type = std::chrono::steady_clock;

int rounds = 5;                                     // --quick: 3
int requests = 4000;                                // per round; --quick: 1000
std::size_t stream_bytes = std::size_t{256} << 20;  // per round; --quick: 64 MiB
constexpr std::size_t chunk = 64 << 10;
std::string addr = "127.0.0.1";
arpma::stream_cfg cfg;  // --slots N --slot-size B
bool run_tcp = true;    // --only stream: false
bool run_rdma = true;   // --only tcp: false
bool run_http = true;   // --test bulk: false
bool run_bulk = true;   // --test http: false

arpma::peer make_peer() {
  auto dev = arpma::get_ibv_context(addr, arpma::ibv_context_type::local);
  if (!dev) throw std::runtime_error("no RDMA device for " + addr);
  return arpma::peer::create(dev.value()).value();
}

void end_sending(arpma::stream& s) { (void)s.shutdown(); }
void end_sending(tcp::socket& s) {
  boost::system::error_code ignored;
  s.shutdown(tcp::socket::shutdown_send, ignored);
}

// ---- the server side: HTTP answers, or a sink for the stream test --------

template <class Stream>
asio::awaitable<void> serve_http(Stream s) {
  boost::beast::flat_buffer buffer;
  for (;;) {
    http::request<http::string_body> req;
    auto [ec, n] = co_await http::async_read(s, buffer, req, asio::as_tuple(asio::use_awaitable));
    if (ec) break;
    http::response<http::string_body> res{http::status::ok, req.version()};
    res.set(http::field::content_type, "text/plain");
    res.body() = "ok";
    res.keep_alive(true);
    res.prepare_payload();
    co_await http::async_write(s, res, asio::use_awaitable);
  }
  end_sending(s);
}

template <class Stream>
asio::awaitable<void> sink(Stream s) {
  std::vector<char> buf(chunk);
  for (;;) {
    auto [ec, n] =
        co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
    if (ec) break;
  }
  end_sending(s);
}

// What each connection's first byte asks for.
template <class Stream>
asio::awaitable<void> serve(Stream s) {
  char mode = 0;
  co_await asio::async_read(s, asio::buffer(&mode, 1), asio::use_awaitable);
  if (mode == 'H')
    co_await serve_http(std::move(s));
  else
    co_await sink(std::move(s));
}

// ---- the client side ------------------------------------------------------

template <class Stream>
asio::awaitable<double> http_rate(Stream s) {
  co_await asio::async_write(s, asio::buffer("H", 1), asio::use_awaitable);
  boost::beast::flat_buffer buffer;
  http::request<http::empty_body> req{http::verb::get, "/bench", 11};
  req.set(http::field::host, addr);
  req.keep_alive(true);
  const auto start = clock_type::now();
  for (int i = 0; i < requests; ++i) {
    co_await http::async_write(s, req, asio::use_awaitable);
    http::response<http::string_body> res;
    co_await http::async_read(s, buffer, res, asio::use_awaitable);
  }
  const std::chrono::duration<double> took = clock_type::now() - start;
  end_sending(s);
  co_return requests / took.count();
}

template <class Stream>
asio::awaitable<double> stream_rate(Stream s) {
  co_await asio::async_write(s, asio::buffer("S", 1), asio::use_awaitable);
  std::vector<char> data(chunk, 'x');
  const auto start = clock_type::now();
  for (std::size_t sent = 0; sent < stream_bytes; sent += chunk)
    co_await asio::async_write(s, asio::buffer(data), asio::use_awaitable);
  end_sending(s);
  char c = 0;  // the server's end of stream: it has read every byte
  (void)co_await asio::async_read(s, asio::buffer(&c, 1), asio::as_tuple(asio::use_awaitable));
  const std::chrono::duration<double> took = clock_type::now() - start;
  co_return static_cast<double>(stream_bytes) / took.count() / 1e6;
}

struct server {
  asio::io_context io;
  arpma::peer peer = make_peer();
  arpma::endpoint ep = arpma::endpoint::listen(io.get_executor(), peer, addr, "0").value();
  tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::make_address(addr), 0)};
  std::thread thread;

  server() {
    asio::co_spawn(io, accept_rdma(), asio::detached);
    asio::co_spawn(io, accept_tcp(), asio::detached);
    thread = std::thread([this] { io.run(); });
  }
  ~server() {
    asio::post(io, [this] {
      (void)ep.shutdown();
      acceptor.close();
      io.stop();
    });
    thread.join();
  }
  asio::awaitable<void> accept_rdma() {
    for (;;) {
      auto [ec, s] =
          co_await arpma::async_accept_stream(ep, peer, cfg, asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      asio::co_spawn(io, serve(std::move(s)), asio::detached);
    }
  }
  asio::awaitable<void> accept_tcp() {
    for (;;) {
      auto [ec, s] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      s.set_option(tcp::no_delay(true));
      asio::co_spawn(io, serve(std::move(s)), asio::detached);
    }
  }
};

// One measurement on a fresh connection of each kind, run to completion.
template <class Measure>
double measure_rdma(server& srv, const arpma::peer& p, Measure m) {
  asio::io_context io;
  double out = 0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto s = co_await arpma::async_connect_stream(
            io.get_executor(), p, addr, std::to_string(srv.ep.port()), cfg, asio::use_awaitable);
        out = co_await m(std::move(s));
      },
      [](const std::exception_ptr& e) {
        if (e) std::rethrow_exception(e);
      });
  io.run_for(std::chrono::seconds(60));
  return out;
}

template <class Measure>
double measure_tcp(server& srv, Measure m) {
  asio::io_context io;
  double out = 0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        tcp::socket s(io);
        co_await s.async_connect(srv.acceptor.local_endpoint(), asio::use_awaitable);
        s.set_option(tcp::no_delay(true));
        out = co_await m(std::move(s));
      },
      [](const std::exception_ptr& e) {
        if (e) std::rethrow_exception(e);
      });
  io.run_for(std::chrono::seconds(60));
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct series {
  const char* name;
  const char* unit;
  std::vector<double> tcp, rdma, ratio;
  void add(double t, double r) {
    tcp.push_back(t);
    rdma.push_back(r);
    ratio.push_back(t > 0 ? r / t : 0);
  }
  void print() const {
    std::printf("%-28s tcp %10.1f  stream %10.1f %-9s  stream/tcp %.2fx (median of %zu rounds)\n",
                name, median(tcp), median(rdma), unit, median(ratio), ratio.size());
  }
};

}  // namespace

int main(int argc, char* argv[]) {
  const std::span<char*> args(argv, static_cast<std::size_t>(argc));
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (std::strcmp(args[i], "--quick") == 0) {
      rounds = 3;
      requests = 1000;
      stream_bytes = std::size_t{64} << 20;
    } else if (std::strcmp(args[i], "--rounds") == 0 && i + 1 < args.size()) {
      rounds = std::clamp(std::stoi(args[++i]), 1, 99);
    } else if (std::strcmp(args[i], "--addr") == 0 && i + 1 < args.size()) {
      addr = args[++i];
    } else if (std::strcmp(args[i], "--busy-poll") == 0 && i + 1 < args.size()) {
      cfg.busy_poll = std::chrono::microseconds(std::stoul(args[++i]));
    } else if (std::strcmp(args[i], "--slots") == 0 && i + 1 < args.size()) {
      cfg.slots = static_cast<std::uint32_t>(std::stoul(args[++i]));
    } else if (std::strcmp(args[i], "--slot-size") == 0 && i + 1 < args.size()) {
      cfg.slot_size = static_cast<std::uint32_t>(std::stoul(args[++i]));
    } else if (std::strcmp(args[i], "--only") == 0 && i + 1 < args.size()) {
      const std::string side = args[++i];
      run_tcp = side == "tcp";
      run_rdma = side == "stream";
    } else if (std::strcmp(args[i], "--test") == 0 && i + 1 < args.size()) {
      const std::string test = args[++i];
      run_http = test == "http";
      run_bulk = test == "bulk";
    } else {
      std::fprintf(stderr,
                   "usage: %s [--quick] [--rounds R] [--addr A] [--slots N] [--slot-size B] "
                   "[--busy-poll US] [--only tcp|stream] [--test http|bulk]\n",
                   args[0]);
      return 2;
    }
  }
  try {
    server srv;
    const auto client_peer = make_peer();
    series http_s{"HTTP request rate (Beast)", "req/s", {}, {}, {}};
    series bulk_s{"64 KiB writes, one way", "MB/s", {}, {}, {}};
    auto http_m = [](auto s) { return http_rate(std::move(s)); };
    auto bulk_m = [](auto s) { return stream_rate(std::move(s)); };
    for (int r = 0; r < rounds; ++r) {
      const double th = run_tcp && run_http ? measure_tcp(srv, http_m) : 0;
      const double rh = run_rdma && run_http ? measure_rdma(srv, client_peer, http_m) : 0;
      http_s.add(th, rh);
      const double tb = run_tcp && run_bulk ? measure_tcp(srv, bulk_m) : 0;
      const double rb = run_rdma && run_bulk ? measure_rdma(srv, client_peer, bulk_m) : 0;
      bulk_s.add(tb, rb);
      std::printf("round %d: http tcp %.0f stream %.0f req/s; bulk tcp %.0f stream %.0f MB/s\n", r,
                  th, rh, tb, rb);
    }
    std::printf("stream_bench on %s, %u slots of %u B (%zu KiB registered per stream)\n",
                addr.c_str(), cfg.slots, cfg.slot_size, cfg.memory() >> 10);
    http_s.print();
    bulk_s.print();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stream_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}

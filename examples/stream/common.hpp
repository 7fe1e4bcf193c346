// What the stream examples share: one transport interface over arpma::stream
// (RDMA, the default) and asio::ip::tcp::socket (--tcp), so the protocol code
// above it is the same template for both, as a service moving to RDMA would
// keep it.
#pragma once

#include <arpma/endpoint.hpp>
#include <arpma/peer.hpp>
#include <arpma/stream.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>

namespace example {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct args {
  std::string addr;
  std::string port;
  bool tcp = false;
};

// <addr> <port> [--tcp]; exits with a usage message otherwise.
inline args parse_args(int argc, char* argv[]) {
  const std::span<char*> argl(argv, static_cast<std::size_t>(argc));
  if (argl.size() < 3 || argl.size() > 4 || (argl.size() == 4 && argl[3] != std::string("--tcp"))) {
    std::fprintf(stderr, "usage: %s <addr> <port> [--tcp]\n", argl[0]);
    std::exit(2);  // NOLINT(concurrency-mt-unsafe)
  }
  return {argl[1], argl[2], argl.size() == 4};
}

// The device and protection domain for `addr` (RDMA only).
inline arpma::peer make_peer(const std::string& addr) {
  auto dev = arpma::get_ibv_context(addr, arpma::ibv_context_type::local);
  if (!dev) throw std::system_error(dev.error(), "no RDMA device for " + addr);
  auto p = arpma::peer::create(dev.value());
  if (!p) throw std::system_error(p.error(), "peer");
  return std::move(p).value();
}

// One accepted connection of either kind, after printing "listening on".
struct rdma_listener {
  arpma::peer peer;
  arpma::endpoint ep;
  rdma_listener(const asio::any_io_executor& ex, const args& a)
      : peer(make_peer(a.addr)), ep(arpma::endpoint::listen(ex, peer, a.addr, a.port).value()) {
    std::printf("server: listening on %s:%u (RDMA stream)\n", a.addr.c_str(), ep.port());
    std::fflush(stdout);
  }
  asio::awaitable<arpma::stream> accept() {
    co_return co_await arpma::async_accept_stream(ep, peer, {}, asio::use_awaitable);
  }
};

struct tcp_listener {
  tcp::acceptor acceptor;
  tcp_listener(const asio::any_io_executor& ex, const args& a)
      : acceptor(ex, tcp::endpoint(asio::ip::make_address(a.addr),
                                   static_cast<std::uint16_t>(std::stoi(a.port)))) {
    std::printf("server: listening on %s:%u (TCP)\n", a.addr.c_str(),
                acceptor.local_endpoint().port());
    std::fflush(stdout);
  }
  asio::awaitable<tcp::socket> accept() {
    co_return co_await acceptor.async_accept(asio::use_awaitable);
  }
};

inline asio::awaitable<arpma::stream> connect_rdma(const args& a, const arpma::peer& p) {
  auto ex = co_await asio::this_coro::executor;
  co_return co_await arpma::async_connect_stream(ex, p, a.addr, a.port, {}, asio::use_awaitable);
}

inline asio::awaitable<tcp::socket> connect_tcp(const args& a) {
  tcp::socket s(co_await asio::this_coro::executor);
  co_await s.async_connect(
      tcp::endpoint(asio::ip::make_address(a.addr), static_cast<std::uint16_t>(std::stoi(a.port))),
      asio::use_awaitable);
  s.set_option(tcp::no_delay(true));
  co_return s;
}

// The end of this side's sending: the peer reads eof after what was sent.
inline void end_sending(arpma::stream& s) { (void)s.shutdown(); }
inline void end_sending(tcp::socket& s) {
  boost::system::error_code ignored;
  s.shutdown(tcp::socket::shutdown_send, ignored);
}

// Spawns `body` and runs the loop for at most 20 s (every example stops by
// itself); 0 when `body` finished without an exception.
inline int run_bounded(const char* side, asio::io_context& io, asio::awaitable<void> body) {
  int rc = 1;
  asio::co_spawn(io, std::move(body), [&](const std::exception_ptr& e) {
    try {
      if (e) std::rethrow_exception(e);
      rc = 0;
    } catch (const std::exception& ex) {
      std::printf("%s: failed: %s\n", side, ex.what());
    }
  });
  io.run_for(std::chrono::seconds(20));
  return rc;
}

template <class Listener, class Serve>
asio::awaitable<void> accept_then(Listener& l, Serve serve) {
  co_await serve(co_await l.accept());
}

// A server's main: listens on the transport the arguments choose, then runs
// `serve(stream)` (a template over the stream type) on the first connection.
template <class Serve>
int server_main(int argc, char* argv[], Serve serve) {
  const auto a = parse_args(argc, argv);
  asio::io_context io;
  try {
    if (a.tcp) {
      tcp_listener l(io.get_executor(), a);
      return run_bounded("server", io, accept_then(l, serve));
    }
    rdma_listener l(io.get_executor(), a);
    return run_bounded("server", io, accept_then(l, serve));
  } catch (const std::exception& ex) {
    std::printf("server: cannot listen: %s\n", ex.what());
    return 1;
  }
}

template <class Talk>
asio::awaitable<void> connect_tcp_then(const args& a, Talk talk) {
  co_await talk(co_await connect_tcp(a), a);
}

template <class Talk>
asio::awaitable<void> connect_rdma_then(const args& a, const arpma::peer& p, Talk talk) {
  co_await talk(co_await connect_rdma(a, p), a);
}

// A client's main: connects over the transport the arguments choose, then
// runs `talk(stream, args)`.
template <class Talk>
int client_main(int argc, char* argv[], Talk talk) {
  const auto a = parse_args(argc, argv);
  asio::io_context io;
  try {
    if (a.tcp) return run_bounded("client", io, connect_tcp_then(a, talk));
    const auto p = make_peer(a.addr);
    return run_bounded("client", io, connect_rdma_then(a, p, talk));
  } catch (const std::exception& ex) {
    std::printf("client: failed: %s\n", ex.what());
    return 1;
  }
}

}  // namespace example

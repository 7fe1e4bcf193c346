// Connection example, co_await flavour: the client. Connects with a "hello"
// in its private data, reads the server's "hello" from the accept, then
// disconnects. While the server is not listening yet (REJECTED or
// UNREACHABLE) it retries the whole sequence for up to 5 s; every other
// wait is bounded by a deadline that cancels the operation.
//
// usage: connection_coroutine_client <addr> <port>

#include "../common.hpp"

#include <arpma/conn_req.hpp>
#include <arpma/connection.hpp>
#include <arpma/error.hpp>
#include <arpma/peer.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <system_error>

namespace asio = boost::asio;
using example::quiet_limit;

namespace {

constexpr auto awaitable_tuple = asio::as_tuple(asio::use_awaitable);

bool failed(const char* step, std::error_code ec, const example::deadline& dl) {
  if (dl.expired())
    std::printf("client: %s: nothing heard for %lld ms, giving up\n", step,
                static_cast<long long>(example::quiet_limit.count()));
  else
    std::printf("client: %s failed: %s\n", step, ec.message().c_str());
  return false;
}

// One attempt: a request to the server, then connect. An empty connection
// and the error when it did not work.
asio::awaitable<std::pair<std::error_code, arpma::connection>> try_connect(const arpma::peer& peer,
                                                                           const example::args& a,
                                                                           example::deadline& dl) {
  auto [req_ec, req] = co_await arpma::async_conn_req_new(peer, a.addr, a.port, {},
                                                          dl.arm(quiet_limit, awaitable_tuple));
  dl.disarm();
  if (req_ec) co_return std::pair{std::error_code(req_ec), arpma::connection{}};
  auto [conn_ec, conn] = co_await req.async_connect(example::bytes(example::client_hello),
                                                    dl.arm(quiet_limit, awaitable_tuple));
  dl.disarm();
  co_return std::pair{std::error_code(conn_ec), std::move(conn)};
}

asio::awaitable<bool> run_client(const arpma::peer& peer, const example::args& a) {
  const auto ex = co_await asio::this_coro::executor;
  example::deadline dl(ex);
  asio::steady_timer pause(ex);
  const auto give_up = std::chrono::steady_clock::now() + example::retry_limit;

  std::printf("client: connecting to %s:%s, private data \"%s\"\n", a.addr.c_str(), a.port.c_str(),
              example::client_hello.data());
  arpma::connection conn;
  for (int attempt = 1;; ++attempt) {
    auto [ec, c] = co_await try_connect(peer, a, dl);
    if (!ec) {
      conn = std::move(c);
      if (attempt > 1) std::printf("client: server answered on attempt %d\n", attempt);
      break;
    }
    if (!example::not_listening_yet(ec)) co_return failed("connecting", ec, dl);
    if (std::chrono::steady_clock::now() > give_up)
      co_return failed("connecting (no server after 5 s of retries)", ec, dl);
    if (attempt == 1)
      std::printf("client: server not there yet (%s), retrying for up to 5 s\n",
                  ec.message().c_str());
    pause.expires_after(example::retry_pause);
    co_await pause.async_wait(awaitable_tuple);
  }
  std::printf("client: connection established, server's private data \"%s\"\n",
              example::text(conn.private_data()).c_str());

  auto [close_ec] = co_await conn.async_disconnect(dl.arm(quiet_limit, awaitable_tuple));
  dl.disarm();
  if (close_ec) co_return failed("disconnecting", close_ec, dl);
  std::printf("client: disconnected, connection closed\n");
  co_return true;
}

}  // namespace

int main(int argc, char* argv[]) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line visible at once, also in a pipe
  const example::args a = example::parse_args(argc, argv, false);

  auto device = arpma::get_ibv_context(a.addr, arpma::ibv_context_type::remote);
  if (!device) {
    std::printf("client: no RDMA device reaches %s: %s\n", a.addr.c_str(),
                device.error().message().c_str());
    return EXIT_FAILURE;
  }
  auto peer = arpma::peer::create(device.value());
  if (!peer) {
    std::printf("client: cannot create the peer: %s\n", peer.error().message().c_str());
    return EXIT_FAILURE;
  }

  asio::io_context io;
  bool ok = false;
  asio::co_spawn(io, run_client(peer.value(), a), [&](const std::exception_ptr& e, bool result) {
    try {
      if (e) std::rethrow_exception(e);
      ok = result;
    } catch (const std::exception& x) {
      std::printf("client: %s\n", x.what());
    }
  });
  io.run();
  std::printf("client: %s\n", ok ? "done" : "FAILED");
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}

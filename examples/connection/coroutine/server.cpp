// Connection example, co_await flavour: the server. Listens, takes one
// connection request (or --count N, one after another), reads the client's
// "hello" from its private data, accepts with a "hello" of its own, then
// waits for the client to disconnect. Every wait is bounded by a deadline
// that cancels the operation (per-operation cancellation).
//
// usage: connection_coroutine_server <addr> <port> [--count N]   (port 0: any free port)

#include "../common.hpp"

#include <arpma/conn_req.hpp>
#include <arpma/connection.hpp>
#include <arpma/endpoint.hpp>
#include <arpma/error.hpp>
#include <arpma/peer.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <system_error>

namespace asio = boost::asio;
using example::quiet_limit;

namespace {

constexpr auto awaitable_tuple = asio::as_tuple(asio::use_awaitable);

bool failed(const char* step, std::error_code ec, const example::deadline& dl) {
  if (dl.expired())
    std::printf("server: %s: nothing heard for %lld ms, giving up\n", step,
                static_cast<long long>(example::quiet_limit.count()));
  else
    std::printf("server: %s failed: %s\n", step, ec.message().c_str());
  return false;
}

asio::awaitable<bool> serve_one(arpma::endpoint& ep) {
  example::deadline dl(co_await asio::this_coro::executor);

  auto [req_ec, req] = co_await ep.async_next_conn_req({}, dl.arm(quiet_limit, awaitable_tuple));
  dl.disarm();
  if (req_ec) co_return failed("waiting for a connection request", req_ec, dl);
  std::printf("server: request from client, private data \"%s\"\n",
              example::text(req.private_data()).c_str());

  auto [conn_ec, conn] = co_await req.async_connect(example::bytes(example::server_hello),
                                                    dl.arm(quiet_limit, awaitable_tuple));
  dl.disarm();
  if (conn_ec) co_return failed("accepting", conn_ec, dl);
  std::printf("server: connection established, answered \"%s\"\n", example::server_hello.data());

  auto [event_ec, event] = co_await conn.async_next_event(dl.arm(quiet_limit, awaitable_tuple));
  dl.disarm();
  if (event_ec) co_return failed("waiting for the client to disconnect", event_ec, dl);
  if (event != arpma::conn_event::closed) {
    std::printf("server: unexpected connection event: %s\n", arpma::to_string(event));
    co_return false;
  }
  std::printf("server: client disconnected, closing\n");

  auto [close_ec] = co_await conn.async_disconnect(dl.arm(quiet_limit, awaitable_tuple));
  dl.disarm();
  if (close_ec) co_return failed("disconnecting", close_ec, dl);
  std::printf("server: connection closed\n");
  co_return true;
}

// Serves `count` connections, then shuts the endpoint down: a listening
// endpoint keeps the loop busy, so io.run() returns only after that.
asio::awaitable<bool> serve(arpma::endpoint& ep, int count) {
  bool ok = true;
  for (int i = 0; i < count && ok; ++i) ok = co_await serve_one(ep);
  const std::error_code ec = ep.shutdown();
  if (ec) {
    std::printf("server: shutting the endpoint down failed: %s\n", ec.message().c_str());
    co_return false;
  }
  co_return ok;
}

}  // namespace

int main(int argc, char* argv[]) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line visible at once, also in a pipe
  const example::args a = example::parse_args(argc, argv, true);

  auto device = arpma::get_ibv_context(a.addr, arpma::ibv_context_type::local);
  if (!device) {
    std::printf("server: no RDMA device owns %s: %s\n", a.addr.c_str(),
                device.error().message().c_str());
    return EXIT_FAILURE;
  }
  auto peer = arpma::peer::create(device.value());
  if (!peer) {
    std::printf("server: cannot create the peer: %s\n", peer.error().message().c_str());
    return EXIT_FAILURE;
  }

  asio::io_context io;
  auto ep = arpma::endpoint::listen(io.get_executor(), peer.value(), a.addr, a.port);
  if (!ep) {
    std::printf("server: cannot listen on %s:%s: %s\n", a.addr.c_str(), a.port.c_str(),
                ep.error().message().c_str());
    return EXIT_FAILURE;
  }
  std::printf("server: listening on %s:%u\n", a.addr.c_str(), unsigned{ep.value().port()});

  bool ok = false;
  asio::co_spawn(io, serve(ep.value(), a.count), [&](const std::exception_ptr& e, bool result) {
    try {
      if (e) std::rethrow_exception(e);
      ok = result;
    } catch (const std::exception& x) {
      std::printf("server: %s\n", x.what());
    }
  });
  io.run();
  std::printf("server: %s\n", ok ? "done, endpoint shut down" : "FAILED");
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}

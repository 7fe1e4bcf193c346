// Connection example, callback flavour: the client. The same steps as the
// co_await flavour, written as completion handlers that each start the next
// step: a request to the server, connect with a "hello" in the private data,
// read the server's "hello" from the accept, disconnect. While the server is
// not listening yet (REJECTED or UNREACHABLE) it retries for up to 5 s;
// every other wait is bounded by a deadline that cancels the operation.
//
// usage: connection_callback_client <addr> <port>

#include "../common.hpp"

#include <arpma/conn_req.hpp>
#include <arpma/connection.hpp>
#include <arpma/error.hpp>
#include <arpma/peer.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <system_error>
#include <utility>

namespace asio = boost::asio;
using example::quiet_limit;

namespace {

class client {
 public:
  client(asio::io_context& io, const arpma::peer& peer, example::args a)
      : io_(io), peer_(peer), args_(std::move(a)), dl_(io.get_executor()), pause_(io) {}

  void start() {
    std::printf("client: connecting to %s:%s, private data \"%s\"\n", args_.addr.c_str(),
                args_.port.c_str(), example::client_hello.data());
    give_up_ = std::chrono::steady_clock::now() + example::retry_limit;
    attempt();
  }
  [[nodiscard]] bool ok() const { return ok_; }

 private:
  void attempt() {
    ++attempts_;
    arpma::async_conn_req_new(io_.get_executor(), peer_, args_.addr, args_.port, {},
                              dl_.arm(quiet_limit, [this](std::error_code ec, arpma::conn_req req) {
                                dl_.disarm();
                                if (ec) return fail("creating the connection request", ec);
                                connect(std::move(req));
                              }));
  }

  void connect(arpma::conn_req req) {
    req.async_connect(example::bytes(example::client_hello),
                      dl_.arm(quiet_limit, [this](std::error_code ec, arpma::connection conn) {
                        dl_.disarm();
                        if (ec) return retry_or_fail(ec);
                        if (attempts_ > 1)
                          std::printf("client: server answered on attempt %d\n", attempts_);
                        std::printf(
                            "client: connection established, server's private data \"%s\"\n",
                            example::text(conn.private_data()).c_str());
                        conn_ = std::move(conn);
                        disconnect();
                      }));
  }

  void retry_or_fail(std::error_code ec) {
    if (!example::not_listening_yet(ec)) return fail("connecting", ec);
    if (std::chrono::steady_clock::now() > give_up_)
      return fail("connecting (no server after 5 s of retries)", ec);
    if (attempts_ == 1)
      std::printf("client: server not there yet (%s), retrying for up to 5 s\n",
                  ec.message().c_str());
    pause_.expires_after(example::retry_pause);
    pause_.async_wait([this](std::error_code) { attempt(); });
  }

  void disconnect() {
    conn_.async_disconnect(dl_.arm(quiet_limit, [this](std::error_code ec) {
      dl_.disarm();
      conn_ = arpma::connection{};
      if (ec) return fail("disconnecting", ec);
      std::printf("client: disconnected, connection closed\n");
      ok_ = true;
    }));
  }

  void fail(const char* step, std::error_code ec) {
    conn_ = arpma::connection{};
    if (dl_.expired())
      std::printf("client: %s: nothing heard for %lld ms, giving up\n", step,
                  static_cast<long long>(example::quiet_limit.count()));
    else
      std::printf("client: %s failed: %s\n", step, ec.message().c_str());
  }

  asio::io_context& io_;
  const arpma::peer& peer_;
  example::args args_;
  example::deadline dl_;
  asio::steady_timer pause_;
  std::chrono::steady_clock::time_point give_up_;
  arpma::connection conn_;
  int attempts_ = 0;
  bool ok_ = false;
};

}  // namespace

int main(int argc, char* argv[]) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line visible at once, also in a pipe
  example::args a = example::parse_args(argc, argv, false);

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
  client c(io, peer.value(), std::move(a));
  c.start();
  io.run();
  std::printf("client: %s\n", c.ok() ? "done" : "FAILED");
  return c.ok() ? EXIT_SUCCESS : EXIT_FAILURE;
}

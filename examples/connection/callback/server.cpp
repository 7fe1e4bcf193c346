// Connection example, callback flavour: the server. The same steps as the
// co_await flavour, written as completion handlers that each start the next
// step: listen, take a request and read the client's "hello" from its
// private data, accept with a "hello" of its own, wait for the client to
// disconnect. Every wait is bounded by a deadline that cancels the operation.
//
// usage: connection_callback_server <addr> <port> [--count N]   (port 0: any free port)

#include "../common.hpp"

#include <arpma/conn_req.hpp>
#include <arpma/connection.hpp>
#include <arpma/endpoint.hpp>
#include <arpma/error.hpp>
#include <arpma/peer.hpp>

#include <boost/asio/io_context.hpp>

#include <cstdio>
#include <cstdlib>
#include <system_error>
#include <utility>

namespace asio = boost::asio;
using example::quiet_limit;

namespace {

class server {
 public:
  server(asio::io_context& io, arpma::endpoint ep, int count)
      : ep_(std::move(ep)), dl_(io.get_executor()), left_(count) {}

  void start() { next_request(); }
  [[nodiscard]] bool ok() const { return ok_; }

 private:
  void next_request() {
    ep_.async_next_conn_req({},
                            dl_.arm(quiet_limit, [this](std::error_code ec, arpma::conn_req req) {
                              dl_.disarm();
                              if (ec) return fail("waiting for a connection request", ec);
                              std::printf("server: request from client, private data \"%s\"\n",
                                          example::text(req.private_data()).c_str());
                              accept(std::move(req));
                            }));
  }

  void accept(arpma::conn_req req) {
    req.async_connect(example::bytes(example::server_hello),
                      dl_.arm(quiet_limit, [this](std::error_code ec, arpma::connection conn) {
                        dl_.disarm();
                        if (ec) return fail("accepting", ec);
                        std::printf("server: connection established, answered \"%s\"\n",
                                    example::server_hello.data());
                        conn_ = std::move(conn);
                        wait_for_close();
                      }));
  }

  void wait_for_close() {
    conn_.async_next_event(
        dl_.arm(quiet_limit, [this](std::error_code ec, arpma::conn_event event) {
          dl_.disarm();
          if (ec) return fail("waiting for the client to disconnect", ec);
          if (event != arpma::conn_event::closed) {
            std::printf("server: unexpected connection event: %s\n", arpma::to_string(event));
            return finish(false);
          }
          std::printf("server: client disconnected, closing\n");
          close();
        }));
  }

  void close() {
    conn_.async_disconnect(dl_.arm(quiet_limit, [this](std::error_code ec) {
      dl_.disarm();
      if (ec) return fail("disconnecting", ec);
      std::printf("server: connection closed\n");
      conn_ = arpma::connection{};
      if (--left_ > 0) return next_request();
      finish(true);
    }));
  }

  void fail(const char* step, std::error_code ec) {
    if (dl_.expired())
      std::printf("server: %s: nothing heard for %lld ms, giving up\n", step,
                  static_cast<long long>(example::quiet_limit.count()));
    else
      std::printf("server: %s failed: %s\n", step, ec.message().c_str());
    finish(false);
  }

  // A listening endpoint keeps the loop busy: shutting it down lets
  // io.run() return.
  void finish(bool ok) {
    conn_ = arpma::connection{};
    const std::error_code ec = ep_.shutdown();
    if (ec) std::printf("server: shutting the endpoint down failed: %s\n", ec.message().c_str());
    ok_ = ok && !ec;
  }

  arpma::endpoint ep_;
  arpma::connection conn_;
  example::deadline dl_;
  int left_;
  bool ok_ = false;
};

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

  server s(io, std::move(ep).value(), a.count);
  s.start();
  io.run();
  std::printf("server: %s\n", s.ok() ? "done, endpoint shut down" : "FAILED");
  return s.ok() ? EXIT_SUCCESS : EXIT_FAILURE;
}

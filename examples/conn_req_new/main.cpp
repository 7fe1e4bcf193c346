// The seed call, rpma_conn_req_new, in arpma's two C++ flavours:
// a coroutine that co_awaits it, and a callback-style client. The blocking C
// flavour is main.c next to this file.
//
// usage: conn_req_new_example <address> <port> [count]

#include <arpma/conn_req.hpp>
#include <arpma/error.hpp>
#include <arpma/peer.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace asio = boost::asio;

namespace {

asio::awaitable<void> coroutine_flavour(const arpma::peer& peer, std::string addr, std::string port,
                                        int& failures) {
  try {
    arpma::conn_req req = co_await arpma::async_conn_req_new(peer, addr, port, arpma::conn_cfg{},
                                                             asio::use_awaitable);
    std::printf("[co_await] request to %s:%s ready: QP %u\n", addr.c_str(), port.c_str(),
                req.qp_num());
  } catch (const boost::system::system_error& e) {
    std::printf("[co_await] request to %s:%s failed: %s\n", addr.c_str(), port.c_str(),
                e.code().message().c_str());
    ++failures;
  }
}

void callback_flavour(asio::io_context& io, const arpma::peer& peer, const std::string& addr,
                      const std::string& port, int count, int& failures) {
  const auto start = std::chrono::steady_clock::now();
  auto pending = std::make_shared<int>(count);
  for (int i = 0; i < count; ++i) {
    arpma::async_conn_req_new(
        io.get_executor(), peer, addr, port, arpma::conn_cfg{},
        [&, pending, start](std::error_code ec, arpma::conn_req req) {
          if (ec) {
            if (failures++ == 0)
              std::printf("[callback] request failed: %s (%s)\n", ec.message().c_str(),
                          ec == arpma::errc::provider ? "provider error" : "other");
          }
          if (--*pending == 0) {
            const auto ms =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count();
            std::printf(
                "[callback] %d requests in flight at once on one io_context: "
                "%d ready, %.1f ms (last QP %u)\n",
                count, count - failures, ms, req.qp_num());
          }
        });
  }
}

}  // namespace

int main(int argc, char* argv[]) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <address> <port> [count]\n", argv[0]);
    return 2;
  }
  const std::string addr = argv[1];
  const std::string port = argv[2];
  const int count = argc > 3 ? std::atoi(argv[3]) : 100;

  auto device = arpma::get_ibv_context(addr, arpma::ibv_context_type::remote);
  if (!device) {
    std::printf("no RDMA device reaches %s: %s\n", addr.c_str(), device.error().message().c_str());
    return 1;
  }
  auto peer = arpma::peer::create(device.value());
  if (!peer) {
    std::printf("peer: %s\n", peer.error().message().c_str());
    return 1;
  }

  asio::io_context io;
  int failures = 0;
  asio::co_spawn(io, coroutine_flavour(peer.value(), addr, port, failures), asio::detached);
  callback_flavour(io, peer.value(), addr, port, count, failures);
  io.run();
  return failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

// Read example, co_await flavour: the server. Puts a greeting in a region
// the client may read, sends the region's descriptor in the accept's private
// data, and waits for the client to disconnect. The client's read takes the
// bytes without this side doing anything.
//
// usage: read_coroutine_server <addr> <port>

#include "../../common.hpp"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace asio = boost::asio;
constexpr const char* who = "server";
constexpr std::string_view greeting = "hello from the server's memory";

namespace {

asio::awaitable<bool> serve(const arpma::peer& peer, arpma::endpoint& ep) {
  std::array<char, 4096> memory{};
  greeting.copy(memory.data(), memory.size() - 1);
  const arpma::local_mr mr =
      example::reg(who, peer, memory.data(), memory.size(), arpma::mr_usage::read_src);
  bool ok = false;
  if (mr) {
    std::printf("server: my memory holds \"%s\"\n", memory.data());
    arpma::connection conn = co_await example::accept_next(who, ep, mr.descriptor());
    // Not `conn && co_await ...`: g++ 12 runs the co_await in
    // `conn && co_await f() && g()` even when conn is false.
    if (conn) ok = co_await example::wait_closed(who, conn);
  }
  (void)ep.shutdown();  // a listening endpoint keeps the loop running
  co_return ok;
}

}  // namespace

int main(int argc, char* argv[]) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line visible at once, also in a pipe
  const example::args a = example::parse_args(argc, argv, false);
  auto peer = example::make_peer(who, a.addr, arpma::ibv_context_type::local);
  if (!peer) return EXIT_FAILURE;
  asio::io_context io;
  auto ep = example::listen(who, io, *peer, a);
  if (!ep) return EXIT_FAILURE;
  return example::run(who, io, serve(*peer, *ep));
}

// Write + flush example, co_await flavour: the server. Registers a region
// the client may write to and flush (to visibility), sends its descriptor in
// the accept's private data, and waits for the client to disconnect; then it
// prints what landed in its memory. The server posts nothing: the client's
// writes move the data without it.
//
// usage: write_flush_coroutine_server <addr> <port>

#include "../../common.hpp"

#include <array>
#include <cstdio>
#include <cstdlib>

namespace asio = boost::asio;
constexpr const char* who = "server";

namespace {

asio::awaitable<bool> serve(const arpma::peer& peer, arpma::endpoint& ep) {
  std::array<char, 4096> memory{};
  const arpma::local_mr mr =
      example::reg(who, peer, memory.data(), memory.size(),
                   arpma::mr_usage::write_dst | arpma::mr_usage::flush_type_visibility);
  bool ok = false;
  if (mr) {
    const arpma::mr_descriptor desc = mr.descriptor();
    arpma::connection conn = co_await example::accept_next(who, ep, desc);
    // Not `conn && co_await ...`: g++ 12 runs the co_await in
    // `conn && co_await f() && g()` even when conn is false.
    if (conn) ok = co_await example::wait_closed(who, conn);
  }
  if (ok)
    std::printf("server: what landed in my memory: \"%s\"\n",
                example::text_at(memory.data(), memory.size()).c_str());
  if (ok && memory[0] == '\0') {
    std::printf("server: nothing was written\n");
    ok = false;
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

// Read example, co_await flavour: the client. Connects, decodes the server's
// region from the accept's private data, reads the greeting at its start
// into local memory (RDMA read: the server's CPU takes no part), prints it
// and disconnects.
//
// usage: read_coroutine_client <addr> <port>

#include "../../common.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>

namespace asio = boost::asio;
constexpr const char* who = "client";

namespace {

asio::awaitable<bool> run_client(const arpma::peer& peer, const example::args& a) {
  example::deadline dl(co_await asio::this_coro::executor);
  std::array<char, 64> buf{};
  const arpma::local_mr mr =
      example::reg(who, peer, buf.data(), buf.size(), arpma::mr_usage::read_dst);
  if (!mr) co_return false;

  std::printf("client: connecting to %s:%s\n", a.addr.c_str(), a.port.c_str());
  arpma::connection conn = co_await example::connect(who, peer, a);
  if (!conn) co_return false;
  const auto remote = example::server_region(who, conn);
  if (!remote) co_return false;

  const std::size_t len = std::min<std::size_t>(buf.size(), remote->size());
  std::printf("client: reading %zu bytes from offset 0 of the server's region\n", len);
  if (!co_await example::step(who, "reading", dl, [&](auto token) {
        return conn.async_read(arpma::buffer(mr, 0, len).value(),
                               arpma::buffer(*remote, 0, len).value(), token);
      }))
    co_return false;
  std::printf("client: read the server's greeting: \"%s\"\n",
              example::text_at(buf.data(), buf.size()).c_str());
  co_return co_await example::disconnect(who, conn);
}

}  // namespace

int main(int argc, char* argv[]) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line visible at once, also in a pipe
  const example::args a = example::parse_args(argc, argv, false);
  auto peer = example::make_peer(who, a.addr, arpma::ibv_context_type::remote);
  if (!peer) return EXIT_FAILURE;
  asio::io_context io;
  return example::run(who, io, run_client(*peer, a));
}

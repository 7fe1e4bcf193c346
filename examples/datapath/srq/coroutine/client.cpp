// SRQ example, co_await flavour: the client. Opens CONNECTIONS connections
// one after another, sends "hello from connection i" on connection i and
// awaits each send, then disconnects them all (protocol.h). Nothing in it
// knows that the server receives through a shared receive queue.
//
// usage: srq_coroutine_client <addr> <port>

#include "../../common.hpp"
#include "../protocol.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace asio = boost::asio;
constexpr const char* who = "client";

namespace {

asio::awaitable<bool> run_client(const arpma::peer& peer, const example::args& a) {
  std::array<char, CONNECTIONS * SLOT> buf{};
  const arpma::local_mr mr = example::reg(who, peer, buf.data(), buf.size(), arpma::mr_usage::send);
  if (!mr) co_return false;
  std::vector<arpma::connection> conns;
  for (int i = 0; i < CONNECTIONS; ++i) {
    conns.push_back(co_await example::connect(who, peer, a));
    if (!conns.back()) co_return false;
  }
  example::deadline dl(co_await asio::this_coro::executor);
  bool good = true;
  for (std::size_t i = 0; i < conns.size() && good; ++i) {
    char* text = &buf[i * SLOT];
    const int n = std::snprintf(text, SLOT, MESSAGE_FORMAT, static_cast<int>(i));
    good = co_await example::step(who, "sending", dl, [&](auto token) {
             return conns[i].async_send(
                 arpma::buffer(mr, i * SLOT, static_cast<std::size_t>(n) + 1).value(), token);
           }) != std::nullopt;
    if (good) std::printf("%s: sent \"%s\" on connection %zu\n", who, text, i);
  }
  for (auto& conn : conns) good = co_await example::disconnect(who, conn) && good;
  if (good) std::printf("%s: %d messages sent on %d connections\n", who, CONNECTIONS, CONNECTIONS);
  co_return good;
}

}  // namespace

int main(int argc, char* argv[]) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const example::args a = example::parse_args(argc, argv, false);
  auto peer = example::make_peer(who, a.addr, arpma::ibv_context_type::remote);
  if (!peer) return EXIT_FAILURE;
  asio::io_context io;
  return example::run(who, io, run_client(*peer, a));
}

// Write + flush example, co_await flavour: the client. Connects, decodes the
// server's region from the accept's private data, writes a message into it,
// then flushes that range to global visibility: once the flush completes the
// message is in the server's memory, visible to the server's CPU (a write's
// own completion only says it left this side). Then it disconnects.
//
// usage: write_flush_coroutine_client <addr> <port>

#include "../../common.hpp"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace asio = boost::asio;
constexpr const char* who = "client";
constexpr std::string_view message = "hello from the client, written and flushed";

namespace {

asio::awaitable<bool> run_client(const arpma::peer& peer, const example::args& a) {
  example::deadline dl(co_await asio::this_coro::executor);
  std::array<char, 64> buf{};
  message.copy(buf.data(), buf.size() - 1);
  const arpma::local_mr mr =
      example::reg(who, peer, buf.data(), buf.size(), arpma::mr_usage::write_src);
  if (!mr) co_return false;

  std::printf("client: connecting to %s:%s\n", a.addr.c_str(), a.port.c_str());
  arpma::connection conn = co_await example::connect(who, peer, a);
  if (!conn) co_return false;
  const auto remote = example::server_region(who, conn);
  if (!remote) co_return false;

  const std::size_t len = message.size() + 1;  // with its NUL
  std::printf("client: writing \"%s\" (%zu bytes) to offset 0 of the server's region\n", buf.data(),
              len);
  if (!co_await example::step(who, "writing", dl, [&](auto token) {
        return conn.async_write(arpma::buffer(*remote, 0, len).value(),
                                arpma::buffer(mr, 0, len).value(), token);
      }))
    co_return false;
  if (!co_await example::step(who, "flushing", dl, [&](auto token) {
        return conn.async_flush(arpma::buffer(*remote, 0, len).value(),
                                arpma::flush_type::visibility, token);
      }))
    co_return false;
  std::printf("client: flushed: the message is visible in the server's memory\n");
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

// Ping-pong example, co_await flavour: the client. Connects, decodes the
// server's region from the accept's private data, and plays the rounds of
// ../protocol.hpp: each time it posts a receive for the pong first (so the
// server's answer always finds one), then sends "ping i" — by send, by
// send_with_imm or by write_with_imm into the server's region, with the
// round number as immediate data — and waits for "pong i".
//
// usage: ping_pong_coroutine_client <addr> <port>

#include "../../common.hpp"
#include "../protocol.hpp"

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace asio = boost::asio;
namespace pp = ping_pong;
constexpr const char* who = "client";

namespace {

asio::awaitable<bool> run_client(const arpma::peer& peer, const example::args& a) {
  const auto ex = co_await asio::this_coro::executor;
  example::deadline dl(ex);
  std::array<char, pp::client_size> buf{};
  const arpma::local_mr mr =
      example::reg(who, peer, buf.data(), buf.size(),
                   arpma::mr_usage::send | arpma::mr_usage::recv | arpma::mr_usage::write_src);
  if (!mr) co_return false;

  std::printf("client: connecting to %s:%s\n", a.addr.c_str(), a.port.c_str());
  arpma::connection conn = co_await example::connect(who, peer, a);
  if (!conn) co_return false;
  const auto remote = example::server_region(who, conn);
  if (!remote) co_return false;

  example::posted_recv pong(ex);
  for (int i = 1; i <= pp::rounds; ++i) {
    pong.post(conn, mr, pp::client_recv_offset, pp::message_max);
    const int n = std::snprintf(&buf[pp::ping_offset], pp::message_max, "ping %d", i);
    const std::size_t len = static_cast<std::size_t>(n) + 1;
    const auto imm = static_cast<std::uint32_t>(i);
    const char* way = "send";
    std::optional<arpma::completion> sent;
    if (i == pp::send_with_imm_round) {
      way = "send_with_imm, immediate data";
      sent = co_await example::step(who, "sending the ping", dl, [&](auto token) {
        return conn.async_send_with_imm(arpma::buffer(mr, pp::ping_offset, len).value(), imm,
                                        token);
      });
    } else if (i == pp::write_with_imm_round) {
      way = "write_with_imm into the server's region, immediate data";
      sent = co_await example::step(who, "writing the ping", dl, [&](auto token) {
        return conn.async_write_with_imm(arpma::buffer(*remote, pp::write_offset, len).value(),
                                         arpma::buffer(mr, pp::ping_offset, len).value(), imm,
                                         token);
      });
    } else {
      sent = co_await example::step(who, "sending the ping", dl, [&](auto token) {
        return conn.async_send(arpma::buffer(mr, pp::ping_offset, len).value(), token);
      });
    }
    if (!sent) co_return false;
    if (i == pp::send_with_imm_round || i == pp::write_with_imm_round)
      std::printf("client: sent \"%s\" by %s %d\n", &buf[pp::ping_offset], way, i);
    else
      std::printf("client: sent \"%s\" by %s\n", &buf[pp::ping_offset], way);

    if (!co_await pong.wait(who, "waiting for the pong")) co_return false;
    const std::string text = example::text_at(&buf[pp::client_recv_offset], pp::message_max);
    std::printf("client: got \"%s\"\n", text.c_str());
    if (text != "pong " + std::to_string(i)) co_return false;
  }
  std::printf("client: %d round trips done\n", pp::rounds);
  // The server disconnects once its last pong has completed.
  co_return co_await example::wait_closed(who, conn, "server");
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

// Ping-pong example, co_await flavour: the server. Accepts with its
// region's descriptor as private data (the client's write_with_imm lands
// there), keeps one receive posted ahead of the client's next ping, and
// answers each "ping i" with a send of "pong i" (protocol: ../protocol.hpp).
//
// usage: ping_pong_coroutine_server <addr> <port>

#include "../../common.hpp"
#include "../protocol.hpp"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace asio = boost::asio;
namespace pp = ping_pong;
constexpr const char* who = "server";

namespace {

// How ping i came, in words; empty when not as the protocol says.
std::string how(const arpma::completion& c, int i) {
  const bool imm_ok = c.imm && *c.imm == static_cast<std::uint32_t>(i);
  if (c.opcode == arpma::wc_opcode::recv_rdma_with_imm && i == pp::write_with_imm_round && imm_ok)
    return "write with immediate data " + std::to_string(*c.imm);
  if (c.opcode == arpma::wc_opcode::recv && i == pp::send_with_imm_round && imm_ok)
    return "send with immediate data " + std::to_string(*c.imm);
  if (c.opcode == arpma::wc_opcode::recv && i != pp::send_with_imm_round && !c.imm) return "send";
  return {};
}

asio::awaitable<bool> pong(const arpma::local_mr& mr, std::array<char, pp::server_size>& memory,
                           arpma::connection& conn) {
  const auto ex = co_await asio::this_coro::executor;
  example::deadline dl(ex);
  // The first receive, posted as soon as the connection exists: a ping that
  // comes before it waits (RNR) until it is there. (The C server posts it
  // before accepting, with rpma_conn_req_recv.)
  example::posted_recv next(ex);
  next.post(conn, mr, pp::recv_offset, pp::message_max);
  for (int i = 1; i <= pp::rounds; ++i) {
    const auto got = co_await next.wait(who, "waiting for a ping");
    if (!got) co_return false;
    const std::size_t at =
        got->opcode == arpma::wc_opcode::recv_rdma_with_imm ? pp::write_offset : pp::recv_offset;
    const std::string text = example::text_at(&memory[at], pp::message_max);
    const std::string way = how(*got, i);
    if (way.empty() || text != "ping " + std::to_string(i)) {
      std::printf("server: unexpected message in round %d: \"%s\"\n", i, text.c_str());
      co_return false;
    }
    std::printf("server: got \"%s\" (%s)\n", text.c_str(), way.c_str());

    // The next receive before the pong: the client's next ping follows it.
    if (i < pp::rounds) next.post(conn, mr, pp::recv_offset, pp::message_max);
    const int n = std::snprintf(&memory[pp::pong_offset], pp::message_max, "pong %d", i);
    if (!co_await example::step(who, "sending the pong", dl, [&](auto token) {
          return conn.async_send(
              arpma::buffer(mr, pp::pong_offset, static_cast<std::size_t>(n) + 1).value(), token);
        }))
      co_return false;
    std::printf("server: sent \"%s\"\n", &memory[pp::pong_offset]);
  }
  std::printf("server: %d round trips done\n", pp::rounds);
  co_return true;
}

asio::awaitable<bool> serve(const arpma::peer& peer, arpma::endpoint& ep) {
  std::array<char, pp::server_size> memory{};
  const arpma::local_mr mr =
      example::reg(who, peer, memory.data(), memory.size(),
                   arpma::mr_usage::recv | arpma::mr_usage::send | arpma::mr_usage::write_dst);
  bool ok = false;
  if (mr) {
    arpma::connection conn = co_await example::accept_next(who, ep, mr.descriptor());
    if (conn) ok = co_await pong(mr, memory, conn);
    // The server sends last, so it disconnects: were the client to
    // disconnect as soon as it has the last pong, the server's send could
    // still be waiting for its acknowledgement and be flushed.
    if (conn && !co_await example::disconnect(who, conn)) ok = false;
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

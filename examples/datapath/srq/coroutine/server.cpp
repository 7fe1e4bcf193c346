// SRQ example, co_await flavour: the server. An arpma::srq with a receive CQ
// of its own; one receive per expected message posted on it (srq.async_recv)
// before any connection exists; CONNECTIONS connections accepted with a
// conn_cfg the SRQ is attached to (their QPs take receives from it); each
// message awaited as its receive's own completion, whose qp_num names the
// connection it came on (protocol.h).
//
// usage: srq_coroutine_server <addr> <port>

#include "../../common.hpp"
#include "../protocol.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
constexpr const char* who = "server";

namespace {

std::array<char, CONNECTIONS * SLOT> memory{};

// The index of the connection whose QP is qp_num, or -1.
int conn_of(const std::vector<arpma::connection>& conns, std::uint32_t qp_num) {
  for (std::size_t i = 0; i < conns.size(); ++i)
    if (conns[i].qp_num() == qp_num) return static_cast<int>(i);
  return -1;
}

asio::awaitable<bool> take_messages(std::vector<example::posted_recv>& recvs,
                                    const std::vector<arpma::connection>& conns) {
  for (std::size_t slot = 0; slot < recvs.size(); ++slot) {
    auto got = co_await recvs[slot].wait(who, "receiving");
    if (!got) co_return false;
    const int from = conn_of(conns, got->qp_num);
    const std::string text = example::text_at(&memory[slot * SLOT], got->byte_len);
    std::array<char, SLOT> expected{};
    std::snprintf(expected.data(), expected.size(), MESSAGE_FORMAT, from);
    if (from < 0 || text != expected.data()) {
      std::printf("%s: unexpected message \"%s\" on qp %u\n", who, text.c_str(), got->qp_num);
      co_return false;
    }
    std::printf("%s: got \"%s\" on connection %d (from the SRQ's receive CQ)\n", who, text.c_str(),
                from);
  }
  co_return true;
}

asio::awaitable<bool> serve(const arpma::peer& peer, arpma::endpoint& ep) {
  const auto ex = co_await asio::this_coro::executor;
  const arpma::local_mr mr =
      example::reg(who, peer, memory.data(), memory.size(), arpma::mr_usage::recv);
  if (!mr) co_return false;
  auto made = arpma::srq::create(ex, peer, {.rq_size = CONNECTIONS, .rcq_size = CONNECTIONS});
  if (!made) {
    std::printf("%s: cannot create the SRQ: %s\n", who, made.error().message().c_str());
    co_return false;
  }
  arpma::srq& srq = made.value();
  std::vector<example::posted_recv> recvs(CONNECTIONS, example::posted_recv(ex));
  for (std::size_t slot = 0; slot < recvs.size(); ++slot)
    recvs[slot].post(srq, mr, slot * SLOT, SLOT);
  std::printf("%s: %d receives posted on the shared receive queue\n", who, CONNECTIONS);

  arpma::conn_cfg cfg;
  srq.attach_to(cfg);
  std::vector<arpma::connection> conns;
  for (int i = 0; i < CONNECTIONS; ++i) {
    conns.push_back(co_await example::accept_next(who, ep, {}, cfg));
    if (!conns.back()) co_return false;
  }
  bool good = co_await take_messages(recvs, conns);
  for (auto& conn : conns) good = co_await example::wait_closed(who, conn) && good;
  co_return good;
}

}  // namespace

int main(int argc, char* argv[]) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line visible at once, also in a pipe
  const example::args a = example::parse_args(argc, argv, true);
  auto peer = example::make_peer(who, a.addr, arpma::ibv_context_type::local);
  if (!peer) return EXIT_FAILURE;
  asio::io_context io;
  auto ep = example::listen(who, io, *peer, a);
  if (!ep) return EXIT_FAILURE;
  return example::run(who, io, serve(*peer, *ep));
}

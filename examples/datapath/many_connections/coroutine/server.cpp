// Many-connections example, co_await flavour: the server. One io_context,
// one thread: it takes 8 connection requests and runs one coroutine per
// connection, all at once. Each accepts with the region's descriptor and
// the connection's slot as private data, waits for its client to write and
// disconnect, and checks the slot. Every wait is bounded; the server ends
// when all 8 are done.
//
// usage: many_connections_coroutine_server <addr> <port>

#include "../../common.hpp"
#include "../protocol.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace mc = many_connections;
constexpr const char* who = "server";

namespace {

struct shared {
  explicit shared(const asio::any_io_executor& ex) : all_done(ex) {}
  std::vector<char> memory = std::vector<char>(mc::connections * mc::slot_size);
  arpma::local_mr mr;
  int open = 0;  // connections established and not yet closed
  int peak = 0;  // the most open at once
  int started = 0;
  int done = 0;
  int good = 0;
  asio::steady_timer all_done;
};

// One connection, start to end; the slot's texts once the client is gone.
asio::awaitable<bool> session(std::shared_ptr<shared> sp, arpma::conn_req req, int slot) {
  shared& s = *sp;
  // What the shared helpers print starts with this: "server: slot 3: ...".
  const std::string me = "server: slot " + std::to_string(slot);
  const char* who = me.c_str();
  std::array<std::uint8_t, mc::pdata_size> pdata{};
  const arpma::mr_descriptor desc = s.mr.descriptor();
  std::copy(desc.begin(), desc.end(), pdata.begin());
  pdata.back() = static_cast<std::uint8_t>(slot);
  arpma::connection conn = co_await example::accept(who, std::move(req), pdata);
  if (!conn) co_return false;
  s.peak = std::max(s.peak, ++s.open);
  std::printf("%s: connections open now: %d\n", who, s.open);
  const bool closed = co_await example::wait_closed(who, conn);
  --s.open;
  if (!closed) co_return false;

  const char* base = &s.memory[static_cast<std::size_t>(slot) * mc::slot_size];
  std::string line;
  bool all_there = true;
  for (int j = 0; j < mc::messages; ++j) {
    const std::string text =
        example::text_at(base + static_cast<std::size_t>(j) * mc::message_size, mc::message_size);
    all_there = all_there && !text.empty();
    line += (j ? ", \"" : "\"") + text + "\"";
  }
  std::printf("%s: holds %s\n", who, line.c_str());
  co_return all_there;
}

asio::awaitable<bool> serve(const arpma::peer& peer, arpma::endpoint& ep) {
  const auto ex = co_await asio::this_coro::executor;
  // Shared with the sessions, which may outlive this coroutine when it gives up.
  const auto sp = std::make_shared<shared>(ex);
  shared& s = *sp;
  s.mr = example::reg(who, peer, s.memory.data(), s.memory.size(),
                      arpma::mr_usage::write_dst | arpma::mr_usage::flush_type_visibility);
  bool ok = static_cast<bool>(s.mr);
  example::deadline dl(ex);
  for (; ok && s.started < mc::connections; ++s.started) {
    auto [ec, req] =
        co_await ep.async_next_conn_req({}, dl.arm(example::quiet_limit, example::awaitable_tuple));
    dl.disarm();
    if (ec) {
      example::report(who, "waiting for a connection request", ec, dl);
      ok = false;
      break;
    }
    // Each connection runs on its own; this loop goes on taking requests.
    asio::co_spawn(ex, session(sp, std::move(req), s.started),
                   [sp](const std::exception_ptr& e, bool good) {
                     if (!e && good) ++sp->good;
                     if (++sp->done == sp->started) sp->all_done.cancel();
                   });
  }
  (void)ep.shutdown();  // no more requests to take

  // Until every session has ended (each bounds its own waits; this one is
  // a backstop).
  if (s.done < s.started) {
    s.all_done.expires_after(4 * example::quiet_limit);
    co_await s.all_done.async_wait(example::awaitable_tuple);
  }
  if (s.done < s.started) {
    std::printf("server: %d connections still running, giving up\n", s.started - s.done);
    co_return false;
  }
  std::printf("server: %d connections served on one thread, at most %d open at once, %d good\n",
              s.started, s.peak, s.good);
  co_return ok&& s.good == mc::connections;
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

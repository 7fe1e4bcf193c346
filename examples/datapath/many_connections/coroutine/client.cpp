// Many-connections example, co_await flavour: the client. One process, one
// io_context, 8 connections to the server, one coroutine each, all at once.
// Each connects, learns the server's region and its slot from the accept's
// private data, waits until all 8 are connected (so the server has them all
// open together), writes 3 messages into its slot, flushes the slot to
// visibility and disconnects. Every wait is bounded. All 8 connections put
// their CQs on one arpma::completion_channel: one fd for their completions
// instead of one each, each write still completing in its own coroutine.
//
// usage: many_connections_coroutine_client <addr> <port>

#include "../../common.hpp"
#include "../protocol.hpp"

#include <arpma/completion_channel.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

namespace asio = boost::asio;
namespace mc = many_connections;
constexpr const char* who = "client";

namespace {

struct shared {
  explicit shared(const asio::any_io_executor& ex) : all_connected(ex), all_done(ex) {}
  int connected = 0;
  int done = 0;
  int good = 0;
  asio::steady_timer all_connected;
  asio::steady_timer all_done;
  arpma::conn_cfg cfg;  ///< on `channel`
  arpma::completion_channel channel;
};

// Waits until `timer` is cancelled because `count` reached the number of
// connections; false when the timer expired first. The timer is set once,
// before the connections start: setting it again here would cancel the
// waits of the connections already waiting.
asio::awaitable<bool> all_reached(asio::steady_timer& timer, const int& count) {
  if (count < mc::connections) co_await timer.async_wait(example::awaitable_tuple);
  co_return count == mc::connections;
}

asio::awaitable<bool> one_connection(std::shared_ptr<shared> s, const arpma::peer& peer,
                                     const example::args& a, int id) {
  example::deadline dl(co_await asio::this_coro::executor);
  // What the shared helpers print starts with this: "client: connection 3: ...".
  const std::string me = "client: connection " + std::to_string(id);
  const char* who = me.c_str();
  std::array<char, mc::slot_size> buf{};
  const arpma::local_mr mr =
      example::reg(who, peer, buf.data(), buf.size(), arpma::mr_usage::write_src);
  if (!mr) co_return false;
  arpma::connection conn = co_await example::connect(who, peer, a, s->cfg);
  if (!conn) co_return false;
  const auto pdata = conn.private_data();
  if (pdata.size() < mc::pdata_size) {
    std::printf("%s: no slot in the private data\n", who);
    co_return false;
  }
  auto remote = arpma::remote_mr::from_descriptor(pdata);
  if (!remote) {
    std::printf("%s: bad region descriptor\n", who);
    co_return false;
  }
  const int slot = pdata[mc::pdata_size - 1];
  std::printf("%s: established, slot %d\n", who, slot);
  if (++s->connected == mc::connections) s->all_connected.cancel();
  if (!co_await all_reached(s->all_connected, s->connected)) {
    std::printf("%s: not all connections came up within 10 s\n", who);
    co_return false;
  }

  // The slot is the server's word: a slice of its region, checked here.
  const auto target =
      arpma::buffer(remote.value(), static_cast<std::size_t>(slot) * mc::slot_size, mc::slot_size);
  if (!target) {
    std::printf("%s: slot %d is outside the server's region\n", who, slot);
    co_return false;
  }
  for (int j = 0; j < mc::messages; ++j) {
    const std::size_t at = static_cast<std::size_t>(j) * mc::message_size;
    const int n = std::snprintf(&buf[at], mc::message_size, "connection %d, message %d", id, j + 1);
    const std::size_t len = static_cast<std::size_t>(n) + 1;  // with its NUL
    if (!co_await example::step(who, "writing", dl, [&](auto token) {
          return conn.async_write(target.value().slice(at, len).value(),
                                  arpma::buffer(mr, at, len).value(), token);
        }))
      co_return false;
  }
  if (!co_await example::step(who, "flushing", dl, [&](auto token) {
        return conn.async_flush(target.value(), arpma::flush_type::visibility, token);
      }))
    co_return false;
  std::printf("%s: wrote %d messages into slot %d and flushed them\n", who, mc::messages, slot);
  co_return co_await example::disconnect(who, conn);
}

asio::awaitable<bool> run_client(const arpma::peer& peer, const example::args& a) {
  const auto ex = co_await asio::this_coro::executor;
  // Shared with the connections, which may outlive this coroutine when it gives up.
  const auto s = std::make_shared<shared>(ex);
  auto channel = arpma::completion_channel::create(ex, peer);
  if (!channel) {
    std::printf("client: creating the completion channel: %s\n", channel.error().message().c_str());
    co_return false;
  }
  s->channel = std::move(channel).value();
  s->channel.attach_to(s->cfg);
  std::printf("client: opening %d connections to %s:%s, their completions on one channel\n",
              mc::connections, a.addr.c_str(), a.port.c_str());
  s->all_connected.expires_after(example::quiet_limit);
  for (int id = 1; id <= mc::connections; ++id)
    asio::co_spawn(ex, one_connection(s, peer, a, id), [s](const std::exception_ptr& e, bool good) {
      if (!e && good) ++s->good;
      if (++s->done == mc::connections) s->all_done.cancel();
    });
  // Until every connection has ended (each bounds its own waits; this one is
  // a backstop).
  if (s->done < mc::connections) {
    s->all_done.expires_after(4 * example::quiet_limit);
    co_await s->all_done.async_wait(example::awaitable_tuple);
  }
  std::printf("client: %d of %d connections done, %zu CQs left on the channel\n", s->good,
              mc::connections, s->channel.cq_count());
  co_return s->good == mc::connections;
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

// Zero heap allocations per arpma::stream read and write on the application's
// thread once warm (issue 21): a 64-byte ping-pong of async_write_some and
// async_read_some between two streams on one loop, as coroutines, on
// the provider the environment chooses (the soft provider's progress
// thread's allocations are its own; only this thread's are counted).
#include "support/counting_alloc.hpp"

#include "arpma/stream.hpp"
#include "support/stream_pair.hpp"
#include "support/wait.hpp"

#include <gtest/gtest.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

constexpr int warm = 200;
constexpr int counted = 2000;

using arpma::test::test_addr;

class stream_alloc : public ::testing::Test {
 protected:
  void SetUp() override {
    if (arpma::test::iwarp()) GTEST_SKIP() << arpma::test::iwarp_has_no_streams;
    auto dev = arpma::get_ibv_context(addr, arpma::ibv_context_type::local);
    ASSERT_TRUE(dev);
    peer.emplace(arpma::peer::create(dev.value()).value());
    auto ep = arpma::endpoint::listen(io.get_executor(), *peer, addr, "0");
    ASSERT_TRUE(ep);
    endpoint = std::move(ep).value();
    arpma::async_accept_stream(endpoint, *peer, {}, [&](arpma::error_code ec, arpma::stream s) {
      EXPECT_FALSE(ec);
      server = std::move(s);
    });
    arpma::async_connect_stream(io.get_executor(), *peer, addr, std::to_string(endpoint.port()), {},
                                [&](arpma::error_code ec, arpma::stream s) {
                                  EXPECT_FALSE(ec);
                                  client = std::move(s);
                                });
    ASSERT_TRUE(arpma::test::run_until(io, [&] { return server && client; }));
  }

  // The server echoes every 64 bytes back, forever (until the stream goes).
  asio::awaitable<void> echo() {
    std::array<char, 64> buf{};
    for (;;) {
      auto [ec, n] =
          co_await asio::async_read(server, asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      co_await asio::async_write(server, asio::buffer(buf, n), asio::use_awaitable);
    }
  }

  // Counts this thread's allocations over the rounds after `warm`, from
  // inside the one coroutine: spawning it takes blocks from Asio's cache (its
  // frame, its entry point's, the first dispatch) that its first round then
  // refills, which is setup, not the data path.
  asio::awaitable<void> ping(std::uint64_t& allocations) {
    std::array<char, 64> buf{};
    std::uint64_t before = 0;
    for (int i = 0; i < warm + counted; ++i) {
      if (i == warm) before = arpma::test::thread_allocations();
      co_await client.async_write_some(asio::buffer(buf), asio::use_awaitable);
      co_await asio::async_read(client, asio::buffer(buf), asio::use_awaitable);
    }
    allocations = arpma::test::thread_allocations() - before;
  }

  std::string addr = test_addr();
  std::optional<arpma::peer> peer;
  asio::io_context io;
  arpma::endpoint endpoint;
  arpma::stream server;
  arpma::stream client;
};

TEST_F(stream_alloc, a_warm_ping_pong_allocates_nothing_on_the_loop_thread) {
  asio::co_spawn(io, echo(), asio::detached);
  bool done = false;
  std::uint64_t allocations = 0;
  asio::co_spawn(io, ping(allocations), [&](const std::exception_ptr& e) {
    EXPECT_FALSE(e);
    done = true;
  });
  ASSERT_TRUE(arpma::test::run_until(io, [&] { return done; }));
  std::printf("stream-alloc: %llu allocations in %d round trips (2 writes, 2+ reads each)\n",
              static_cast<unsigned long long>(allocations), counted);
  EXPECT_EQ(allocations, 0U);
}

}  // namespace

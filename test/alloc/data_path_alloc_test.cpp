// Zero heap allocations per data-path operation on the application's thread
// once warm (issue 15): co_await async_write, a callback loop whose handler
// has an associated allocator, co_await cq::async_wait with poll, and
// rpma_write + rpma_cq_get_wc, on the
// instant provider (every work request completes at once, so only arpma's
// own code runs). Allocations are counted at the replaced malloc family, where
// operator new and Asio's own aligned_alloc both end.
#include "support/counting_alloc.hpp"

#include "arpma/completion_channel.hpp"
#include "arpma/conn_req.hpp"
#include "arpma/connection.hpp"
#include "arpma/cq.hpp"
#include "arpma/endpoint.hpp"
#include "arpma/mr.hpp"
#include "arpma/peer.hpp"
#include "support/block_allocator.hpp"
#include "support/connected_pair.hpp"
#include "support/instant_provider.hpp"

#include <librpma.h>

#include <gtest/gtest.h>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace asio = boost::asio;

namespace {

constexpr int warm = 200;
constexpr int counted = 2000;
constexpr std::size_t message = 64;

class data_path_alloc : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = arpma::peer::create(prov.cm().device());
    ASSERT_TRUE(p);
    peer.emplace(std::move(p).value());
    auto m = arpma::local_mr::reg(*peer, memory.data(), memory.size(),
                                  arpma::mr_usage::write_src | arpma::mr_usage::write_dst);
    ASSERT_TRUE(m);
    mr.emplace(std::move(m).value());
    remote.emplace(arpma::remote_mr::from_descriptor(mr->descriptor()).value());
    conn = connect({});
    ASSERT_TRUE(conn);
  }

  arpma::connection connect(const arpma::conn_cfg& cfg) {
    arpma::connection made;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          auto req = co_await arpma::async_conn_req_new(*peer, "192.0.2.1", "7204", cfg,
                                                        asio::use_awaitable);
          made = co_await req.async_connect({}, asio::use_awaitable);
        },
        asio::detached);
    io.run();
    io.restart();
    return made;
  }
  void TearDown() override {
    (void)conn.close();
    mr.reset();
    peer.reset();
  }

  // Allocations the application's thread made during `counted` operations
  // of `loop`, after `warm` of them.
  template <class Loop>
  std::uint64_t allocations_of(Loop loop) {
    std::optional<std::uint64_t> before;
    std::uint64_t after = 0;
    loop([&](int i) {
      if (i == warm) before = arpma::test::thread_allocations();
      if (i == warm + counted) after = arpma::test::thread_allocations();
    });
    EXPECT_TRUE(before.has_value());
    return after - before.value_or(after);
  }

  // Checks that `counted` iterations of `step` (a coroutine returning
  // awaitable<bool>; false ends the loop early) allocate nothing.
  template <class Step>
  void coawait_loop(Step step) {
    int done = 0;
    const auto allocs = allocations_of([&](auto mark) {
      asio::co_spawn(
          io,
          [&]() -> asio::awaitable<void> {
            for (int i = 0; i <= warm + counted; ++i) {
              mark(i);
              if (!co_await step()) co_return;
              ++done;
            }
          },
          asio::detached);
      io.run();
      io.restart();
    });
    EXPECT_EQ(done, warm + counted + 1);
    EXPECT_EQ(allocs, 0U);
  }

  void coawait(bool busy) { coawait_on(conn, busy); }

  void coawait_on(arpma::connection& c, bool busy) {
    c.set_busy_poll(std::chrono::microseconds(busy ? 1000 : 0));
    coawait_loop([&]() -> asio::awaitable<bool> {
      co_await c.async_write(arpma::buffer(*remote, 0, message).value(),
                             arpma::buffer(*mr, 0, message).value(), asio::use_awaitable);
      co_return true;
    });
  }

  arpma::test::instant_provider prov;
  arpma::provider::scoped_override use{prov};
  asio::io_context io;
  std::optional<arpma::peer> peer;
  std::vector<char> memory = std::vector<char>(4096);
  std::optional<arpma::local_mr> mr;
  std::optional<arpma::remote_mr> remote;
  arpma::connection conn;
};

TEST_F(data_path_alloc, co_await_async_write_busy_poll_allocates_nothing) { coawait(true); }

TEST_F(data_path_alloc, co_await_async_write_fd_mode_allocates_nothing) { coawait(false); }

// The CQs of a connection on a shared completion_channel: the channel's own
// wait on its fd is the one queued operation.
TEST_F(data_path_alloc, co_await_async_write_on_a_shared_channel_allocates_nothing) {
  auto channel = arpma::completion_channel::create(io.get_executor(), *peer);
  ASSERT_TRUE(channel);
  arpma::conn_cfg cfg;
  auto shared = connect(channel.value().attach_to(cfg));
  ASSERT_TRUE(shared);
  coawait_on(shared, false);
  (void)shared.close();
}

using arpma::test::block_allocator;
using arpma::test::one_block;

// A program taking its completions itself: post, co_await cq::async_wait,
// poll. The CQ's waiter is made by the first wait and kept.
TEST_F(data_path_alloc, co_await_cq_async_wait_and_poll_allocate_nothing) {
  auto cq = conn.completion_queue();
  std::array<arpma::completion, 4> wcs{};
  coawait_loop([&]() -> asio::awaitable<bool> {
    if (conn.post_write(arpma::buffer(*remote, 0, message).value(),
                        arpma::buffer(*mr, 0, message).value(), 7, true))
      co_return false;
    co_await cq.async_wait(asio::use_awaitable);
    std::size_t got = 0;
    for (auto n = cq.poll(wcs); n && n.value() > 0; n = cq.poll(wcs)) got += n.value();
    co_return got == 1 && !wcs[0].status;
  });
}

TEST_F(data_path_alloc, callbacks_take_their_storage_from_the_handlers_allocator) {
  one_block block;
  int i = 0;
  std::optional<std::uint64_t> before;
  std::uint64_t after = 0;
  std::function<void()> start = [&] {
    if (i == warm) before = arpma::test::thread_allocations();
    if (i == warm + counted) {
      after = arpma::test::thread_allocations();
      return;
    }
    ++i;
    conn.async_write(arpma::buffer(*remote, 0, message).value(),
                     arpma::buffer(*mr, 0, message).value(),
                     asio::bind_allocator(block_allocator<void>(&block),
                                          [&](arpma::error_code ec, arpma::completion) {
                                            EXPECT_FALSE(ec) << ec.message();
                                            start();
                                          }));
  };
  start();
  io.run();
  ASSERT_TRUE(before.has_value());
  EXPECT_EQ(after - *before, 0U);
  EXPECT_EQ(block.taken, warm + counted);  // every operation lived in the handler's block
}

TEST_F(data_path_alloc, rpma_write_and_rpma_cq_get_wc_allocate_nothing) {
  ibv_context* dev = nullptr;
  ASSERT_EQ(rpma_utils_get_ibv_context("192.0.2.1", RPMA_UTIL_IBV_CONTEXT_REMOTE, &dev), 0);
  rpma_peer* cpeer = nullptr;
  ASSERT_EQ(rpma_peer_new(dev, &cpeer), 0);
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(cpeer, "192.0.2.1", "7204", nullptr, &req), 0);
  rpma_conn* cconn = nullptr;
  ASSERT_EQ(rpma_conn_req_connect(&req, nullptr, &cconn), 0);
  rpma_conn_event ev = RPMA_CONN_UNDEFINED;
  ASSERT_EQ(rpma_conn_next_event(cconn, &ev), 0);
  rpma_mr_local* cmr = nullptr;
  ASSERT_EQ(rpma_mr_reg(cpeer, memory.data(), memory.size(), RPMA_MR_USAGE_WRITE_SRC, &cmr), 0);
  rpma_mr_remote* cremote = nullptr;
  const auto desc = mr->descriptor();
  ASSERT_EQ(rpma_mr_remote_from_descriptor(desc.data(), desc.size(), &cremote), 0);
  rpma_cq* cq = nullptr;
  ASSERT_EQ(rpma_conn_get_cq(cconn, &cq), 0);
  std::uint64_t before = 0;
  for (int i = 0; i < warm + counted; ++i) {
    if (i == warm) before = arpma::test::thread_allocations();
    ASSERT_EQ(rpma_write(cconn, cremote, 0, cmr, 0, message, RPMA_F_COMPLETION_ALWAYS, nullptr), 0);
    ibv_wc wc{};
    ASSERT_EQ(rpma_cq_get_wc(cq, 1, &wc, nullptr), 0);
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
  }
  EXPECT_EQ(arpma::test::thread_allocations() - before, 0U);
  EXPECT_EQ(rpma_mr_remote_delete(&cremote), 0);
  EXPECT_EQ(rpma_mr_dereg(&cmr), 0);
  EXPECT_EQ(rpma_conn_disconnect(cconn), 0);
  EXPECT_EQ(rpma_conn_next_event(cconn, &ev), 0);
  EXPECT_EQ(rpma_conn_delete(&cconn), 0);
  EXPECT_EQ(rpma_peer_delete(&cpeer), 0);
}

// The soft provider on loopback: its post path (the frame built and written
// on the application's thread) and its poll allocate nothing once warm.
TEST(data_path_alloc_soft, co_await_async_write_on_the_soft_provider_allocates_nothing) {
  asio::io_context io;
  auto dev = arpma::get_ibv_context(arpma::test::test_addr(), arpma::ibv_context_type::local);
  ASSERT_TRUE(dev) << dev.error().message();
  auto peer = arpma::peer::create(dev.value()).value();
  auto ep = arpma::endpoint::listen(io.get_executor(), peer, arpma::test::test_addr(), "0");
  ASSERT_TRUE(ep) << ep.error().message();
  auto pair = arpma::test::connect_pair(io, peer, ep.value(), {}, {});
  ASSERT_TRUE(pair.client && pair.server);
  std::vector<char> theirs(4096);
  std::vector<char> mine(4096, 's');
  auto dst =
      arpma::local_mr::reg(peer, theirs.data(), theirs.size(), arpma::mr_usage::write_dst).value();
  auto src =
      arpma::local_mr::reg(peer, mine.data(), mine.size(), arpma::mr_usage::write_src).value();
  const auto remote = arpma::remote_mr::from_descriptor(dst.descriptor()).value();
  pair.client.set_busy_poll(std::chrono::microseconds(1000));
  std::optional<std::uint64_t> before;
  std::uint64_t after = 0;
  int done = 0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i <= warm + counted; ++i) {
          if (i == warm) before = arpma::test::thread_allocations();
          if (i == warm + counted) after = arpma::test::thread_allocations();
          co_await pair.client.async_write(arpma::buffer(remote, 0, message).value(),
                                           arpma::buffer(src, 0, message).value(),
                                           asio::use_awaitable);
          ++done;
        }
      },
      asio::detached);
  io.restart();
  io.run_for(std::chrono::seconds(60));
  ASSERT_EQ(done, warm + counted + 1);
  ASSERT_TRUE(before.has_value());
  EXPECT_EQ(after - *before, 0U);
  EXPECT_EQ(theirs[0], 's');
}

}  // namespace

// A connection's executor (issue 15): handlers run on their associated
// executor with work counted there, and a strand per connection serializes
// that connection's data path on an io_context run by several threads.
// Soft provider on loopback (the verbs provider in the Soft-RoCE guest).
#include "arpma/connection.hpp"

#include "arpma/cq.hpp"
#include "arpma/endpoint.hpp"
#include "arpma/mr.hpp"
#include "arpma/peer.hpp"
#include "support/connected_pair.hpp"
#include "support/transport.hpp"

#include <gtest/gtest.h>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace executor_integration_test {

namespace asio = boost::asio;

namespace {

constexpr std::size_t slot = 64;

class executor_integration : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = arpma::get_ibv_context(arpma::test::test_addr(), arpma::ibv_context_type::local);
    ASSERT_TRUE(dev) << dev.error().message();
    peer.emplace(arpma::peer::create(dev.value()).value());
    auto ep = arpma::endpoint::listen(io.get_executor(), *peer, arpma::test::test_addr(), "0");
    ASSERT_TRUE(ep) << ep.error().message();
    endpoint = std::move(ep).value();
  }

  asio::io_context io;
  std::optional<arpma::peer> peer;
  arpma::endpoint endpoint;
};

TEST_F(executor_integration, a_connection_has_the_executor_it_was_connected_on) {
  auto pair = arpma::test::connect_pair(io, *peer, endpoint, {}, {});
  ASSERT_TRUE(pair.client && pair.server);
  EXPECT_TRUE(pair.client.get_executor() == arpma::connection::executor_type(io.get_executor()));
  EXPECT_FALSE(static_cast<bool>(arpma::connection().get_executor()));
  const arpma::connection::executor_type loop(io.get_executor());
  EXPECT_TRUE(endpoint.get_executor() == loop);
  EXPECT_TRUE(pair.client.completion_queue().get_executor() == loop);
  EXPECT_FALSE(static_cast<bool>(arpma::endpoint().get_executor()));
  EXPECT_FALSE(static_cast<bool>(arpma::cq().get_executor()));
  EXPECT_FALSE(static_cast<bool>(arpma::conn_req().get_executor()));
}

// An event operation's handler without an executor of its own runs on the
// connection's (here a strand), not on the shared event channel's.
TEST_F(executor_integration, a_handler_without_an_executor_runs_on_the_connections) {
  auto strand = asio::make_strand(io);
  auto pair = arpma::test::connect_pair(io, *peer, endpoint, {}, {}, strand);
  ASSERT_TRUE(pair.client && pair.server);
  auto& client = pair.client;
  auto& server = pair.server;
  bool on_strand = false;
  bool ended = false;
  client.async_next_event([&](arpma::error_code, arpma::conn_event) {
    on_strand = strand.running_in_this_thread();
    ended = true;
  });
  ASSERT_FALSE(server.disconnect());
  ASSERT_TRUE(arpma::test::run_until(io, [&] { return ended; }));
  EXPECT_TRUE(on_strand);
}

TEST_F(executor_integration, a_handler_runs_on_its_own_executor_which_counts_the_work) {
  auto pair = arpma::test::connect_pair(io, *peer, endpoint, {}, {});
  ASSERT_TRUE(pair.client && pair.server);
  std::vector<char> theirs(slot);
  std::vector<char> mine(slot, 'w');
  auto dst = arpma::local_mr::reg(*peer, theirs.data(), slot, arpma::mr_usage::write_dst).value();
  auto src = arpma::local_mr::reg(*peer, mine.data(), slot, arpma::mr_usage::write_src).value();
  const auto remote = arpma::remote_mr::from_descriptor(dst.descriptor()).value();

  // `other` has no work but the handler: its run() returns only after it ran.
  asio::io_context other;
  std::atomic<bool> ran{false};
  std::atomic<bool> on_other{false};
  std::atomic<bool> ran_before_run_returned{false};
  pair.client.async_write(arpma::buffer(remote, 0, slot).value(),
                          arpma::buffer(src, 0, slot).value(),
                          asio::bind_executor(other, [&](arpma::error_code ec, arpma::completion) {
                            EXPECT_FALSE(ec) << ec.message();
                            on_other = other.get_executor().running_in_this_thread();
                            ran = true;
                          }));
  std::thread runner([&] {
    other.run();
    ran_before_run_returned = ran.load();
  });
  ASSERT_TRUE(arpma::test::run_until(io, [&] { return ran.load(); }));
  runner.join();
  EXPECT_TRUE(on_other);
  EXPECT_TRUE(ran_before_run_returned);
  EXPECT_EQ(theirs, mine);
}

// 4 threads run one io_context; each of 64 connections' data operations and
// handlers are serialized by its own strand (set up and torn down on one
// thread here; the next test runs the whole life on the strands).
TEST_F(executor_integration, a_strand_per_connection_serializes_its_data_path) {
  const int connections = arpma::test::connections_on_this_device(64);
  constexpr int rounds = 20;
  struct conn_under_test {
    std::optional<asio::strand<asio::io_context::executor_type>> strand;
    arpma::test::connected_pair pair;
    std::vector<char> theirs = std::vector<char>(slot);
    std::vector<char> mine = std::vector<char>(slot);
    std::optional<arpma::local_mr> dst;
    std::optional<arpma::local_mr> src;
    std::optional<arpma::remote_mr> remote;
    int done = 0;
    bool off_strand = false;
  };
  std::vector<std::unique_ptr<conn_under_test>> conns;
  for (int i = 0; i < connections; ++i) {
    auto c = std::make_unique<conn_under_test>();
    c->strand.emplace(asio::make_strand(io));
    c->pair = arpma::test::connect_pair(io, *peer, endpoint, {}, {}, *c->strand);
    ASSERT_TRUE(c->pair.client && c->pair.server);
    ASSERT_TRUE(c->pair.client.get_executor() == arpma::connection::executor_type(*c->strand));
    c->dst.emplace(arpma::local_mr::reg(*peer, c->theirs.data(), slot,
                                        arpma::mr_usage::write_dst | arpma::mr_usage::read_src)
                       .value());
    c->src.emplace(arpma::local_mr::reg(*peer, c->mine.data(), slot,
                                        arpma::mr_usage::write_src | arpma::mr_usage::read_dst)
                       .value());
    c->remote.emplace(arpma::remote_mr::from_descriptor(c->dst->descriptor()).value());
    conns.push_back(std::move(c));
  }
  std::atomic<int> finished{0};
  // Owned here: a step that held itself would never be freed.
  std::vector<std::unique_ptr<std::function<void(int)>>> steps;
  for (auto& c : conns) {
    // A write then a read back, `rounds` times; every handler checks its strand.
    auto* step = steps.emplace_back(std::make_unique<std::function<void(int)>>()).get();
    *step = [&, raw = c.get(), step](int i) {
      if (i == rounds) {
        ++finished;
        return;
      }
      raw->mine[0] = static_cast<char>(i);
      raw->pair.client.async_write(
          arpma::buffer(*raw->remote, 0, slot).value(), arpma::buffer(*raw->src, 0, slot).value(),
          [&, raw, step, i](arpma::error_code ec, auto) {
            if (ec || !raw->strand->running_in_this_thread()) raw->off_strand = true;
            raw->pair.client.async_read(arpma::buffer(*raw->src, 0, slot).value(),
                                        arpma::buffer(*raw->remote, 0, slot).value(),
                                        [&, raw, step, i](arpma::error_code ec2, auto) {
                                          if (ec2 || !raw->strand->running_in_this_thread())
                                            raw->off_strand = true;
                                          ++raw->done;
                                          (*step)(i + 1);
                                        });
          });
    };
    asio::post(*c->strand, [step] { (*step)(0); });
  }
  io.restart();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&] { io.run_for(std::chrono::seconds(30)); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(finished.load(), connections);
  for (auto& c : conns) {
    EXPECT_FALSE(c->off_strand);
    EXPECT_EQ(c->done, rounds);
    (void)c->pair.client.close();
    (void)c->pair.server.close();
  }
}

// The whole life of each connection on its own strand, 4 threads running the
// io_context: request, connect, accept, data, events, disconnect. The
// shared event channel hands each object its events on that object's
// strand (TSan: no race on any object's state).
TEST_F(executor_integration, a_strand_per_connection_serializes_its_whole_life) {
  constexpr int connections = 8;
  constexpr int writes = 20;
  std::atomic<int> off_strand{0};
  std::atomic<int> clients_done{0};
  std::atomic<int> servers_done{0};
  std::vector<char> theirs(slot * connections);
  auto dst =
      arpma::local_mr::reg(*peer, theirs.data(), theirs.size(), arpma::mr_usage::write_dst).value();
  const auto remote = arpma::remote_mr::from_descriptor(dst.descriptor()).value();
  std::vector<std::vector<char>> mine(connections, std::vector<char>(slot, 'm'));
  auto check = [&](const auto& strand) {
    if (!strand.running_in_this_thread()) ++off_strand;
  };
  // The server: an endpoint on a strand, each accepted request on a strand of its own.
  auto accept_strand = asio::make_strand(io);
  endpoint = arpma::endpoint::listen(accept_strand, *peer, arpma::test::test_addr(), "0").value();
  const auto port = std::to_string(endpoint.port());
  asio::co_spawn(
      accept_strand,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < connections; ++i) {
          auto in = co_await endpoint.async_next_conn_req({}, asio::use_awaitable);
          check(accept_strand);
          auto strand = asio::make_strand(io);
          asio::co_spawn(
              strand,
              [&, strand, in = std::move(in)]() mutable -> asio::awaitable<void> {
                auto conn = co_await in.async_connect({}, asio::use_awaitable);
                check(strand);
                for (;;) {
                  const auto ev = co_await conn.async_next_event(asio::use_awaitable);
                  check(strand);
                  if (ev == arpma::conn_event::closed) break;
                }
                (void)conn.close();
                ++servers_done;
              },
              asio::detached);
        }
      },
      asio::detached);
  for (int i = 0; i < connections; ++i) {
    auto strand = asio::make_strand(io);
    asio::co_spawn(
        strand,
        [&, strand, i]() -> asio::awaitable<void> {
          auto req = co_await arpma::async_conn_req_new(*peer, arpma::test::test_addr(), port, {},
                                                        asio::use_awaitable);
          check(strand);
          auto conn = co_await req.async_connect({}, asio::use_awaitable);
          check(strand);
          auto src =
              arpma::local_mr::reg(*peer, mine[i].data(), slot, arpma::mr_usage::write_src).value();
          for (int w = 0; w < writes; ++w) {
            co_await conn.async_write(
                arpma::buffer(remote, static_cast<std::size_t>(i) * slot, slot).value(),
                arpma::buffer(src, 0, slot).value(), asio::use_awaitable);
            check(strand);
          }
          co_await conn.async_disconnect(asio::use_awaitable);
          check(strand);
          (void)conn.close();
          ++clients_done;
        },
        [](const std::exception_ptr& e) {
          if (!e) return;
          try {
            std::rethrow_exception(e);
          } catch (const std::exception& x) {
            ADD_FAILURE() << "client failed: " << x.what();
          }
        });
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while ((clients_done < connections || servers_done < connections) &&
             std::chrono::steady_clock::now() < end)
        io.run_for(std::chrono::milliseconds(10));
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(clients_done.load(), connections);
  EXPECT_EQ(servers_done.load(), connections);
  EXPECT_EQ(off_strand.load(), 0);
  EXPECT_EQ(theirs, std::vector<char>(slot * connections, 'm'));
}

}  // namespace

}  // namespace executor_integration_test

// The C++ API with several threads running one io_context, as
// THREAD_SAFETY.md allows: every arpma object is made on one strand of it and
// every operation and handler runs on that strand, while four threads run the
// io_context (so consecutive handlers run on different threads). Under the
// tsan preset this is the race check of the core's hand-offs between
// threads; everywhere it checks the results.
#include "arpma/connection.hpp"

#include "arpma/conn_req.hpp"
#include "arpma/endpoint.hpp"
#include "arpma/error.hpp"
#include "arpma/mr.hpp"
#include "arpma/peer.hpp"
#include "support/test_addr.hpp"

#include <gtest/gtest.h>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace threads_integration_test {

using arpma::test::test_addr;
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t region = 1 << 16;
constexpr int threads = 4;

// Connects `pairs` connections, then on each: `ops` writes of a pattern, a
// read of it back and a send/recv, all in flight together per connection;
// checks every byte and disconnects. Everything runs on `strand`.
asio::awaitable<int> exchange(asio::strand<asio::io_context::executor_type> strand,
                              arpma::peer& peer, const std::string& addr, int pairs, int ops) {
  std::vector<char> server_memory(region, 0);
  std::vector<char> client_memory(region, 0);
  auto s = arpma::local_mr::reg(
      peer, server_memory.data(), region,
      arpma::mr_usage::write_dst | arpma::mr_usage::read_src | arpma::mr_usage::recv);
  auto c = arpma::local_mr::reg(
      peer, client_memory.data(), region,
      arpma::mr_usage::write_src | arpma::mr_usage::read_dst | arpma::mr_usage::send);
  EXPECT_TRUE(s && c);
  if (!s || !c) co_return 0;
  auto ep = arpma::endpoint::listen(strand, peer, addr, "0");
  EXPECT_TRUE(ep) << ep.error().message();
  if (!ep) co_return 0;
  arpma::endpoint endpoint = std::move(ep).value();
  const auto desc = s.value().descriptor();
  const std::string port = std::to_string(endpoint.port());
  arpma::conn_cfg cfg;
  cfg.sq_size = static_cast<std::uint32_t>(ops + 2);
  cfg.cq_size = static_cast<std::uint32_t>(ops + 2);

  int verified = 0;
  for (int p = 0; p < pairs; ++p) {
    std::optional<arpma::connection> server;
    endpoint.async_next_conn_req(
        cfg, asio::bind_executor(strand, [&](std::error_code ec, arpma::conn_req in) {
          EXPECT_FALSE(ec);
          if (ec) return;
          in.async_connect(
              desc, asio::bind_executor(strand, [&](std::error_code ec2, arpma::connection conn) {
                EXPECT_FALSE(ec2) << ec2.message();
                server.emplace(std::move(conn));
              }));
        }));
    auto req = co_await arpma::async_conn_req_new(strand, peer, addr, port, cfg,
                                                  asio::bind_executor(strand, asio::use_awaitable));
    arpma::connection client =
        co_await req.async_connect({}, asio::bind_executor(strand, asio::use_awaitable));
    while (!server) {
      asio::steady_timer t(strand, 1ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    auto remote = arpma::remote_mr::from_descriptor(client.private_data());
    EXPECT_TRUE(remote);
    if (!remote) co_return verified;

    // ops writes, each of its own 64-byte slot, in flight together; then one
    // read of them all; a send the server receives.
    const auto base = static_cast<std::size_t>(p) * 8192;
    for (int i = 0; i < ops; ++i)
      std::memset(client_memory.data() + base + static_cast<std::size_t>(i) * 64,
                  'a' + (p + i) % 26, 64);
    int completed = 0;
    int failed = 0;
    for (int i = 0; i < ops; ++i) {
      const auto at = base + static_cast<std::size_t>(i) * 64;
      client.async_write(
          arpma::buffer(remote.value(), at, 64).value(), arpma::buffer(c.value(), at, 64).value(),
          asio::bind_executor(
              strand, [&](std::error_code ec, arpma::completion) { ++(ec ? failed : completed); }));
    }
    std::optional<arpma::completion> received;
    server->async_recv(arpma::buffer(s.value(), 60000, 8).value(),
                       asio::bind_executor(strand, [&](std::error_code ec, arpma::completion got) {
                         EXPECT_FALSE(ec);
                         received = got;
                       }));
    while (completed + failed < ops) {
      asio::steady_timer t(strand, 1ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    EXPECT_EQ(failed, 0);
    co_await client.async_read(
        arpma::buffer(c.value(), 32768 + base, static_cast<std::size_t>(ops) * 64).value(),
        arpma::buffer(remote.value(), base, static_cast<std::size_t>(ops) * 64).value(),
        asio::bind_executor(strand, asio::use_awaitable));
    co_await client.async_send(arpma::buffer(c.value(), base, 8).value(),
                               asio::bind_executor(strand, asio::use_awaitable));
    while (!received) {
      asio::steady_timer t(strand, 1ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    const auto n = static_cast<std::size_t>(ops) * 64;
    const bool same =
        std::memcmp(server_memory.data() + base, client_memory.data() + base, n) == 0 &&
        std::memcmp(client_memory.data() + 32768 + base, client_memory.data() + base, n) == 0 &&
        received->byte_len == 8;
    EXPECT_TRUE(same);
    if (same) ++verified;
    co_await client.async_disconnect(asio::bind_executor(strand, asio::use_awaitable));
    co_await server->async_disconnect(asio::bind_executor(strand, asio::use_awaitable));
  }
  co_return verified;
}

TEST(threads, several_threads_run_one_io_context_with_arpma_on_a_strand) {
  constexpr int pairs = 3;
  constexpr int ops = 32;
  const std::string addr = test_addr();
  auto dev = arpma::get_ibv_context(addr, arpma::ibv_context_type::local);
  ASSERT_TRUE(dev) << dev.error().message();
  auto p = arpma::peer::create(dev.value());
  ASSERT_TRUE(p);
  arpma::peer peer = std::move(p).value();

  asio::io_context io(threads);
  auto strand = asio::make_strand(io);
  std::promise<int> result;
  asio::co_spawn(strand, exchange(strand, peer, addr, pairs, ops),
                 [&](const std::exception_ptr& e, int verified) {
                   if (e)
                     result.set_exception(e);
                   else
                     result.set_value(verified);
                 });
  auto work = asio::make_work_guard(io);
  std::vector<std::thread> runners;
  std::atomic<int> ran_handlers_on{0};
  for (int t = 0; t < threads; ++t)
    runners.emplace_back([&] {
      if (io.run() > 0) ++ran_handlers_on;
    });
  auto done = result.get_future();
  const bool finished = done.wait_for(120s) == std::future_status::ready;
  // What is still queued (timers of closed objects) is destroyed with io.
  work.reset();
  io.stop();
  for (auto& r : runners) r.join();
  ASSERT_TRUE(finished) << "timed out";
  EXPECT_EQ(done.get(), pairs);
  // The point of the test: the handlers did not all run on one thread.
  EXPECT_GT(ran_handlers_on.load(), 1);
}

}  // namespace

}  // namespace threads_integration_test

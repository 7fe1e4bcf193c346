// arpma::cq: posting without waiting and taking completions oneself, on the
// provider the environment chooses.
#include "arpma/cq.hpp"

#include "arpma/conn_req.hpp"
#include "arpma/connection.hpp"
#include "arpma/endpoint.hpp"
#include "arpma/mr.hpp"
#include "arpma/peer.hpp"
#include "core/conn_state.hpp"
#include "support/connected_pair.hpp"
#include "support/test_addr.hpp"

#include <gtest/gtest.h>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>

#include <fcntl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace cq_integration_test {

using arpma::test::test_addr;
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

class cq_integration : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = arpma::get_ibv_context(addr, arpma::ibv_context_type::local);
    ASSERT_TRUE(dev);
    peer.emplace(arpma::peer::create(dev.value()).value());
    server_mr = arpma::local_mr::reg(*peer, server_memory.data(), server_memory.size(),
                                     arpma::mr_usage::write_dst | arpma::mr_usage::recv)
                    .value();
    client_mr = arpma::local_mr::reg(*peer, client_memory.data(), client_memory.size(),
                                     arpma::mr_usage::write_src | arpma::mr_usage::send)
                    .value();
  }

  /// Runs the loop until `done()` (at most 20s); whether it holds.
  template <class Done>
  [[nodiscard]] bool run_until(Done done, std::chrono::milliseconds limit = 20s) {
    return arpma::test::run_until(io, done, limit);
  }

  void connect(const arpma::conn_cfg& cfg = {}) {
    auto ep = arpma::endpoint::listen(io.get_executor(), *peer, addr, "0");
    ASSERT_TRUE(ep);
    endpoint = std::move(ep).value();
    const auto desc = server_mr.descriptor();
    endpoint.async_next_conn_req(cfg, [&](std::error_code ec, arpma::conn_req req) {
      ASSERT_FALSE(ec);
      req.async_connect(desc, [&](std::error_code, arpma::connection c) { server = std::move(c); });
    });
    arpma::async_conn_req_new(io.get_executor(), *peer, addr, std::to_string(endpoint.port()), cfg,
                              [&](std::error_code ec, arpma::conn_req req) {
                                ASSERT_FALSE(ec);
                                req.async_connect({}, [&](std::error_code, arpma::connection c) {
                                  client = std::move(c);
                                });
                              });
    ASSERT_TRUE(run_until([&] { return server && client; })) << "timed out";
    remote = arpma::remote_mr::from_descriptor(client.private_data()).value();
  }

  // Waits on `q` and polls until one completion comes.
  arpma::completion next(arpma::cq q) {
    for (int i = 0; i < 100; ++i) {
      arpma::completion wc;
      auto got = q.poll(std::span(&wc, 1));
      EXPECT_TRUE(got);
      if (got && got.value() == 1) return wc;
      bool woke = false;
      q.async_wait([&](std::error_code ec) {
        EXPECT_FALSE(ec) << ec.message();
        woke = true;
      });
      EXPECT_TRUE(run_until([&] { return woke; })) << "timed out";
    }
    ADD_FAILURE() << "no completion";
    return {};
  }

  std::string addr = test_addr();
  std::optional<arpma::peer> peer;
  asio::io_context io;
  std::vector<char> server_memory = std::vector<char>(4096);
  std::vector<char> client_memory = std::vector<char>(4096);
  arpma::local_mr server_mr;
  arpma::local_mr client_mr;
  arpma::endpoint endpoint;
  arpma::connection server;
  arpma::connection client;
  arpma::remote_mr remote;
};

TEST_F(cq_integration, posted_work_completes_on_the_cq_the_program_polls) {
  connect();
  std::memcpy(client_memory.data(), "raw cq", 7);
  ASSERT_FALSE(client.post_write(arpma::buffer(remote, 16, 7).value(),
                                 arpma::buffer(client_mr, 0, 7).value(), 11));
  auto wc = next(client.completion_queue());
  EXPECT_EQ(wc.wr_id, 11U);
  EXPECT_FALSE(wc.status) << wc.status.message();
  EXPECT_EQ(wc.opcode, arpma::wc_opcode::rdma_write);
  EXPECT_FALSE(wc.imm);

  ASSERT_FALSE(server.post_recv(arpma::buffer(server_mr, 1024, 64).value(), 21));
  ASSERT_FALSE(client.post_send(arpma::buffer(client_mr, 0, 7).value(), 12));
  EXPECT_EQ(next(client.completion_queue()).wr_id, 12U);
  wc = next(server.completion_queue());
  EXPECT_EQ(wc.wr_id, 21U);
  EXPECT_EQ(wc.opcode, arpma::wc_opcode::recv);
  EXPECT_EQ(wc.byte_len, 7U);
  EXPECT_STREQ(server_memory.data() + 1024, "raw cq");
  EXPECT_STREQ(server_memory.data() + 16, "raw cq");
  EXPECT_FALSE(client.completion_queue(true)) << "no receive CQ without rcq_size";
  EXPECT_EQ(arpma::buffer(remote, 4090, 8).error(), arpma::errc::invalid_argument);
  EXPECT_EQ(client.post_write(arpma::buffer(remote, 0, 8).value(),
                              arpma::buffer(client_mr, 0, 7).value(), 1),
            arpma::errc::invalid_argument)
      << "slices of different lengths";
}

TEST_F(cq_integration, a_receive_posted_on_the_request_takes_the_message_sent_at_once) {
  auto ep = arpma::endpoint::listen(io.get_executor(), *peer, addr, "0");
  ASSERT_TRUE(ep);
  endpoint = std::move(ep).value();
  std::error_code posted = make_error_code(arpma::errc::provider);
  endpoint.async_next_conn_req({}, [&](std::error_code ec, arpma::conn_req req) {
    ASSERT_FALSE(ec);
    posted = req.post_recv(arpma::buffer(server_mr, 512, 64).value(), 51);
    req.async_connect({}, [&](std::error_code, arpma::connection c) { server = std::move(c); });
  });
  arpma::async_conn_req_new(
      io.get_executor(), *peer, addr, std::to_string(endpoint.port()), {},
      [&](std::error_code ec, arpma::conn_req req) {
        ASSERT_FALSE(ec);
        req.async_connect({}, [&](std::error_code connected, arpma::connection c) {
          ASSERT_FALSE(connected);
          client = std::move(c);
          // Sent the moment the client is established: the server's side may not be yet.
          std::memcpy(client_memory.data(), "first", 6);
          EXPECT_FALSE(client.post_send(arpma::buffer(client_mr, 0, 6).value(), 52));
        });
      });
  ASSERT_TRUE(run_until([&] { return server && client; })) << "timed out";
  EXPECT_FALSE(posted) << posted.message();
  EXPECT_EQ(next(client.completion_queue()).wr_id, 52U);
  const auto wc = next(server.completion_queue());
  EXPECT_EQ(wc.wr_id, 51U);
  EXPECT_FALSE(wc.status) << wc.status.message();
  EXPECT_EQ(wc.opcode, arpma::wc_opcode::recv);
  EXPECT_EQ(wc.byte_len, 6U);
  EXPECT_STREQ(server_memory.data() + 512, "first");
}

TEST_F(cq_integration, a_failed_completion_reports_its_status_as_a_wc_errc) {
  connect();
  ASSERT_FALSE(server.post_recv(arpma::buffer(server_mr, 0, 64).value(), 31));
  bool disconnected = false;
  server.async_disconnect([&](std::error_code) { disconnected = true; });
  ASSERT_TRUE(run_until([&] { return disconnected; })) << "timed out";
  const auto wc = next(server.completion_queue());
  EXPECT_EQ(wc.wr_id, 31U);
  EXPECT_EQ(wc.status, arpma::wc_errc::wr_flush_err) << wc.status.message();
  EXPECT_EQ(wc.status, arpma::errc::provider);
}

TEST_F(cq_integration, a_shared_channel_and_cancellation) {
  arpma::conn_cfg cfg;
  cfg.shared_completion_channel = true;
  connect(cfg);
  std::optional<std::error_code> shared;
  client.completion_queue().async_wait([&](std::error_code ec) { shared = ec; });
  ASSERT_TRUE(run_until([&] { return shared.has_value(); })) << "timed out";
  EXPECT_EQ(*shared, arpma::errc::shared_channel);

  server = arpma::connection();
  client = arpma::connection();
  endpoint = arpma::endpoint();
  connect();
  asio::cancellation_signal cancel;
  std::optional<std::error_code> outcome;
  client.completion_queue().async_wait(
      asio::bind_cancellation_slot(cancel.slot(), [&](std::error_code ec) { outcome = ec; }));
  io.restart();
  io.run_for(10ms);
  EXPECT_FALSE(outcome);
  cancel.emit(asio::cancellation_type::total);
  ASSERT_TRUE(run_until([&] { return outcome.has_value(); })) << "timed out";
  EXPECT_EQ(*outcome, std::errc::operation_canceled);
}

// The CQ's waiter is kept between waits: a second wait while one pends is
// refused, and a wait cancelled leaves nothing behind that would take the
// next one's event or keep run() from returning.
TEST_F(cq_integration, one_wait_at_a_time_and_a_cancelled_one_leaves_the_next_intact) {
  connect();
  auto cq = client.completion_queue();
  asio::cancellation_signal cancel;
  std::optional<std::error_code> first;
  std::optional<std::error_code> second;
  cq.async_wait(
      asio::bind_cancellation_slot(cancel.slot(), [&](std::error_code ec) { first = ec; }));
  cq.async_wait([&](std::error_code ec) { second = ec; });
  ASSERT_TRUE(run_until([&] { return second.has_value(); })) << "timed out";
  EXPECT_EQ(*second, std::errc::operation_in_progress);
  EXPECT_FALSE(first);
  cancel.emit(asio::cancellation_type::terminal);
  ASSERT_TRUE(run_until([&] { return first.has_value(); })) << "timed out";
  EXPECT_EQ(*first, std::errc::operation_canceled);
  io.restart();
  io.run_for(10ms);
  EXPECT_TRUE(io.stopped()) << "no wait left behind in the loop";

  for (std::uint64_t round = 1; round <= 3; ++round) {
    std::optional<std::error_code> woke;
    cq.async_wait([&](std::error_code ec) { woke = ec; });
    ASSERT_FALSE(client.post_write(arpma::buffer(remote, 0, 8).value(),
                                   arpma::buffer(client_mr, 0, 8).value(), round));
    ASSERT_TRUE(run_until([&] { return woke.has_value(); })) << "round " << round;
    EXPECT_FALSE(*woke) << woke->message();
    auto wc = next(cq);
    EXPECT_EQ(wc.wr_id, round);
  }
}

// Written before the fix: the wait held the CQ by reference and was nobody's
// to end, so it stayed on a closed fd and run() never returned.
TEST_F(cq_integration, a_wait_pending_when_its_connection_closes_ends_aborted) {
  connect();
  std::optional<std::error_code> outcome;
  client.completion_queue().async_wait([&](std::error_code ec) { outcome = ec; });
  io.restart();
  io.run_for(10ms);
  ASSERT_FALSE(outcome);
  EXPECT_FALSE(client.close());
  io.restart();
  io.run_for(5s);
  EXPECT_TRUE(io.stopped()) << "run() did not run out of work";
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(*outcome, std::errc::operation_canceled);
}

// Written before the fix: the io_context's end destroyed the wait's
// descriptor, which closed the provider's fd behind its back.
TEST_F(cq_integration, a_wait_pending_when_the_io_context_goes_leaves_the_fd_to_the_provider) {
  auto loop = std::make_unique<asio::io_context>();
  auto ep = arpma::endpoint::listen(loop->get_executor(), *peer, addr, "0");
  ASSERT_TRUE(ep);
  auto pair = arpma::test::connect_pair(*loop, *peer, ep.value(), {}, {});
  ASSERT_TRUE(pair.client);
  auto* st = arpma::detail::access::state(pair.client);
  const int fd = st->prov().comp_channel_fd(st->cq.own_channel);
  ASSERT_GE(fd, 0);
  bool called = false;
  pair.client.completion_queue().async_wait([&](std::error_code) { called = true; });
  loop->restart();
  loop->run_for(10ms);
  loop.reset();
  EXPECT_FALSE(called) << "a destroyed loop calls no handler";
  EXPECT_NE(::fcntl(fd, F_GETFD), -1) << "the provider's fd was closed";
  EXPECT_FALSE(pair.client.close()) << "the provider could not destroy its channel";
  EXPECT_FALSE(pair.server.close());
}

}  // namespace

}  // namespace cq_integration_test

// arpma::srq in C++ end to end: receives posted once on the server's SRQ,
// filled by messages from several connections, each completing on the SRQ's
// own receive CQ (async_recv, or completion_queue() for raw completions).
#include "arpma/srq.hpp"

#include "arpma/conn_req.hpp"
#include "arpma/connection.hpp"
#include "arpma/cq.hpp"
#include "arpma/endpoint.hpp"
#include "arpma/error.hpp"
#include "arpma/mr.hpp"
#include "arpma/peer.hpp"
#include "support/connected_pair.hpp"

#include <gtest/gtest.h>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace srq_integration_test {

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

using pair = arpma::test::connected_pair;

constexpr std::size_t slot = 64;
constexpr std::size_t region = 16 * slot;

class srq_cxx : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = arpma::get_ibv_context(addr, arpma::ibv_context_type::local);
    ASSERT_TRUE(dev) << dev.error().message();
    auto p = arpma::peer::create(dev.value());
    ASSERT_TRUE(p);
    peer.emplace(std::move(p).value());
    auto s = arpma::local_mr::reg(*peer, server_memory.data(), region, arpma::mr_usage::recv);
    auto c = arpma::local_mr::reg(*peer, client_memory.data(), region, arpma::mr_usage::send);
    ASSERT_TRUE(s && c);
    server_mr = std::move(s).value();
    client_mr = std::move(c).value();
    auto made = arpma::srq::create(io.get_executor(), *peer, {});
    ASSERT_TRUE(made) << made.error().message();
    shared = std::move(made).value();
    ASSERT_TRUE(shared.has_rcq());
    auto ep = arpma::endpoint::listen(io.get_executor(), *peer, addr, "0");
    ASSERT_TRUE(ep) << ep.error().message();
    endpoint = std::move(ep).value();
  }

  /// Runs the loop until `done()` (at most 30s); whether it holds.
  template <class Done>
  [[nodiscard]] bool run_until(Done done, std::chrono::milliseconds limit = 30s) {
    return arpma::test::run_until(io, done, limit);
  }

  // The server's side receives from the SRQ; the client's has a queue of its own.
  pair connect() {
    arpma::conn_cfg server_cfg;
    shared.attach_to(server_cfg);
    return arpma::test::connect_pair(io, *peer, endpoint, server_cfg, {});
  }

  void send_from(arpma::connection& client, std::size_t index, const std::string& text) {
    std::memcpy(client_memory.data() + index * slot, text.data(), text.size());
    bool sent = false;
    client.async_send(arpma::buffer(client_mr, index * slot, text.size()).value(),
                      [&](std::error_code ec, arpma::completion) {
                        EXPECT_FALSE(ec) << ec.message();
                        sent = true;
                      });
    ASSERT_TRUE(run_until([&] { return sent; })) << "timed out";
  }

  std::string addr = arpma::test::test_addr();
  std::optional<arpma::peer> peer;
  asio::io_context io;
  std::vector<char> server_memory = std::vector<char>(region);
  std::vector<char> client_memory = std::vector<char>(region);
  arpma::local_mr server_mr;
  arpma::local_mr client_mr;
  arpma::srq shared;
  arpma::endpoint endpoint;
};

TEST_F(srq_cxx, receives_from_every_connection_complete_on_the_srq_rcq) {
  constexpr std::size_t n = 3;
  std::array<pair, n> pairs;
  for (auto& p : pairs) p = connect();

  // All receives posted before any message, on the SRQ rather than a connection.
  std::vector<std::optional<arpma::completion>> got(n);
  for (std::size_t i = 0; i < n; ++i)
    shared.async_recv(arpma::buffer(server_mr, i * slot, slot).value(),
                      [&, i](std::error_code ec, arpma::completion c) {
                        EXPECT_FALSE(ec) << ec.message();
                        got[i] = c;
                      });
  for (std::size_t i = 0; i < n; ++i)
    send_from(pairs[i].client, i, "message from client " + std::to_string(i));
  ASSERT_TRUE(run_until([&] {
    for (const auto& g : got)
      if (!g) return false;
    return true;
  })) << "timed out";

  std::set<std::uint32_t> qps_seen;
  std::set<std::string> texts;
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_EQ(got[i]->opcode, arpma::wc_opcode::recv);
    qps_seen.insert(got[i]->qp_num);
    texts.emplace(server_memory.data() + i * slot, got[i]->byte_len);
  }
  // Each message arrived once, and qp_num says on which connection.
  std::set<std::uint32_t> server_qps;
  for (auto& p : pairs) server_qps.insert(p.server.qp_num());
  EXPECT_EQ(qps_seen, server_qps);
  EXPECT_EQ(texts, (std::set<std::string>{"message from client 0", "message from client 1",
                                          "message from client 2"}));
}

TEST_F(srq_cxx, raw_completions_through_the_srq_completion_queue) {
  auto p = connect();
  auto rcq = shared.completion_queue();
  ASSERT_TRUE(rcq);
  ASSERT_FALSE(shared.post_recv(arpma::buffer(server_mr, 0, slot).value(), 77));
  send_from(p.client, 0, "raw");

  std::vector<arpma::completion> wcs(4);
  std::size_t polled = 0;
  bool waited = false;
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (polled == 0 && std::chrono::steady_clock::now() < end) {
    auto got = rcq.poll(wcs);
    ASSERT_TRUE(got) << got.error().message();
    polled = got.value();
    if (polled > 0) break;
    waited = false;
    rcq.async_wait([&](std::error_code ec) {
      EXPECT_FALSE(ec) << ec.message();
      waited = true;
    });
    ASSERT_TRUE(run_until([&] { return waited; })) << "timed out";
  }
  ASSERT_EQ(polled, 1U);
  EXPECT_EQ(wcs[0].wr_id, 77U);
  EXPECT_FALSE(wcs[0].status) << wcs[0].status.message();
  EXPECT_EQ(wcs[0].opcode, arpma::wc_opcode::recv);
  EXPECT_EQ(wcs[0].byte_len, 3U);
  EXPECT_EQ(wcs[0].qp_num, p.server.qp_num());
  EXPECT_EQ(std::string(server_memory.data(), 3), "raw");
}

TEST_F(srq_cxx, a_cancelled_receive_completes_aborted_once_its_buffer_is_consumed) {
  auto p = connect();
  asio::cancellation_signal cancel;
  std::optional<arpma::error_code> first;
  shared.async_recv(
      arpma::buffer(server_mr, 0, slot).value(),
      asio::bind_cancellation_slot(cancel.slot(),
                                   [&](arpma::error_code ec, arpma::completion) { first = ec; }));
  cancel.emit(asio::cancellation_type::terminal);
  io.restart();
  io.run_for(50ms);
  // Still posted: the provider owns the buffer until a message fills it.
  EXPECT_FALSE(first.has_value());

  send_from(p.client, 0, "fills the cancelled receive");
  ASSERT_TRUE(run_until([&] { return first.has_value(); })) << "timed out";
  EXPECT_EQ(*first, asio::error::operation_aborted);

  // The next receive gets the next message.
  std::optional<arpma::completion> second;
  shared.async_recv(arpma::buffer(server_mr, slot, slot).value(),
                    [&](std::error_code ec, arpma::completion c) {
                      EXPECT_FALSE(ec) << ec.message();
                      second = c;
                    });
  send_from(p.client, 1, "second");
  ASSERT_TRUE(run_until([&] { return second.has_value(); })) << "timed out";
  EXPECT_EQ(std::string(server_memory.data() + slot, second->byte_len), "second");
}

TEST_F(srq_cxx, pending_receives_are_aborted_when_the_srq_goes) {
  std::optional<arpma::error_code> result;
  shared.async_recv(arpma::buffer(server_mr, 0, slot).value(),
                    [&](arpma::error_code ec, arpma::completion) { result = ec; });
  io.restart();
  io.run_for(20ms);
  EXPECT_FALSE(result.has_value());
  EXPECT_FALSE(shared.close());
  ASSERT_TRUE(run_until([&] { return result.has_value(); })) << "timed out";
  EXPECT_EQ(*result, asio::error::operation_aborted);
}

// An error handed over by a handler that may run on another thread: those
// of an srq without an io_context (empty, or made without an executor) run on
// the system executor's.
struct handed_over {
  std::error_code ec;
  std::atomic<bool> done{false};
  void set(std::error_code e) {
    ec = e;
    done.store(true, std::memory_order_release);
  }
  [[nodiscard]] bool ready() const { return done.load(std::memory_order_acquire); }
};

TEST_F(srq_cxx, async_recv_needs_an_executor_an_rcq_and_a_slice_of_a_region) {
  const auto first = arpma::buffer(server_mr, 0, slot).value();
  auto expect_error = [&](arpma::srq& q, const arpma::local_buffer& dst, arpma::errc want) {
    handed_over result;
    q.async_recv(dst, [&](std::error_code ec, arpma::completion) { result.set(ec); });
    ASSERT_TRUE(run_until([&] { return result.ready(); })) << "timed out";
    EXPECT_EQ(result.ec, want) << result.ec.message();
  };
  auto no_rcq = arpma::srq::create(io.get_executor(), *peer, {.rcq_size = 0});
  ASSERT_TRUE(no_rcq);
  expect_error(no_rcq.value(), first, arpma::errc::not_supported);
  EXPECT_FALSE(no_rcq.value().completion_queue());

  auto no_executor = arpma::srq::create(*peer, {});
  ASSERT_TRUE(no_executor);
  expect_error(no_executor.value(), first, arpma::errc::invalid_argument);
  handed_over waited;
  no_executor.value().completion_queue().async_wait([&](std::error_code ec) { waited.set(ec); });
  ASSERT_TRUE(run_until([&] { return waited.ready(); })) << "timed out";
  EXPECT_EQ(waited.ec, arpma::errc::invalid_argument);

  EXPECT_EQ(arpma::buffer(server_mr, region - 8, slot).error(), arpma::errc::invalid_argument);
  arpma::srq empty;
  expect_error(empty, first, arpma::errc::invalid_argument);
  EXPECT_EQ(arpma::srq::create(asio::any_io_executor{}, *peer, {}).error(),
            arpma::errc::invalid_argument);
}

}  // namespace

}  // namespace srq_integration_test

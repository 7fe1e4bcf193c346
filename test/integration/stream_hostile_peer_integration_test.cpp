// arpma::stream against a hostile peer: a plain connection that greets as a
// stream, then breaks the wire protocol. Each breach is a connection_reset
// for the stream's reader (what came before it is still read), never a
// crash, a hang or memory beyond the stream's own.
#include "arpma/stream.hpp"

#include "arpma/conn_req.hpp"
#include "arpma/cq.hpp"
#include "arpma/mr.hpp"
#include "core/stream_state.hpp"
#include "support/stream_pair.hpp"

#include <gtest/gtest.h>
#include <boost/asio/write.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace stream_hostile_peer_integration_test {

namespace asio = boost::asio;

namespace {

using arpma::test::small_cfg;

class stream_hostile_peer : public arpma::test::stream_pair {
 protected:
  void SetUp() override {
    stream_pair::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    mr = arpma::local_mr::reg(*peer, memory.data(), memory.size(), arpma::mr_usage::send).value();
    auto ep = arpma::endpoint::listen(io.get_executor(), *peer, addr, "0");
    ASSERT_TRUE(ep);
    endpoint = std::move(ep).value();
    arpma::async_accept_stream(endpoint, *peer, small_cfg(),
                               [&](arpma::error_code ec, arpma::stream s) {
                                 EXPECT_FALSE(ec) << ec.message();
                                 server = std::move(s);
                               });
    const auto hello = arpma::detail::encode_hello(small_cfg());
    arpma::async_conn_req_new(
        io.get_executor(), *peer, addr, std::to_string(endpoint.port()),
        small_cfg().connection_cfg(), [&](arpma::error_code ec, arpma::conn_req req) {
          ASSERT_FALSE(ec);
          req.async_connect(hello,
                            [&](arpma::error_code, arpma::connection c) { raw = std::move(c); });
        });
    ASSERT_TRUE(run_until([&] { return server && raw; }));
  }

  /// Sends `len` bytes with `imm`, as the stream's wire format would not.
  void send(std::size_t len, std::uint32_t imm, bool signaled = false) {
    ASSERT_FALSE(raw.post_send_with_imm(arpma::buffer(mr, 0, len).value(), imm, 1, signaled));
  }

  /// Until the last signaled send completed: RC has then placed it, and
  /// every send before it, in the server's receive queue.
  void wait_delivered() {
    auto cq = raw.completion_queue();
    std::array<arpma::completion, 4> done{};
    std::size_t got = 0;
    ASSERT_TRUE(run_until([&] {
      auto n = cq.poll(done);
      if (n) got += n.value();
      return got > 0;
    }));
    EXPECT_FALSE(done[0].status) << done[0].status.message();
  }

  /// Reads until an error: what the server's reader ends with, and how many
  /// bytes it read before.
  std::pair<arpma::error_code, std::size_t> read_to_the_end() {
    std::vector<char> buf(64U << 10);
    std::size_t total = 0;
    std::optional<arpma::error_code> end;
    std::function<void()> next = [&] {
      server.async_read_some(asio::buffer(buf), [&](arpma::error_code ec, std::size_t n) {
        total += n;
        if (ec)
          end = ec;
        else
          next();
      });
    };
    next();
    EXPECT_TRUE(run_until([&] { return end.has_value(); })) << "hung";
    return {end.value_or(arpma::error_code()), total};
  }

  std::vector<char> memory = std::vector<char>(8192, 'h');
  arpma::local_mr mr;
  arpma::connection raw;
};

TEST_F(stream_hostile_peer, reserved_immediate_bits_reset_the_stream) {
  send(3, 0);
  send(3, 1U << 20);  // a reserved bit
  auto [ec, n] = read_to_the_end();
  EXPECT_EQ(ec, asio::error::connection_reset) << ec.message();
  EXPECT_EQ(n, 3U) << "what came before the breach is still read";
}

TEST_F(stream_hostile_peer, data_beyond_the_credits_granted_resets_the_stream) {
  // 4 data credits were granted; the fifth message takes a control receive.
  // All five are in the server's queue before it reads (and so returns any
  // credit): the fifth is beyond the window whatever the timing.
  for (int i = 0; i < 5; ++i) send(100, 0, i == 4);
  wait_delivered();
  auto [ec, n] = read_to_the_end();
  EXPECT_EQ(ec, asio::error::connection_reset) << ec.message();
  EXPECT_LE(n, 500U);
}

TEST_F(stream_hostile_peer, a_message_larger_than_a_slot_resets_the_stream) {
  send(1025, 0);  // slots are 1024 bytes
  auto [ec, n] = read_to_the_end();
  EXPECT_EQ(ec, asio::error::connection_reset) << ec.message();
  EXPECT_EQ(n, 0U);
}

TEST_F(stream_hostile_peer, a_control_message_with_data_or_credit_it_never_owed_resets) {
  send(10, arpma::detail::stream_imm::control);
  auto [ec, n] = read_to_the_end();
  EXPECT_EQ(ec, asio::error::connection_reset) << ec.message();

  // Credits beyond the window: the server's writer must not trust them.
  std::vector<char> data(64U << 10, 'd');
  std::optional<arpma::error_code> wrote;
  asio::async_write(server, asio::buffer(data),
                    [&](arpma::error_code e, std::size_t) { wrote = e; });
  ASSERT_TRUE(run_until([&] { return wrote.has_value(); }));
  EXPECT_EQ(*wrote, asio::error::connection_reset);
  EXPECT_EQ(n, 0U);
}

TEST_F(stream_hostile_peer, returning_more_credit_than_was_taken_resets_the_stream) {
  send(0, 5);  // 5 credits back, none taken: the window is 4
  auto [ec, n] = read_to_the_end();
  EXPECT_EQ(ec, asio::error::connection_reset) << ec.message();
  EXPECT_EQ(n, 0U);
}

}  // namespace

}  // namespace stream_hostile_peer_integration_test

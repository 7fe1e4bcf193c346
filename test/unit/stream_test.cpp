// arpma::stream without a connection: its configuration, its greeting, and
// an empty stream's answers (the data path is in stream_integration_test).
#include "arpma/stream.hpp"

#include "core/stream_state.hpp"
#include "support/wait.hpp"

#include <gtest/gtest.h>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>

#include <optional>
#include <string>

namespace stream_test {

namespace asio = boost::asio;

namespace {

TEST(stream_cfg, defaults_are_in_range_and_state_their_memory) {
  arpma::stream_cfg cfg;
  EXPECT_FALSE(cfg.check());
  EXPECT_EQ(cfg.memory(), (2U * 8 + 4) * 65536);  // 1280 KiB, as docs/stream.md says
  const auto conn = cfg.connection_cfg();
  EXPECT_EQ(conn.sq_size, 12U);
  EXPECT_EQ(conn.rq_size, 12U);
  EXPECT_EQ(conn.cq_size, 24U);
  EXPECT_EQ(conn.rcq_size, 0U);
}

TEST(stream_cfg, fields_out_of_range_are_invalid) {
  const auto invalid = [](auto change) {
    arpma::stream_cfg cfg;
    change(cfg);
    return cfg.check() == arpma::errc::invalid_argument;
  };
  EXPECT_TRUE(invalid([](auto& c) { c.slots = 0; }));
  EXPECT_TRUE(invalid([](auto& c) { c.slots = 4096; }));  // the immediate holds 12 bits
  EXPECT_TRUE(invalid([](auto& c) { c.control_slots = 0; }));
  EXPECT_TRUE(invalid([](auto& c) { c.control_slots = 256; }));
  EXPECT_TRUE(invalid([](auto& c) { c.slot_size = 0; }));
  EXPECT_TRUE(invalid([](auto& c) { c.slot_size = (1U << 20) + 1; }));
  EXPECT_TRUE(invalid([](auto& c) { c.timeout = std::chrono::milliseconds(-1); }));
  EXPECT_TRUE(invalid([](auto& c) { c.busy_poll = std::chrono::microseconds(-1); }));
}

TEST(stream_hello, round_trips_and_refuses_what_is_no_hello) {
  arpma::stream_cfg cfg;
  cfg.slots = 7;
  cfg.control_slots = 3;
  cfg.slot_size = 4000;
  auto hello = arpma::detail::encode_hello(cfg);
  auto back = arpma::detail::decode_hello(hello);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->slots, 7U);
  EXPECT_EQ(back->control_slots, 3U);
  EXPECT_EQ(back->slot_size, 4000U);

  EXPECT_FALSE(arpma::detail::decode_hello(std::span(hello).first(15))) << "too short";
  auto bad = hello;
  bad[0] ^= 1;
  EXPECT_FALSE(arpma::detail::decode_hello(bad)) << "magic";
  bad = hello;
  bad[5] = 2;
  EXPECT_FALSE(arpma::detail::decode_hello(bad)) << "version";
  bad = hello;
  bad[8] = 0xff;  // 4 billion slots: out of range
  EXPECT_FALSE(arpma::detail::decode_hello(bad));
  std::vector<std::uint8_t> padded(hello.begin(), hello.end());
  padded.resize(56, 0);  // transports pad private data
  EXPECT_TRUE(arpma::detail::decode_hello(padded));
}

TEST(stream, an_empty_stream_answers_bad_descriptor) {
  asio::io_context io;
  arpma::stream s;
  EXPECT_FALSE(s);
  EXPECT_FALSE(s.lowest_layer());
  EXPECT_EQ(s.shutdown(), asio::error::bad_descriptor);
  char c = 0;
  std::optional<arpma::error_code> read;
  std::optional<arpma::error_code> written;
  s.async_read_some(asio::buffer(&c, 1),
                    asio::bind_executor(io, [&](arpma::error_code ec, std::size_t) { read = ec; }));
  s.async_write_some(
      asio::buffer(&c, 1),
      asio::bind_executor(io, [&](arpma::error_code ec, std::size_t) { written = ec; }));
  EXPECT_FALSE(read) << "never inside the initiating function";
  // No loop known: the system executor carries the answers to the handlers'.
  ASSERT_TRUE(arpma::test::run_until(io, [&] { return read && written; }));
  EXPECT_EQ(*read, asio::error::bad_descriptor);
  EXPECT_EQ(*written, asio::error::bad_descriptor);
  s.close();  // twice is fine
  s.close();
}

}  // namespace

}  // namespace stream_test

// arpma::stream end to end on the provider the environment chooses: Asio's
// composed operations on it, flow control, end of stream, resets.
#include "arpma/stream.hpp"

#include "arpma/conn_req.hpp"
#include "arpma/mr.hpp"
#include "core/stream_state.hpp"
#include "support/wait.hpp"

#include <gtest/gtest.h>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

std::string test_addr() {
  const char* env = std::getenv("ARPMA_TEST_ADDR");  // NOLINT(concurrency-mt-unsafe)
  return env != nullptr && *env != '\0' ? env : "127.0.0.1";
}

// A small window, so that the tests cross slot and credit boundaries often.
arpma::stream_cfg small_cfg() {
  arpma::stream_cfg cfg;
  cfg.slots = 4;
  cfg.control_slots = 2;
  cfg.slot_size = 1024;
  return cfg;
}

class stream_integration : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = arpma::get_ibv_context(addr, arpma::ibv_context_type::local);
    ASSERT_TRUE(dev);
    peer.emplace(arpma::peer::create(dev.value()).value());
  }

  template <class Done>
  [[nodiscard]] bool run_until(Done done, std::chrono::milliseconds limit = 30s) {
    return arpma::test::run_until(io, done, limit);
  }

  void connect(const arpma::stream_cfg& server_cfg = small_cfg(),
               const arpma::stream_cfg& client_cfg = small_cfg()) {
    auto ep = arpma::endpoint::listen(io.get_executor(), *peer, addr, "0");
    ASSERT_TRUE(ep);
    endpoint = std::move(ep).value();
    bool accepted = false;
    bool connected = false;
    arpma::async_accept_stream(endpoint, *peer, server_cfg,
                               [&](arpma::error_code ec, arpma::stream s) {
                                 EXPECT_FALSE(ec) << ec.message();
                                 server = std::move(s);
                                 accepted = true;
                               });
    arpma::async_connect_stream(io.get_executor(), *peer, addr, std::to_string(endpoint.port()),
                                client_cfg, [&](arpma::error_code ec, arpma::stream s) {
                                  EXPECT_FALSE(ec) << ec.message();
                                  client = std::move(s);
                                  connected = true;
                                });
    ASSERT_TRUE(run_until([&] { return accepted && connected; })) << "timed out";
    ASSERT_TRUE(server && client);
  }

  std::string addr = test_addr();
  std::optional<arpma::peer> peer;
  asio::io_context io;
  arpma::endpoint endpoint;
  arpma::stream server;
  arpma::stream client;
};

TEST_F(stream_integration, read_until_and_write_work_as_on_a_socket) {
  connect();
  std::string request = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  std::string got;
  std::size_t header_end = 0;
  asio::async_write(client, asio::buffer(request),
                    [](arpma::error_code ec, std::size_t) { EXPECT_FALSE(ec) << ec.message(); });
  asio::async_read_until(server, asio::dynamic_buffer(got), "\r\n\r\n",
                         [&](arpma::error_code ec, std::size_t n) {
                           EXPECT_FALSE(ec) << ec.message();
                           header_end = n;
                         });
  ASSERT_TRUE(run_until([&] { return header_end != 0; }));
  EXPECT_EQ(got.substr(0, header_end), request);
  EXPECT_EQ(server.get_executor(), io.get_executor());
  EXPECT_TRUE(server.lowest_layer());
}

TEST_F(stream_integration, a_line_split_across_many_slots_arrives_whole_and_in_order) {
  connect();
  std::string line(10000, 'x');
  for (std::size_t i = 0; i < line.size(); ++i) line[i] = static_cast<char>('a' + i % 26);
  line += '\n';
  std::string got;
  std::size_t n_read = 0;
  bool written = false;
  asio::async_write(client, asio::buffer(line), [&](arpma::error_code ec, std::size_t n) {
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_EQ(n, line.size());
    written = true;
  });
  asio::async_read_until(server, asio::dynamic_buffer(got), '\n',
                         [&](arpma::error_code ec, std::size_t n) {
                           EXPECT_FALSE(ec) << ec.message();
                           n_read = n;
                         });
  ASSERT_TRUE(run_until([&] { return written && n_read != 0; }));
  EXPECT_EQ(got.substr(0, n_read), line);
}

// 16 MiB through a 4 KiB window: credits come back many thousand times.
TEST_F(stream_integration, megabytes_stream_through_a_small_window_intact) {
  connect();
  constexpr std::size_t total = 16U << 20;
  std::vector<std::uint8_t> data(total);
  std::uint32_t x = 12345;
  for (auto& b : data) {
    x = x * 1103515245U + 12345U;
    b = static_cast<std::uint8_t>(x >> 16);
  }
  std::vector<std::uint8_t> got(total);
  bool written = false;
  bool read = false;
  asio::async_write(client, asio::buffer(data), [&](arpma::error_code ec, std::size_t n) {
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_EQ(n, total);
    written = true;
  });
  asio::async_read(server, asio::buffer(got), [&](arpma::error_code ec, std::size_t n) {
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_EQ(n, total);
    read = true;
  });
  ASSERT_TRUE(run_until([&] { return written && read; }, 120s)) << "timed out";
  EXPECT_TRUE(got == data);
}

TEST_F(stream_integration, a_reader_that_stops_stops_the_writer) {
  connect();
  std::vector<char> data(1U << 20, 'w');
  std::size_t written = 0;
  bool write_done = false;
  asio::async_write(client, asio::buffer(data), [&](arpma::error_code ec, std::size_t n) {
    EXPECT_FALSE(ec) << ec.message();
    written = n;
    write_done = true;
  });
  // Nobody reads: the writer fills the peer's 4 slots and waits.
  EXPECT_FALSE(run_until([&] { return write_done; }, 300ms));
  std::vector<char> got(data.size());
  bool read = false;
  asio::async_read(server, asio::buffer(got), [&](arpma::error_code ec, std::size_t) {
    EXPECT_FALSE(ec) << ec.message();
    read = true;
  });
  ASSERT_TRUE(run_until([&] { return write_done && read; }));
  EXPECT_EQ(written, data.size());
  EXPECT_TRUE(got == data);
}

TEST_F(stream_integration, shutdown_gives_eof_after_the_data_and_the_other_way_keeps_working) {
  connect();
  std::string sent = "last words";
  asio::async_write(client, asio::buffer(sent), [&](arpma::error_code ec, std::size_t) {
    EXPECT_FALSE(ec);
    EXPECT_FALSE(client.shutdown());
  });
  std::string got;
  std::optional<arpma::error_code> end;
  asio::async_read(server, asio::dynamic_buffer(got),
                   [&](arpma::error_code ec, std::size_t) { end = ec; });
  ASSERT_TRUE(run_until([&] { return end.has_value(); }));
  EXPECT_EQ(*end, asio::error::eof);
  EXPECT_EQ(got, sent);

  // Half-closed: the server still writes, the client still reads.
  std::string reply = "heard you";
  std::string back(reply.size(), '\0');
  bool replied = false;
  asio::async_write(server, asio::buffer(reply),
                    [](arpma::error_code ec, std::size_t) { EXPECT_FALSE(ec); });
  asio::async_read(client, asio::buffer(back), [&](arpma::error_code ec, std::size_t) {
    EXPECT_FALSE(ec) << ec.message();
    replied = true;
  });
  ASSERT_TRUE(run_until([&] { return replied; }));
  EXPECT_EQ(back, reply);
  std::optional<arpma::error_code> write_after;
  asio::async_write(client, asio::buffer(sent),
                    [&](arpma::error_code ec, std::size_t) { write_after = ec; });
  ASSERT_TRUE(run_until([&] { return write_after.has_value(); }));
  EXPECT_EQ(*write_after, asio::error::shut_down);

  // The server closes in order: the client reads eof.
  server.close();
  char c = 0;
  std::optional<arpma::error_code> last;
  client.async_read_some(asio::buffer(&c, 1),
                         [&](arpma::error_code ec, std::size_t) { last = ec; });
  ASSERT_TRUE(run_until([&] { return last.has_value(); }));
  EXPECT_EQ(*last, asio::error::eof);
}

TEST_F(stream_integration, closing_with_unread_data_resets_the_peer) {
  connect();
  std::string sent = "never read";
  bool written = false;
  asio::async_write(client, asio::buffer(sent), [&](arpma::error_code ec, std::size_t) {
    EXPECT_FALSE(ec);
    written = true;
  });
  ASSERT_TRUE(run_until([&] { return written; }));
  // Let the bytes land on the server before it closes.
  asio::steady_timer pause(io, 100ms);
  bool paused = false;
  pause.async_wait([&](arpma::error_code) { paused = true; });
  ASSERT_TRUE(run_until([&] { return paused; }));
  server.close();
  char c = 0;
  std::optional<arpma::error_code> got;
  client.async_read_some(asio::buffer(&c, 1), [&](arpma::error_code ec, std::size_t) { got = ec; });
  ASSERT_TRUE(run_until([&] { return got.has_value(); }));
  EXPECT_EQ(*got, asio::error::connection_reset) << got->message();
}

TEST_F(stream_integration, a_pending_read_is_cancelled_and_the_stream_goes_on) {
  connect();
  char c = 0;
  asio::cancellation_signal cancel;
  std::optional<arpma::error_code> got;
  server.async_read_some(
      asio::buffer(&c, 1),
      asio::bind_cancellation_slot(cancel.slot(), [&](arpma::error_code ec, std::size_t n) {
        EXPECT_EQ(n, 0U);
        got = ec;
      }));
  std::optional<arpma::error_code> second;
  server.async_read_some(asio::buffer(&c, 1),
                         [&](arpma::error_code ec, std::size_t) { second = ec; });
  EXPECT_FALSE(run_until([&] { return got.has_value(); }, 50ms));
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(*second, asio::error::in_progress);
  cancel.emit(asio::cancellation_type::terminal);
  ASSERT_TRUE(run_until([&] { return got.has_value(); }));
  EXPECT_EQ(*got, asio::error::operation_aborted);

  std::size_t n_read = 0;
  asio::async_write(client, asio::buffer("z", 1), [](arpma::error_code, std::size_t) {});
  server.async_read_some(asio::buffer(&c, 1), [&](arpma::error_code ec, std::size_t n) {
    EXPECT_FALSE(ec);
    n_read = n;
  });
  ASSERT_TRUE(run_until([&] { return n_read == 1; }));
  EXPECT_EQ(c, 'z');
}

TEST_F(stream_integration, an_idle_stream_holds_no_work_in_the_loop) {
  connect();
  std::string msg = "ping";
  std::string got(4, '\0');
  asio::async_write(client, asio::buffer(msg), [](arpma::error_code, std::size_t) {});
  asio::async_read(server, asio::buffer(got), [](arpma::error_code, std::size_t) {});
  io.restart();
  const auto start = std::chrono::steady_clock::now();
  io.run_for(10s);  // returns once nothing waits
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(got, msg);
}

TEST_F(stream_integration, busy_polling_streams_move_data_then_let_the_loop_go_idle) {
  auto cfg = small_cfg();
  cfg.busy_poll = std::chrono::microseconds(200);
  connect(cfg, cfg);
  std::vector<std::uint8_t> data(1U << 20);
  std::iota(data.begin(), data.end(), std::uint8_t{0});
  std::vector<std::uint8_t> got(data.size());
  asio::async_write(client, asio::buffer(data),
                    [](arpma::error_code ec, std::size_t) { EXPECT_FALSE(ec) << ec.message(); });
  asio::async_read(server, asio::buffer(got),
                   [](arpma::error_code ec, std::size_t) { EXPECT_FALSE(ec) << ec.message(); });
  io.restart();
  const auto start = std::chrono::steady_clock::now();
  io.run_for(20s);  // returns once both are done and the polls ran out of budget
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_TRUE(got == data);
}

TEST_F(stream_integration, the_blocking_forms_run_the_loop_until_done) {
  connect();
  // A pending async read on the server completes while the client's
  // blocking write runs the loop.
  std::string got(5, '\0');
  bool read = false;
  asio::async_read(server, asio::buffer(got), [&](arpma::error_code ec, std::size_t) {
    EXPECT_FALSE(ec) << ec.message();
    read = true;
  });
  std::size_t written = 0;
  while (written < 5)
    written += client.write_some(asio::buffer(std::string_view("hello").substr(written)));
  ASSERT_TRUE(run_until([&] { return read; }));
  EXPECT_EQ(got, "hello");

  EXPECT_EQ(asio::write(server, asio::buffer("abc", 3)), 3U);
  std::array<char, 8> buf{};
  arpma::error_code ec;
  std::size_t n = 0;
  while (n < 3 && !ec) n += client.read_some(asio::buffer(buf.data() + n, buf.size() - n), ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(std::string(buf.data(), n), "abc");

  EXPECT_FALSE(server.shutdown());
  EXPECT_EQ(client.read_some(asio::buffer(buf), ec), 0U);
  EXPECT_EQ(ec, asio::error::eof);
  arpma::stream none;
  EXPECT_THROW((void)none.read_some(asio::buffer(buf)), boost::system::system_error);
}

TEST_F(stream_integration, a_request_that_is_no_stream_is_refused_and_the_next_accepted) {
  auto ep = arpma::endpoint::listen(io.get_executor(), *peer, addr, "0");
  ASSERT_TRUE(ep);
  endpoint = std::move(ep).value();
  const auto port = std::to_string(endpoint.port());
  bool accepted = false;
  arpma::async_accept_stream(endpoint, *peer, small_cfg(),
                             [&](arpma::error_code ec, arpma::stream s) {
                               EXPECT_FALSE(ec) << ec.message();
                               server = std::move(s);
                               accepted = true;
                             });
  std::optional<arpma::error_code> plain;
  arpma::connection plain_conn;
  arpma::async_conn_req_new(io.get_executor(), *peer, addr, port, arpma::conn_cfg{},
                            [&](arpma::error_code ec, arpma::conn_req req) {
                              ASSERT_FALSE(ec);
                              req.async_connect({}, [&](arpma::error_code e, arpma::connection c) {
                                plain = e;
                                plain_conn = std::move(c);
                              });
                            });
  ASSERT_TRUE(run_until([&] { return plain.has_value(); }));
  EXPECT_EQ(*plain, std::errc::connection_refused) << plain->message();
  arpma::async_connect_stream(io.get_executor(), *peer, addr, port, small_cfg(),
                              [&](arpma::error_code ec, arpma::stream s) {
                                EXPECT_FALSE(ec) << ec.message();
                                client = std::move(s);
                              });
  ASSERT_TRUE(run_until([&] { return accepted && client; }));
}

TEST_F(stream_integration, sides_of_different_shapes_respect_each_other) {
  arpma::stream_cfg big;
  big.slots = 8;
  big.slot_size = 4096;
  connect(small_cfg(), big);  // the client's messages must fit the server's 1 KiB slots
  std::vector<char> data(64U << 10, 'q');
  std::vector<char> got(data.size());
  bool done = false;
  asio::async_write(client, asio::buffer(data),
                    [](arpma::error_code ec, std::size_t) { EXPECT_FALSE(ec) << ec.message(); });
  asio::async_read(server, asio::buffer(got), [&](arpma::error_code ec, std::size_t) {
    EXPECT_FALSE(ec) << ec.message();
    done = true;
  });
  ASSERT_TRUE(run_until([&] { return done; }));
  EXPECT_TRUE(got == data);
  EXPECT_EQ(client.config().slot_size, 4096U);
}

// ---- a hostile peer: a plain connection that greets as a stream, then lies ----

class stream_hostile_peer : public stream_integration {
 protected:
  void SetUp() override {
    stream_integration::SetUp();
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
  void send(std::size_t len, std::uint32_t imm) {
    ASSERT_FALSE(raw.post_send_with_imm(arpma::buffer(mr, 0, len).value(), imm, 1, false));
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
  for (int i = 0; i < 5; ++i) send(100, 0);
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

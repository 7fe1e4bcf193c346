// arpma::stream when the peer is killed (SIGKILL) mid-stream: the survivor's
// pending read or write ends with connection_reset, never a hang. The peer
// is this binary re-executed (a provider of its own, no threads inherited),
// on this node or, between two guests, on the other one.
#include "arpma/stream.hpp"

#include "arpma/peer.hpp"
#include "support/peer_process.hpp"
#include "support/stream_pair.hpp"
#include "support/wait.hpp"

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/write.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace stream_peer_kill_integration_test {

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

using arpma::test::peer_addr;
using arpma::test::small_cfg;
using arpma::test::test_addr;

// The child: connects, says 'C' on the pipe, then writes without end
// ('w') or never reads ('i'), until it is killed (60 s at most).
int child_main(char mode, const std::string& port, int fd) {
  asio::io_context io;
  const auto addr = peer_addr();  // the test's node
  auto dev = arpma::get_ibv_context(addr, arpma::ibv_context_type::remote);
  if (!dev) return 20;
  auto p = arpma::peer::create(dev.value());
  if (!p) return 21;
  arpma::stream s;
  arpma::async_connect_stream(io.get_executor(), p.value(), addr, port, small_cfg(),
                              [&](arpma::error_code, arpma::stream made) { s = std::move(made); });
  if (!arpma::test::run_until(
          io, [&] { return static_cast<bool>(s); }, 10s))
    return 22;
  const char c = 'C';
  if (::write(fd, &c, 1) != 1) return 23;
  std::vector<char> chunk(4096, 'k');
  bool failed = false;
  std::function<void()> next = [&] {
    asio::async_write(s, asio::buffer(chunk), [&](arpma::error_code ec, std::size_t) {
      if (ec)
        failed = true;
      else
        next();
    });
  };
  if (mode == 'w') next();
  (void)arpma::test::run_until(
      io, [&] { return failed; }, 60s);
  return 24;
}

// This binary re-executed with ARPMA_STREAM_CHILD=mode:port:fd plays the
// child before gtest's main runs.
const bool child_ran = [] {
  const char* spec = std::getenv("ARPMA_STREAM_CHILD");  // NOLINT(concurrency-mt-unsafe)
  if (spec == nullptr) return false;
  char mode = 0;
  unsigned port = 0;
  int fd = -1;
  if (std::sscanf(spec, "%c:%u:%d", &mode, &port, &fd) != 3) ::_exit(2);
  ::_exit(child_main(mode, std::to_string(port), fd));
}();

/// The child process (here, or on another node: support/peer_process.hpp),
/// killed and reaped when the object goes.
class child {
 public:
  child(char mode, std::uint16_t port)
      : proc_("ARPMA_STREAM_CHILD", std::string(1, mode) + ":" + std::to_string(port)) {}
  /// Whether it said it is connected within 10 s.
  /// Whether the child said it is connected; if not, where it is (on stderr).
  [[nodiscard]] bool connected() {
    if (proc_.started() && proc_.read(1, 10s) == "C") return true;
    std::fprintf(stderr, "the child did not connect; where it is:\n%s", proc_.where().c_str());
    return false;
  }
  void kill() { (void)proc_.kill(); }

 private:
  arpma::test::peer_process proc_;
};

class stream_peer_kill : public ::testing::Test {
 protected:
  void SetUp() override {
    if (arpma::test::iwarp()) GTEST_SKIP() << arpma::test::iwarp_has_no_streams;
    auto dev = arpma::get_ibv_context(addr, arpma::ibv_context_type::local);
    ASSERT_TRUE(dev);
    peer.emplace(arpma::peer::create(dev.value()).value());
    auto ep = arpma::endpoint::listen(io.get_executor(), *peer, addr, "0");
    ASSERT_TRUE(ep);
    endpoint = std::move(ep).value();
  }

  void accept() {
    arpma::async_accept_stream(endpoint, *peer, small_cfg(),
                               [&](arpma::error_code ec, arpma::stream s) {
                                 EXPECT_FALSE(ec) << ec.message();
                                 server = std::move(s);
                               });
    ASSERT_TRUE(arpma::test::run_until(io, [&] { return static_cast<bool>(server); }));
  }

  std::string addr = test_addr();
  std::optional<arpma::peer> peer;
  asio::io_context io;
  arpma::endpoint endpoint;
  arpma::stream server;
};

TEST_F(stream_peer_kill, a_reader_whose_writer_dies_reads_what_came_then_a_reset) {
  child c('w', endpoint.port());
  accept();
  ASSERT_TRUE(c.connected());
  std::vector<char> buf(4096);
  std::size_t got = 0;
  std::optional<arpma::error_code> end;
  std::function<void()> next = [&] {
    server.async_read_some(asio::buffer(buf), [&](arpma::error_code ec, std::size_t n) {
      got += n;
      if (ec)
        end = ec;
      else if (got > (1U << 20))
        c.kill();  // mid-stream, with the window full
      if (!ec) next();
    });
  };
  next();
  ASSERT_TRUE(arpma::test::run_until(
      io, [&] { return end.has_value(); }, 60s))
      << "hung";
  EXPECT_EQ(*end, asio::error::connection_reset) << end->message();
  EXPECT_GT(got, 1U << 20);
}

TEST_F(stream_peer_kill, a_writer_blocked_on_a_dead_reader_gets_a_reset) {
  child c('i', endpoint.port());
  accept();
  ASSERT_TRUE(c.connected());
  std::vector<char> data(1U << 20, 'x');
  std::optional<arpma::error_code> end;
  asio::async_write(server, asio::buffer(data),
                    [&](arpma::error_code ec, std::size_t) { end = ec; });
  // The child never reads: the window fills and the write waits.
  EXPECT_FALSE(arpma::test::run_until(
      io, [&] { return end.has_value(); }, 200ms));
  c.kill();
  ASSERT_TRUE(arpma::test::run_until(
      io, [&] { return end.has_value(); }, 60s))
      << "hung";
  EXPECT_EQ(*end, asio::error::connection_reset) << end->message();
}

}  // namespace

}  // namespace stream_peer_kill_integration_test

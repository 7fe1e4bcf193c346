// The whole connection lifecycle on the provider the environment chooses
// (soft on loopback here; rdma-core in the Soft-RoCE guest): C++ coroutines,
// callbacks, and the C API, each side driving its own end.
#include "arpma/endpoint.hpp"

#include "arpma/conn_req.hpp"
#include "arpma/connection.hpp"
#include "arpma/error.hpp"
#include "arpma/peer.hpp"

#include <gtest/gtest.h>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

std::string test_addr() {
  const char* env = std::getenv("ARPMA_TEST_ADDR");  // NOLINT(concurrency-mt-unsafe)
  return env != nullptr && *env != '\0' ? env : "127.0.0.1";
}

std::vector<std::uint8_t> bytes(std::string_view s) { return {s.begin(), s.end()}; }

std::string text(std::span<const std::uint8_t> data, std::size_t n) {
  return {data.begin(), data.begin() + static_cast<std::ptrdiff_t>(std::min(n, data.size()))};
}

void rethrow(const std::exception_ptr& e) {
  if (e) std::rethrow_exception(e);
}

class lifecycle : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = arpma::get_ibv_context(addr, arpma::ibv_context_type::local);
    ASSERT_TRUE(dev) << addr << ": " << dev.error().message();
    auto p = arpma::peer::create(dev.value());
    ASSERT_TRUE(p) << p.error().message();
    peer.emplace(std::move(p).value());
  }

  // Runs the loop until `done` or 20 s, whichever first.
  void run(const bool& done) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!done && std::chrono::steady_clock::now() < deadline) io.run_for(50ms);
    ASSERT_TRUE(done) << "timed out";
  }

  std::string addr = test_addr();
  std::optional<arpma::peer> peer;
  asio::io_context io;
};

TEST_F(lifecycle, coroutines_hello_each_way_then_client_disconnects) {
  auto ep = arpma::endpoint::listen(io.get_executor(), *peer, addr, "0");
  ASSERT_TRUE(ep) << ep.error().message();
  const auto port = std::to_string(ep.value().port());
  ASSERT_NE(port, "0");
  bool server_done = false;
  bool client_done = false;
  std::string server_heard;
  std::string client_heard;
  arpma::conn_event server_saw = arpma::conn_event::undefined;

  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto req = co_await ep.value().async_next_conn_req({}, asio::use_awaitable);
        EXPECT_TRUE(req.incoming());
        server_heard = text(req.private_data(), 12);
        auto conn = co_await req.async_connect(bytes("hello-server"), asio::use_awaitable);
        EXPECT_FALSE(req);  // consumed
        EXPECT_NE(conn.qp_num(), 0U);
        server_saw = co_await conn.async_next_event(asio::use_awaitable);
        co_await conn.async_disconnect(asio::use_awaitable);
        server_done = true;
      },
      rethrow);
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto req = co_await arpma::async_conn_req_new(*peer, addr, port, {}, asio::use_awaitable);
        EXPECT_FALSE(req.incoming());
        EXPECT_TRUE(req.private_data().empty());
        auto conn = co_await req.async_connect(bytes("hello-client"), asio::use_awaitable);
        client_heard = text(conn.private_data(), 12);
        co_await conn.async_disconnect(asio::use_awaitable);
        client_done = true;
      },
      rethrow);
  bool both = false;
  asio::steady_timer poll(io);
  std::function<void()> check = [&] {
    both = server_done && client_done;
    if (!both) {
      poll.expires_after(10ms);
      poll.async_wait([&](auto) { check(); });
    }
  };
  check();
  run(both);
  EXPECT_EQ(server_heard, "hello-client");
  EXPECT_EQ(client_heard, "hello-server");
  EXPECT_EQ(server_saw, arpma::conn_event::closed);
}

}  // namespace

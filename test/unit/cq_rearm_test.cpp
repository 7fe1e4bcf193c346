// A completion queue whose re-arm (req_notify_cq) fails after a completion: found by fault
// injection (test/fault/run.py), where the operations waiting on that CQ then waited forever
// for a notification that could not come. Now a failed re-arm is tried once more, and if the
// CQ still cannot be armed, what waits on it fails at once. On the soft provider, with
// req_notify_cq failing as the test says.
//
// Which wake-up takes the event of a completion is timing, as on verbs: the channel may
// wake for a frame before it holds the event, and the drain that follows completes the
// operation and queues the event (an armed CQ signals whoever polls it first); the next
// wait then takes it at once. So the tests count re-arms only after an operation that
// cannot complete without that event.
#include "arpma/connection.hpp"

#include "arpma/conn_req.hpp"
#include "arpma/endpoint.hpp"
#include "arpma/mr.hpp"
#include "arpma/peer.hpp"
#include "provider/provider.hpp"
#include "provider/soft/soft_provider.hpp"
#include "support/wait.hpp"

#include <gtest/gtest.h>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>

#include <cerrno>
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cq_rearm_test {

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

// The soft provider, with req_notify_cq failing `failures` times once `armed` is set.
class rearm_failing : public arpma::provider::soft_provider {
 public:
  std::error_code req_notify_cq(arpma::provider::cq* cq, bool solicited_only) override {
    if (armed && failures > 0) {
      --failures;
      ++failed;
      return {EIO, std::system_category()};
    }
    return soft_provider::req_notify_cq(cq, solicited_only);
  }
  bool armed = false;
  int failures = 0;
  int failed = 0;
};

constexpr std::size_t region = 4096;

class cq_rearm : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = arpma::get_ibv_context("127.0.0.1", arpma::ibv_context_type::local);
    ASSERT_TRUE(dev) << dev.error().message();
    auto p = arpma::peer::create(dev.value());
    ASSERT_TRUE(p);
    peer.emplace(std::move(p).value());
    auto s = arpma::local_mr::reg(*peer, server_memory.data(), region, arpma::mr_usage::write_dst);
    auto c = arpma::local_mr::reg(*peer, client_memory.data(), region,
                                  arpma::mr_usage::write_src | arpma::mr_usage::recv);
    ASSERT_TRUE(s && c);
    server_mr = std::move(s).value();
    client_mr = std::move(c).value();
    auto ep = arpma::endpoint::listen(io.get_executor(), *peer, "127.0.0.1", "0");
    ASSERT_TRUE(ep) << ep.error().message();
    endpoint = std::move(ep).value();
    connect();
  }

  void TearDown() override {
    (void)client.close();
    (void)server.close();
    (void)endpoint.shutdown();
  }

  /// Runs the loop until `done()` (at most 10s); whether it holds.
  template <class Done>
  [[nodiscard]] bool run_until(Done done, std::chrono::milliseconds limit = 10s) {
    return arpma::test::run_until(io, done, limit);
  }

  void connect() {
    bool accepted = false;
    bool connected = false;
    endpoint.async_next_conn_req({}, [&](std::error_code ec, arpma::conn_req in) {
      ASSERT_FALSE(ec);
      in.async_connect(server_mr.descriptor(), [&](std::error_code ec2, arpma::connection c) {
        EXPECT_FALSE(ec2) << ec2.message();
        server = std::move(c);
        accepted = true;
      });
    });
    std::optional<arpma::conn_req> req;
    arpma::async_conn_req_new(*peer, "127.0.0.1", std::to_string(endpoint.port()), {},
                              asio::bind_executor(io, [&](std::error_code ec, arpma::conn_req r) {
                                ASSERT_FALSE(ec) << ec.message();
                                req.emplace(std::move(r));
                                req->async_connect({},
                                                   [&](std::error_code ec2, arpma::connection c) {
                                                     EXPECT_FALSE(ec2) << ec2.message();
                                                     client = std::move(c);
                                                     connected = true;
                                                   });
                              }));
    ASSERT_TRUE(run_until([&] { return accepted && connected; })) << "timed out";
    auto remote = arpma::remote_mr::from_descriptor(client.private_data());
    ASSERT_TRUE(remote);
    server_region = remote.value();
  }

  /// Runs the loop until the operation `start(handler)` began completes (at most 10s); its outcome.
  template <class Start>
  std::error_code outcome_of(Start start) {
    std::optional<std::error_code> outcome;
    start([&](std::error_code ec, arpma::completion) { outcome = ec; });
    EXPECT_TRUE(run_until([&] { return outcome.has_value(); })) << "timed out";
    return outcome.value_or(std::make_error_code(std::errc::timed_out));
  }

  /// One 8-byte write from the client; its outcome.
  std::error_code write_once() {
    return outcome_of([&](auto handler) {
      client.async_write(arpma::buffer(server_region, 0, 8).value(),
                         arpma::buffer(client_mr, 0, 8).value(), std::move(handler));
    });
  }

  /// A receive nobody sends to: only its CQ's event could end its wait; its outcome.
  std::error_code receive_once() {
    return outcome_of([&](auto handler) {
      client.async_recv(arpma::buffer(client_mr, 0, 8).value(), std::move(handler));
    });
  }

  rearm_failing provider;
  arpma::provider::scoped_override use{provider};
  asio::io_context io;
  std::optional<arpma::peer> peer;
  std::vector<char> server_memory = std::vector<char>(region);
  std::vector<char> client_memory = std::vector<char>(region);
  arpma::local_mr server_mr;
  arpma::local_mr client_mr;
  arpma::endpoint endpoint;
  arpma::connection server;
  arpma::connection client;
  arpma::remote_mr server_region;
};

TEST_F(cq_rearm, a_failed_rearm_is_tried_again_and_later_operations_complete) {
  provider.armed = true;
  provider.failures = 1;
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(write_once()) << "write " << i;
  EXPECT_EQ(provider.failed, 1);
}

TEST_F(cq_rearm, a_cq_that_cannot_be_rearmed_fails_what_waits_on_it_instead_of_hanging) {
  provider.armed = true;
  provider.failures = 1000;
  // the write whose completion came with the failed re-arm still completes
  EXPECT_FALSE(write_once());
  // nothing can signal this CQ any more: what waits on it fails, it does not hang
  EXPECT_EQ(receive_once(), std::errc::operation_canceled);
  EXPECT_EQ(provider.failed, 2);  // the re-arm and the second try
  // and what is started after that fails too, from the dispatcher's memory of it
  EXPECT_EQ(receive_once(), std::errc::operation_canceled);
  EXPECT_EQ(provider.failed, 2);
}

}  // namespace

}  // namespace cq_rearm_test

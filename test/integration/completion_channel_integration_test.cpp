// arpma::completion_channel end to end: many connections of each side on one
// completion channel (one fd), every operation completing on the connection
// that posted it, busy-poll, a peer's disconnect, the loop running out of
// work when nothing is pending, and the channel's lifetime.
#include "arpma/completion_channel.hpp"

#include "arpma/conn_req.hpp"
#include "arpma/connection.hpp"
#include "arpma/cq.hpp"
#include "arpma/endpoint.hpp"
#include "arpma/error.hpp"
#include "arpma/mr.hpp"
#include "arpma/peer.hpp"
#include "support/connected_pair.hpp"

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>

#include <dirent.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace completion_channel_integration_test {

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

using arpma::test::connected_pair;

// Open fds of this process that are not sockets: eventfds (soft provider) or
// uverbs event files (rdma-core) — where completion channels live.
int channel_fds() {
  int n = 0;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (const dirent* e = ::readdir(dir)) {
    std::array<char, 256> target{};
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    const auto len = ::readlink(link.c_str(), target.data(), target.size() - 1);
    if (len > 0 && std::strncmp(target.data(), "anon_inode:", 11) == 0) ++n;
  }
  ::closedir(dir);
  return n;
}

constexpr std::size_t slot = 64;
constexpr std::size_t pairs_n = 16;
constexpr std::size_t region = pairs_n * slot;

class completion_channel_cxx : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = arpma::get_ibv_context(addr, arpma::ibv_context_type::local);
    ASSERT_TRUE(dev) << dev.error().message();
    auto p = arpma::peer::create(dev.value());
    ASSERT_TRUE(p);
    peer.emplace(std::move(p).value());
    auto s = arpma::local_mr::reg(*peer, server_memory.data(), region, arpma::mr_usage::all);
    auto c = arpma::local_mr::reg(*peer, client_memory.data(), region, arpma::mr_usage::all);
    ASSERT_TRUE(s && c);
    server_mr = std::move(s).value();
    client_mr = std::move(c).value();
    auto sch = arpma::completion_channel::create(io.get_executor(), *peer);
    auto cch = arpma::completion_channel::create(io.get_executor(), *peer);
    ASSERT_TRUE(sch && cch);
    server_channel = std::move(sch).value();
    client_channel = std::move(cch).value();
    auto ep = arpma::endpoint::listen(io.get_executor(), *peer, addr, "0");
    ASSERT_TRUE(ep) << ep.error().message();
    endpoint = std::move(ep).value();
  }

  /// Runs the loop until `done()` (at most 30s); whether it holds.
  template <class Done>
  [[nodiscard]] bool run_until(Done done, std::chrono::milliseconds limit = 30s) {
    return arpma::test::run_until(io, done, limit);
  }

  // Both sides on their side's common channel; the server's with an RCQ.
  connected_pair connect() {
    arpma::conn_cfg server_cfg;
    server_cfg.rcq_size = 4;
    server_channel.attach_to(server_cfg);
    arpma::conn_cfg client_cfg;
    client_channel.attach_to(client_cfg);
    return arpma::test::connect_pair(io, *peer, endpoint, server_cfg, client_cfg);
  }

  arpma::remote_mr server_region() const {
    const auto desc = server_mr.descriptor();
    return arpma::remote_mr::from_descriptor(desc).value();
  }

  // On every pair at once: a write into its server slot, a read back into
  // its client slot, and a send into a receive posted on its server side.
  void exercise(std::vector<connected_pair>& pairs) {
    const auto remote = server_region();
    std::size_t done = 0;
    std::vector<std::string> received(pairs.size());
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      const std::string text = "pair " + std::to_string(i) + " writes";
      std::memset(client_memory.data() + i * slot, 0, slot);
      std::memcpy(client_memory.data() + i * slot, text.data(), text.size());
      auto& client = pairs[i].client;
      pairs[i].server.async_recv(arpma::buffer(server_mr, i * slot, slot).value(),
                                 [&, i](std::error_code ec, arpma::completion c) {
                                   EXPECT_FALSE(ec) << ec.message();
                                   EXPECT_EQ(c.qp_num, pairs[i].server.qp_num())
                                       << "on the connection that posted it";
                                   received[i].assign(server_memory.data() + i * slot, c.byte_len);
                                   ++done;
                                 });
      client.async_write(
          arpma::buffer(remote, i * slot, slot).value(),
          arpma::buffer(client_mr, i * slot, slot).value(),
          [&, i, remote](std::error_code ec, arpma::completion) {
            EXPECT_FALSE(ec) << ec.message();
            std::memset(client_memory.data() + i * slot, 0, slot);  // read back over it
            pairs[i].client.async_read(
                arpma::buffer(client_mr, i * slot, slot).value(),
                arpma::buffer(remote, i * slot, slot).value(),
                [&, i](std::error_code ec2, arpma::completion) {
                  EXPECT_FALSE(ec2) << ec2.message();
                  EXPECT_EQ(std::string(client_memory.data() + i * slot),
                            "pair " + std::to_string(i) + " writes");
                  // The receive slot on the server is the one just read: send after.
                  const std::string msg = "hello from " + std::to_string(i);
                  std::memcpy(client_memory.data() + i * slot, msg.data(), msg.size());
                  pairs[i].client.async_send(arpma::buffer(client_mr, i * slot, msg.size()).value(),
                                             [&](std::error_code ec3, arpma::completion) {
                                               EXPECT_FALSE(ec3) << ec3.message();
                                               ++done;
                                             });
                });
          });
    }
    ASSERT_TRUE(run_until([&] { return done == 2 * pairs.size(); })) << "timed out";
    for (std::size_t i = 0; i < pairs.size(); ++i)
      EXPECT_EQ(received[i], "hello from " + std::to_string(i));
  }

  std::string addr = arpma::test::test_addr();
  std::optional<arpma::peer> peer;
  asio::io_context io;
  std::vector<char> server_memory = std::vector<char>(region);
  std::vector<char> client_memory = std::vector<char>(region);
  arpma::local_mr server_mr;
  arpma::local_mr client_mr;
  arpma::completion_channel server_channel;
  arpma::completion_channel client_channel;
  arpma::endpoint endpoint;
};

TEST_F(completion_channel_cxx, many_connections_use_one_fd_and_each_completes_its_own) {
  std::vector<connected_pair> pairs;
  pairs.push_back(connect());
  const int fds_with_one = channel_fds();
  for (std::size_t i = 1; i < pairs_n; ++i) pairs.push_back(connect());
  EXPECT_EQ(channel_fds(), fds_with_one) << "no completion channel per connection";
  EXPECT_EQ(server_channel.cq_count(), 2 * pairs_n) << "CQ and RCQ of each server connection";
  EXPECT_EQ(client_channel.cq_count(), pairs_n);

  exercise(pairs);
  exercise(pairs);  // the CQs were re-armed: a second round fires again
}

TEST_F(completion_channel_cxx, the_loop_runs_out_of_work_when_nothing_is_pending) {
  std::vector<connected_pair> pairs;
  for (int i = 0; i < 2; ++i) pairs.push_back(connect());
  exercise(pairs);
  // Nothing pending: the common channel's fd is not watched, so run() ends.
  io.restart();
  io.run_for(3s);
  EXPECT_TRUE(io.stopped()) << "something still holds the io_context";
}

TEST_F(completion_channel_cxx, closing_a_connection_with_a_pending_receive_lets_the_loop_end) {
  std::vector<connected_pair> pairs;
  for (int i = 0; i < 2; ++i) pairs.push_back(connect());
  std::optional<arpma::error_code> aborted;
  pairs[0].server.async_recv(arpma::buffer(server_mr, 0, slot).value(),
                             [&](arpma::error_code ec, arpma::completion) { aborted = ec; });
  io.restart();
  io.poll();  // the receive is posted and the channel's fd watched
  EXPECT_FALSE(aborted.has_value());
  (void)pairs[0].server.close();
  ASSERT_TRUE(run_until([&] { return aborted.has_value(); })) << "timed out";
  EXPECT_EQ(*aborted, asio::error::operation_aborted);
  // Nobody waits on the channel any more: its fd must not keep the loop busy.
  io.restart();
  io.run_for(3s);
  EXPECT_TRUE(io.stopped()) << "the common channel's fd is still watched";
  pairs.erase(pairs.begin());
  exercise(pairs);  // the others go on
}

TEST_F(completion_channel_cxx, busy_poll_connections_share_the_channel_too) {
  std::vector<connected_pair> pairs;
  for (int i = 0; i < 4; ++i) pairs.push_back(connect());
  pairs[0].client.set_busy_poll(200us);
  pairs[1].server.set_busy_poll(200us);
  for (int round = 0; round < 3; ++round) exercise(pairs);
}

TEST_F(completion_channel_cxx, raw_waits_are_refused_as_on_a_shared_channel) {
  auto p = connect();
  std::optional<std::error_code> got;
  p.client.completion_queue().async_wait([&](std::error_code ec) { got = ec; });
  ASSERT_TRUE(run_until([&] { return got.has_value(); })) << "timed out";
  EXPECT_EQ(*got, arpma::errc::shared_channel);
  // poll() still works: nothing there yet.
  std::array<arpma::completion, 4> wcs{};
  auto polled = p.client.completion_queue().poll(wcs);
  ASSERT_TRUE(polled) << polled.error().message();
  EXPECT_EQ(polled.value(), 0u);
}

TEST_F(completion_channel_cxx, a_peer_gone_fails_the_receives_pending_on_the_channel) {
  std::vector<connected_pair> pairs;
  for (int i = 0; i < 3; ++i) pairs.push_back(connect());
  std::optional<std::error_code> lost;
  pairs[1].server.async_recv(arpma::buffer(server_mr, 0, slot).value(),
                             [&](std::error_code ec, arpma::completion) { lost = ec; });
  bool closed = false;
  pairs[1].client.async_disconnect([&](std::error_code) { closed = true; });
  ASSERT_TRUE(run_until([&] { return closed && lost.has_value(); })) << "timed out";
  EXPECT_TRUE(*lost) << "a flushed receive is an error";
  pairs[1] = {};
  // The other connections on the same channel go on.
  pairs.erase(pairs.begin() + 1);
  exercise(pairs);
}

TEST_F(completion_channel_cxx, the_channel_outlives_its_handle_and_goes_with_its_last_user) {
  std::vector<connected_pair> pairs;
  for (int i = 0; i < 2; ++i) pairs.push_back(connect());
  std::weak_ptr<arpma::detail::comp_channel_state> server_state =
      arpma::detail::access::state(server_channel);
  EXPECT_FALSE(server_channel.close()) << "connections still use it";
  EXPECT_FALSE(server_state.expired());
  exercise(pairs);
  pairs[0] = {};
  EXPECT_FALSE(server_state.expired());
  pairs[1] = {};
  EXPECT_TRUE(server_state.expired()) << "the last connection destroyed it";
}

}  // namespace

}  // namespace completion_channel_integration_test

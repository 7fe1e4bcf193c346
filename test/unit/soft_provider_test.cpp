// The soft provider's device, address/route resolution and the verbs objects
// of a connection request — through arpma's C++ and C APIs, on loopback.
#include "provider/soft/soft_provider.hpp"

#include "arpma/conn_req.hpp"
#include "arpma/error.hpp"
#include "arpma/peer.hpp"
#include "support/provider_events.hpp"
#include "support/raw_peer.hpp"

#include <gtest/gtest.h>
#include <librpma.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <unistd.h>
#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace soft_provider_test {

namespace {

class soft_provider_test : public ::testing::Test {
 protected:
  arpma::provider::soft_provider soft;
  arpma::provider::scoped_override use_soft{soft};
};

TEST_F(soft_provider_test, device_lookup_accepts_local_and_routable_addresses) {
  for (const char* addr : {"127.0.0.1", "::1", "localhost"}) {
    auto local = arpma::get_ibv_context(addr, arpma::ibv_context_type::local);
    ASSERT_TRUE(local) << addr << ": " << local.error().message();
    EXPECT_TRUE(soft.owns(local.value()));
    auto remote = arpma::get_ibv_context(addr, arpma::ibv_context_type::remote);
    ASSERT_TRUE(remote) << addr << ": " << remote.error().message();
    EXPECT_EQ(remote.value(), local.value()) << "one process-wide device";
  }
}

TEST_F(soft_provider_test, an_address_of_another_host_is_not_local) {
  auto found = arpma::get_ibv_context("192.0.2.254", arpma::ibv_context_type::local);
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error(), std::errc::address_not_available);
  EXPECT_EQ(found.error(), arpma::errc::provider);
}

TEST_F(soft_provider_test, conn_req_new_over_loopback_in_cxx_and_c) {
  auto dev = arpma::get_ibv_context("127.0.0.1", arpma::ibv_context_type::remote);
  ASSERT_TRUE(dev);
  auto peer = arpma::peer::create(dev.value());
  ASSERT_TRUE(peer);
  auto req = arpma::conn_req_new(peer.value(), "127.0.0.1", "7204");
  ASSERT_TRUE(req) << req.error().message();
  EXPECT_NE(req.value().qp_num(), 0u);
  EXPECT_LT(req.value().qp_num(), 1u << 24);

  rpma_peer* cpeer = nullptr;
  ASSERT_EQ(rpma_peer_new(dev.value(), &cpeer), 0);
  rpma_conn_req* creq = nullptr;
  EXPECT_EQ(rpma_conn_req_new(cpeer, "::1", "7204", nullptr, &creq), 0);
  EXPECT_EQ(rpma_conn_req_delete(&creq), 0);
  EXPECT_EQ(rpma_peer_delete(&cpeer), 0);
}

TEST_F(soft_provider_test, an_unroutable_address_gives_addr_error) {
  auto dev = arpma::get_ibv_context("127.0.0.1", arpma::ibv_context_type::local);
  ASSERT_TRUE(dev);
  auto peer = arpma::peer::create(dev.value());
  ASSERT_TRUE(peer);
  // The limited broadcast address has no unicast route: the lookup says EACCES.
  auto req = arpma::conn_req_new(peer.value(), "255.255.255.255", "7204");
  ASSERT_FALSE(req);
  EXPECT_EQ(req.error(), std::errc::permission_denied);
  EXPECT_EQ(req.error(), arpma::errc::provider);
}

TEST_F(soft_provider_test, many_requests_in_flight_on_one_loop) {
  auto dev = arpma::get_ibv_context("127.0.0.1", arpma::ibv_context_type::remote);
  ASSERT_TRUE(dev);
  auto peer = arpma::peer::create(dev.value());
  ASSERT_TRUE(peer);
  boost::asio::io_context io;
  std::vector<arpma::conn_req> ready;
  int failed = 0;
  for (int i = 0; i < 1000; ++i)
    arpma::async_conn_req_new(io.get_executor(), peer.value(), "127.0.0.1", "7204",
                              arpma::conn_cfg{}, [&](std::error_code ec, arpma::conn_req r) {
                                if (ec) ++failed;
                                ready.push_back(std::move(r));
                              });
  io.run();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(ready.size(), 1000u);
}

// Running out of file descriptors is an error code, never an exception into C.
TEST_F(soft_provider_test, fd_exhaustion_is_a_provider_error) {
  ibv_context* dev = nullptr;
  ASSERT_EQ(rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev), 0);
  rpma_peer* peer = nullptr;
  ASSERT_EQ(rpma_peer_new(dev, &peer), 0);
  rpma_conn_req* warm = nullptr;  // the thread's loop and its fds exist from here on
  ASSERT_EQ(rpma_conn_req_new(peer, "127.0.0.1", "7204", nullptr, &warm), 0);
  ASSERT_EQ(rpma_conn_req_delete(&warm), 0);

  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  std::vector<rpma_conn_req*> held;
  int last = 0;
  {
    rlimit low = saved;
    low.rlim_cur = 64;
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
    for (int i = 0; i < 200 && last == 0; ++i) {
      rpma_conn_req* req = nullptr;
      last = rpma_conn_req_new(peer, "127.0.0.1", "7204", nullptr, &req);
      if (last == 0) held.push_back(req);
    }
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  }
  EXPECT_EQ(last, RPMA_E_PROVIDER);
  EXPECT_FALSE(held.empty());
  for (auto* req : held) EXPECT_EQ(rpma_conn_req_delete(&req), 0);
  EXPECT_EQ(rpma_peer_delete(&peer), 0);
}

TEST_F(soft_provider_test, objects_in_use_refuse_to_go) {
  auto dev = arpma::get_ibv_context("127.0.0.1", arpma::ibv_context_type::remote);
  ASSERT_TRUE(dev);
  auto pd = soft.alloc_pd(dev.value());
  ASSERT_TRUE(pd);
  auto channel = soft.create_event_channel();
  ASSERT_TRUE(channel);
  auto id = soft.create_id(channel.value(), 1);
  ASSERT_TRUE(id);
  EXPECT_EQ(soft.resolve_route(id.value(), 100), std::errc::invalid_argument)
      << "route before address";
  auto cq = soft.create_cq(dev.value(), 4, nullptr);
  ASSERT_TRUE(cq);
  arpma::provider::qp_config config;
  config.send_cq = config.recv_cq = cq.value();
  EXPECT_EQ(soft.create_qp(id.value(), pd.value(), config), std::errc::invalid_argument)
      << "a QP needs a resolved address";
  EXPECT_FALSE(soft.destroy_cq(cq.value()));
  EXPECT_FALSE(soft.destroy_id(id.value()));
  soft.destroy_event_channel(channel.value());
  EXPECT_FALSE(soft.dealloc_pd(pd.value()));
}

TEST_F(soft_provider_test, a_completion_channel_with_cqs_refuses_to_go) {
  auto dev = arpma::get_ibv_context("127.0.0.1", arpma::ibv_context_type::remote);
  ASSERT_TRUE(dev);
  auto channel = soft.create_comp_channel(dev.value());
  ASSERT_TRUE(channel);
  auto first = soft.create_cq(dev.value(), 4, channel.value());
  ASSERT_TRUE(first);
  auto second = soft.create_cq(dev.value(), 4, channel.value());
  ASSERT_TRUE(second);
  EXPECT_EQ(soft.destroy_comp_channel(channel.value()), std::errc::device_or_resource_busy);
  EXPECT_FALSE(soft.destroy_cq(first.value()));
  EXPECT_EQ(soft.destroy_comp_channel(channel.value()), std::errc::device_or_resource_busy)
      << "one CQ is left";
  EXPECT_FALSE(soft.destroy_cq(second.value()));
  EXPECT_FALSE(soft.destroy_comp_channel(channel.value()));
}

/// The state letter (R, S, ...) of each of this process's soft progress threads, by tid.
std::map<std::string, char> progress_threads() {
  std::map<std::string, char> out;
  std::error_code ec;
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm(t.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name != "arpma-soft") continue;
    std::ifstream stat_file(t.path() / "stat");
    std::string stat;
    std::getline(stat_file, stat);
    const auto paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size())
      out[t.path().filename().string()] = stat[paren + 2];
  }
  return out;
}

/// Whether every thread in `tids` is in `state` within `limit`.
bool all_in_state(const std::vector<std::string>& tids, char state,
                  std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const auto now = progress_threads();
    const bool all = std::all_of(tids.begin(), tids.end(), [&](const std::string& tid) {
      const auto it = now.find(tid);
      return it != now.end() && it->second == state;
    });
    if (all || std::chrono::steady_clock::now() >= end) return all;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

TEST_F(soft_provider_test, the_progress_thread_spins_after_traffic_not_after_housekeeping) {
  auto l = soft.current_limits();
  l.progress_spin = std::chrono::seconds(5);  // long enough to be seen under any load
  soft.set_limits(l);
  const auto before = progress_threads();
  // Listening starts the progress thread and gives it work that moves no
  // bytes (the accept is only started).
  auto channel = soft.create_event_channel();
  ASSERT_TRUE(channel);
  auto id = soft.create_id(channel.value(), 0);
  ASSERT_TRUE(id);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_FALSE(soft.bind_addr(id.value(), reinterpret_cast<const sockaddr*>(&any)));
  ASSERT_FALSE(soft.listen(id.value(), 1));
  // (It names itself once running.)
  std::vector<std::string> ours;
  const auto named_by = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (ours.empty() && std::chrono::steady_clock::now() < named_by) {
    for (const auto& [tid, state] : progress_threads())
      if (!before.contains(tid)) ours.push_back(tid);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(ours.size(), 1u) << "this provider's progress thread";
  // No traffic, no spin: asleep well before the spin time would have passed.
  EXPECT_TRUE(all_in_state(ours, 'S', std::chrono::milliseconds(2500)));
  // A peer connects and sends its REQ: bytes moved, so it keeps polling.
  const int peer = arpma::test::raw::raw_connect(soft.local_port(id.value()));
  ASSERT_GE(peer, 0);
  ASSERT_TRUE(arpma::test::raw::write_all(
      peer, arpma::test::raw::wire_frame(1, {0xff, 0xff, 7, 7, 0, 0, 0, 1})));
  const auto request = arpma::test::next_event(soft, channel.value(), std::chrono::seconds(5));
  ASSERT_TRUE(request && request->type == arpma::provider::cm_event_type::connect_request);
  EXPECT_TRUE(all_in_state(ours, 'R', std::chrono::milliseconds(1000)));
  // Nothing more comes: it goes to sleep once the spin time has passed.
  EXPECT_TRUE(all_in_state(ours, 'S', std::chrono::seconds(15)));
  ::close(peer);
  EXPECT_FALSE(soft.destroy_id(request->id));
  EXPECT_FALSE(soft.destroy_id(id.value()));
  soft.destroy_event_channel(channel.value());
}

TEST_F(soft_provider_test, the_progress_spin_is_set_by_the_environment_within_bounds) {
  const auto made_with = [](const char* value) {
    ::setenv("ARPMA_SOFT_PROGRESS_SPIN_US", value, 1);
    const arpma::provider::soft_provider p;
    ::unsetenv("ARPMA_SOFT_PROGRESS_SPIN_US");
    return p.current_limits().progress_spin;
  };
  const auto fallback = arpma::provider::soft_provider::limits{}.progress_spin;
  EXPECT_EQ(made_with("0"), std::chrono::microseconds(0));
  EXPECT_EQ(made_with("250"), std::chrono::microseconds(250));
  EXPECT_EQ(made_with("1000000"), std::chrono::microseconds(1000000));
  for (const char* bad : {"", "-1", "1000001", "12us", "x"})
    EXPECT_EQ(made_with(bad), fallback) << bad;
}

}  // namespace

}  // namespace soft_provider_test

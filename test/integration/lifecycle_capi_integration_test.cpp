// The C API's lifecycle end to end, as C programs use it: blocking calls on
// two threads, and non-blocking fds multiplexed with epoll on one thread
// (librpma's example 06). Provider: whatever the environment chooses.
#include <librpma.h>
#include "support/test_addr.hpp"
#include "support/transport.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>

namespace lifecycle_capi_integration_test {

using arpma::test::free_port;
using arpma::test::test_addr;
using namespace std::chrono_literals;

namespace {

// Kills the test binary if a blocking call never returns: every test is bounded.
class watchdog {
 public:
  explicit watchdog(std::chrono::seconds limit)
      : thread_([this, limit] {
          const auto end = std::chrono::steady_clock::now() + limit;
          while (!done_ && std::chrono::steady_clock::now() < end)
            std::this_thread::sleep_for(10ms);
          if (!done_) {
            std::fprintf(stderr, "watchdog: test still blocked after %llds\n",
                         static_cast<long long>(limit.count()));
            std::abort();
          }
        }) {}
  watchdog(const watchdog&) = delete;
  watchdog& operator=(const watchdog&) = delete;
  ~watchdog() {
    done_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// A port free for TCP on `addr` (which is what the soft provider listens
// with; rdma_cm's port space on a real device is separate, so it is free there too).
void set_nonblocking(int fd) { ASSERT_EQ(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0); }

class lifecycle_capi : public ::testing::Test {
 protected:
  void SetUp() override {
    ibv_context* dev = nullptr;
    ASSERT_EQ(rpma_utils_get_ibv_context(addr.c_str(), RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev), 0);
    ASSERT_EQ(rpma_peer_new(dev, &peer), 0);
    port = free_port(addr);
  }
  void TearDown() override { EXPECT_EQ(rpma_peer_delete(&peer), 0); }

  std::string addr = test_addr();
  std::string port;
  rpma_peer* peer = nullptr;
};

TEST_F(lifecycle_capi, blocking_calls_on_two_threads) {
  const watchdog guard(30s);
  std::atomic<bool> listening{false};
  std::string server_heard;
  std::string client_heard;
  rpma_conn_event server_last = RPMA_CONN_UNDEFINED;
  std::thread server([&] {
    rpma_ep* ep = nullptr;
    ASSERT_EQ(rpma_ep_listen(peer, addr.c_str(), port.c_str(), &ep), 0);
    listening = true;
    rpma_conn_req* req = nullptr;
    ASSERT_EQ(rpma_ep_next_conn_req(ep, nullptr, &req), 0);  // blocks until the client comes
    rpma_conn_private_data in{};
    ASSERT_EQ(rpma_conn_req_get_private_data(req, &in), 0);
    server_heard.assign(static_cast<const char*>(in.ptr), 5);
    char hello[] = "world";
    const rpma_conn_private_data out{hello, sizeof hello};
    rpma_conn* conn = nullptr;
    ASSERT_EQ(rpma_conn_req_connect(&req, &out, &conn), 0);
    EXPECT_EQ(req, nullptr);
    rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    ASSERT_EQ(rpma_conn_next_event(conn, &ev), 0);
    EXPECT_EQ(ev, RPMA_CONN_ESTABLISHED);
    ASSERT_EQ(rpma_conn_next_event(conn, &server_last), 0);
    EXPECT_EQ(rpma_conn_disconnect(conn), 0);
    EXPECT_EQ(rpma_conn_delete(&conn), 0);
    EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
    EXPECT_EQ(ep, nullptr);
  });
  while (!listening) std::this_thread::sleep_for(1ms);
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer, addr.c_str(), port.c_str(), nullptr, &req), 0);
  char hello[] = "hello";
  const rpma_conn_private_data out{hello, sizeof hello};
  rpma_conn* conn = nullptr;
  ASSERT_EQ(rpma_conn_req_connect(&req, &out, &conn), 0);
  rpma_conn_event ev = RPMA_CONN_UNDEFINED;
  ASSERT_EQ(rpma_conn_next_event(conn, &ev), 0);
  EXPECT_EQ(ev, RPMA_CONN_ESTABLISHED);
  rpma_conn_private_data in{};
  ASSERT_EQ(rpma_conn_get_private_data(conn, &in), 0);
  ASSERT_NE(in.ptr, nullptr);
  client_heard.assign(static_cast<const char*>(in.ptr), 5);
  EXPECT_EQ(rpma_conn_disconnect(conn), 0);
  ASSERT_EQ(rpma_conn_next_event(conn, &ev), 0);
  EXPECT_EQ(ev, RPMA_CONN_CLOSED);
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
  server.join();
  EXPECT_EQ(server_heard, "hello");
  EXPECT_EQ(client_heard, "world");
  EXPECT_EQ(server_last, RPMA_CONN_CLOSED);
}

// librpma's example 06: one thread, every fd non-blocking, epoll decides.
TEST_F(lifecycle_capi, many_connections_on_one_thread_through_epoll) {
  const watchdog guard(60s);
  constexpr int count = 16;
  const int epfd = epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(epfd, 0);
  rpma_ep* ep = nullptr;
  ASSERT_EQ(rpma_ep_listen(peer, addr.c_str(), port.c_str(), &ep), 0);
  int ep_fd = -1;
  ASSERT_EQ(rpma_ep_get_fd(ep, &ep_fd), 0);
  set_nonblocking(ep_fd);
  rpma_conn_req* none = nullptr;
  EXPECT_EQ(rpma_ep_next_conn_req(ep, nullptr, &none), RPMA_E_NO_EVENT);
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.ptr = nullptr;  // the endpoint
  ASSERT_EQ(epoll_ctl(epfd, EPOLL_CTL_ADD, ep_fd, &e), 0);

  struct side {
    rpma_conn* conn = nullptr;
    bool client = false;
    bool established = false;
    bool closed = false;
  };
  std::map<rpma_conn*, side> sides;
  const auto watch = [&](rpma_conn* conn, bool client) {
    int fd = -1;
    ASSERT_EQ(rpma_conn_get_event_fd(conn, &fd), 0);
    set_nonblocking(fd);
    epoll_event ce{};
    ce.events = EPOLLIN;
    ce.data.ptr = conn;
    ASSERT_EQ(epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ce), 0);
    sides[conn] = side{conn, client};
  };
  for (int i = 0; i < count; ++i) {
    rpma_conn_req* req = nullptr;
    ASSERT_EQ(rpma_conn_req_new(peer, addr.c_str(), port.c_str(), nullptr, &req), 0);
    rpma_conn* conn = nullptr;
    ASSERT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), 0);
    watch(conn, true);
  }
  int closed = 0;
  int no_event = 0;
  const auto end = std::chrono::steady_clock::now() + 30s;
  while (closed < 2 * count && std::chrono::steady_clock::now() < end) {
    epoll_event ready[8];
    const int n = epoll_wait(epfd, ready, 8, 100);
    for (int i = 0; i < n; ++i) {
      if (ready[i].data.ptr == nullptr) {
        for (;;) {
          rpma_conn_req* req = nullptr;
          const int rc = rpma_ep_next_conn_req(ep, nullptr, &req);
          if (rc == RPMA_E_NO_EVENT) {
            ++no_event;
            break;
          }
          ASSERT_EQ(rc, 0);
          rpma_conn* conn = nullptr;
          ASSERT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), 0);
          watch(conn, false);
        }
        continue;
      }
      auto& s = sides.at(static_cast<rpma_conn*>(ready[i].data.ptr));
      for (;;) {
        rpma_conn_event ev = RPMA_CONN_UNDEFINED;
        const int rc = rpma_conn_next_event(s.conn, &ev);
        if (rc == RPMA_E_NO_EVENT) {
          ++no_event;
          break;
        }
        ASSERT_EQ(rc, 0);
        if (ev == RPMA_CONN_ESTABLISHED) {
          s.established = true;
          if (s.client) {
            EXPECT_EQ(rpma_conn_disconnect(s.conn), 0);
          }
        } else if (ev == RPMA_CONN_CLOSED && !s.closed) {
          s.closed = true;
          ++closed;
        }
      }
    }
  }
  EXPECT_EQ(closed, 2 * count);
  EXPECT_GT(no_event, 0);
  for (auto& [conn, s] : sides) {
    EXPECT_TRUE(s.established);
    rpma_conn* doomed = conn;
    EXPECT_EQ(rpma_conn_delete(&doomed), 0);
  }
  EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
  close(epfd);
}

TEST_F(lifecycle_capi, a_rejected_request_reaches_the_client_as_rejected) {
  const watchdog guard(30s);
  rpma_ep* ep = nullptr;
  ASSERT_EQ(rpma_ep_listen(peer, addr.c_str(), port.c_str(), &ep), 0);
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer, addr.c_str(), port.c_str(), nullptr, &req), 0);
  rpma_conn* conn = nullptr;
  ASSERT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), 0);
  rpma_conn_req* incoming = nullptr;
  ASSERT_EQ(rpma_ep_next_conn_req(ep, nullptr, &incoming), 0);
  EXPECT_EQ(rpma_conn_req_delete(&incoming), 0);  // rejects (and destroys the id)
  rpma_conn_event ev = RPMA_CONN_UNDEFINED;
  ASSERT_EQ(rpma_conn_next_event(conn, &ev), 0);
  EXPECT_EQ(ev, RPMA_CONN_REJECTED);
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
  EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
}

// The same program hears the same on both providers: rdma_cm (rxe) rejects
// a connection to a port without a listener; the soft provider reports its
// refused TCP connection alike.
TEST_F(lifecycle_capi, a_port_nobody_listens_on_rejects_the_connection) {
  const watchdog guard(30s);
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer, addr.c_str(), port.c_str(), nullptr, &req), 0);
  rpma_conn* conn = nullptr;
  if (arpma::test::iwarp()) {
    // iWARP's connect is the kernel's TCP connect, made inside rdma_connect: the
    // refusal is rdma_connect's ECONNREFUSED, as under librpma; the request is consumed.
    EXPECT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), RPMA_E_PROVIDER);
    EXPECT_EQ(req, nullptr);
    EXPECT_EQ(conn, nullptr);
    return;
  }
  ASSERT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), 0);
  rpma_conn_event ev = RPMA_CONN_UNDEFINED;
  ASSERT_EQ(rpma_conn_next_event(conn, &ev), 0);
  EXPECT_EQ(ev, RPMA_CONN_REJECTED) << rpma_utils_conn_event_2str(ev);
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
}

TEST_F(lifecycle_capi, shutting_down_an_endpoint_refuses_the_requests_it_did_not_take) {
  const watchdog guard(30s);
  rpma_ep* ep = nullptr;
  ASSERT_EQ(rpma_ep_listen(peer, addr.c_str(), port.c_str(), &ep), 0);
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer, addr.c_str(), port.c_str(), nullptr, &req), 0);
  rpma_conn* conn = nullptr;
  ASSERT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), 0);
  int ep_fd = -1;
  ASSERT_EQ(rpma_ep_get_fd(ep, &ep_fd), 0);
  pollfd waiting{ep_fd, POLLIN, 0};
  ASSERT_EQ(poll(&waiting, 1, 10000), 1);  // the request is there, untaken
  EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
  rpma_conn_event ev = RPMA_CONN_UNDEFINED;
  ASSERT_EQ(rpma_conn_next_event(conn, &ev), 0);
  EXPECT_TRUE(ev == RPMA_CONN_REJECTED || ev == RPMA_CONN_UNREACHABLE)
      << rpma_utils_conn_event_2str(ev);
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
}

}  // namespace

}  // namespace lifecycle_capi_integration_test

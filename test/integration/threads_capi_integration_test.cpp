// The C API from many threads, as THREAD_SAFETY.md allows: one peer shared
// by every thread, one connection per client thread (rpma_conn_req_new,
// connect, data path and teardown all concurrent with the other threads'),
// and on one connection a thread waiting for completions (rpma_cq_wait /
// rpma_cq_get_wc, the only waiter of its CQ) while two others post. Run
// under the tsan preset, these are the C API's race checks.
#include <librpma.h>
#include "support/test_addr.hpp"

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

namespace threads_capi_integration_test {

using arpma::test::free_port;
using arpma::test::test_addr;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t slice = 4096;  // each client's part of the server's region

/// Waits for one completion on `cq` (the calling thread is its only waiter).
int next_wc(rpma_cq* cq, ibv_wc& wc) {
  for (int tries = 0; tries < 10000; ++tries) {
    int got = 0;
    const int rc = rpma_cq_get_wc(cq, 1, &wc, &got);
    if (rc != RPMA_E_NO_COMPLETION) return rc;
    if (const int w = rpma_cq_wait(cq); w != 0) return w;
  }
  return RPMA_E_UNKNOWN;
}

class threads_capi : public ::testing::Test {
 protected:
  void SetUp() override {
    ibv_context* dev = nullptr;
    ASSERT_EQ(rpma_utils_get_ibv_context(addr.c_str(), RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev), 0);
    ASSERT_EQ(rpma_peer_new(dev, &peer), 0);
  }
  void TearDown() override {
    if (server.joinable()) server.join();
    EXPECT_EQ(rpma_peer_delete(&peer), 0);
  }

  /// One thread accepts `n` connections on one endpoint (the only reader of
  /// it), each given its own slice of one region, then waits until each is
  /// closed by its client.
  void serve(int n, rpma_conn_cfg* cfg) {
    std::atomic<bool> listening{false};
    memory.assign(slice * static_cast<std::size_t>(n), 0);
    server = std::thread([this, n, cfg, &listening] {
      rpma_ep* ep = nullptr;
      ASSERT_EQ(rpma_ep_listen(peer, addr.c_str(), port.c_str(), &ep), 0);
      listening = true;
      rpma_mr_local* mr = nullptr;
      ASSERT_EQ(rpma_mr_reg(peer, memory.data(), memory.size(),
                            RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC, &mr),
                0);
      char desc[21];
      ASSERT_EQ(rpma_mr_get_descriptor(mr, desc), 0);
      std::vector<rpma_conn*> conns;
      for (int i = 0; i < n; ++i) {
        rpma_conn_req* req = nullptr;
        ASSERT_EQ(rpma_ep_next_conn_req(ep, cfg, &req), 0);
        const rpma_conn_private_data pdata{desc, sizeof desc};
        rpma_conn* conn = nullptr;
        ASSERT_EQ(rpma_conn_req_connect(&req, &pdata, &conn), 0);
        rpma_conn_event ev = RPMA_CONN_UNDEFINED;
        ASSERT_EQ(rpma_conn_next_event(conn, &ev), 0);
        ASSERT_EQ(ev, RPMA_CONN_ESTABLISHED);
        conns.push_back(conn);
      }
      for (rpma_conn*& conn : conns) {
        rpma_conn_event ev = RPMA_CONN_UNDEFINED;
        ASSERT_EQ(rpma_conn_next_event(conn, &ev), 0);
        EXPECT_EQ(ev, RPMA_CONN_CLOSED);
        EXPECT_EQ(rpma_conn_delete(&conn), 0);
      }
      EXPECT_EQ(rpma_mr_dereg(&mr), 0);
      EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
    });
    while (!listening) std::this_thread::sleep_for(1ms);
  }

  rpma_conn* connect(rpma_conn_cfg* cfg, rpma_mr_remote** remote) {
    rpma_conn_req* req = nullptr;
    EXPECT_EQ(rpma_conn_req_new(peer, addr.c_str(), port.c_str(), cfg, &req), 0);
    if (req == nullptr) return nullptr;
    rpma_conn* conn = nullptr;
    EXPECT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), 0);
    rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    EXPECT_EQ(rpma_conn_next_event(conn, &ev), 0);
    EXPECT_EQ(ev, RPMA_CONN_ESTABLISHED);
    rpma_conn_private_data pdata{};
    EXPECT_EQ(rpma_conn_get_private_data(conn, &pdata), 0);
    EXPECT_EQ(rpma_mr_remote_from_descriptor(pdata.ptr, pdata.len, remote), 0);
    return conn;
  }

  static void close(rpma_conn*& conn) {
    EXPECT_EQ(rpma_conn_disconnect(conn), 0);
    rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    EXPECT_EQ(rpma_conn_next_event(conn, &ev), 0);
    EXPECT_EQ(ev, RPMA_CONN_CLOSED);
    EXPECT_EQ(rpma_conn_delete(&conn), 0);
  }

  std::string addr = test_addr();
  std::string port = free_port(addr);
  rpma_peer* peer = nullptr;
  std::thread server;
  std::vector<char> memory;
};

// Four client threads, each with its own connection: every step from
// rpma_conn_req_new to rpma_conn_delete runs concurrently with the others.
// Each writes its own pattern into its slice, reads it back, and the server's
// memory ends up holding every slice's pattern.
TEST_F(threads_capi, each_thread_its_own_connection) {
  constexpr int clients = 4;
  constexpr int rounds = 8;
  serve(clients, nullptr);
  std::vector<std::thread> threads;
  std::atomic<int> verified{0};
  for (int t = 0; t < clients; ++t)
    threads.emplace_back([this, t, &verified] {
      rpma_mr_remote* remote = nullptr;
      rpma_conn* conn = connect(nullptr, &remote);
      ASSERT_NE(conn, nullptr);
      std::vector<char> mine(2 * slice);
      rpma_mr_local* mr = nullptr;
      ASSERT_EQ(rpma_mr_reg(peer, mine.data(), mine.size(),
                            RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST, &mr),
                0);
      rpma_cq* cq = nullptr;
      ASSERT_EQ(rpma_conn_get_cq(conn, &cq), 0);
      const auto offset = static_cast<std::size_t>(t) * slice;
      bool all_equal = true;
      for (int r = 0; r < rounds; ++r) {
        std::memset(mine.data(), 'A' + t * rounds + r, slice);
        ASSERT_EQ(rpma_write(conn, remote, offset, mr, 0, slice, RPMA_F_COMPLETION_ALWAYS, nullptr),
                  0);
        ibv_wc wc{};
        ASSERT_EQ(next_wc(cq, wc), 0);
        ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
        ASSERT_EQ(
            rpma_read(conn, mr, slice, remote, offset, slice, RPMA_F_COMPLETION_ALWAYS, nullptr),
            0);
        ASSERT_EQ(next_wc(cq, wc), 0);
        ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
        all_equal = all_equal && std::memcmp(mine.data(), mine.data() + slice, slice) == 0;
      }
      EXPECT_TRUE(all_equal);
      if (all_equal) ++verified;
      close(conn);
      EXPECT_EQ(rpma_mr_remote_delete(&remote), 0);
      EXPECT_EQ(rpma_mr_dereg(&mr), 0);
    });
  for (auto& t : threads) t.join();
  server.join();
  EXPECT_EQ(verified.load(), clients);
  for (int t = 0; t < clients; ++t)
    for (std::size_t i = 0; i < slice; ++i)
      ASSERT_EQ(memory[static_cast<std::size_t>(t) * slice + i], 'A' + t * rounds + rounds - 1);
}

// One connection: a waiter thread takes every completion (rpma_cq_wait +
// rpma_cq_get_wc) while two threads post writes and reads on it
// concurrently, each op_context once. The send queue is never overfilled: a
// slot is taken before posting and given back by the waiter.
TEST_F(threads_capi, a_waiter_thread_while_two_threads_post) {
  constexpr int per_poster = 200;
  constexpr int depth = 16;
  rpma_conn_cfg* cfg = nullptr;
  ASSERT_EQ(rpma_conn_cfg_new(&cfg), 0);
  ASSERT_EQ(rpma_conn_cfg_set_sq_size(cfg, depth), 0);
  ASSERT_EQ(rpma_conn_cfg_set_cq_size(cfg, depth), 0);
  serve(1, cfg);
  rpma_mr_remote* remote = nullptr;
  rpma_conn* conn = connect(cfg, &remote);
  ASSERT_NE(conn, nullptr);
  std::vector<char> mine(2 * slice, 'x');
  rpma_mr_local* mr = nullptr;
  ASSERT_EQ(rpma_mr_reg(peer, mine.data(), mine.size(),
                        RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST, &mr),
            0);
  rpma_cq* cq = nullptr;
  ASSERT_EQ(rpma_conn_get_cq(conn, &cq), 0);

  std::counting_semaphore<depth> slots(depth);
  std::vector<int> seen(2 * per_poster, 0);
  std::atomic<int> failures{0};
  std::thread waiter([&] {
    for (int n = 0; n < 2 * per_poster; ++n) {
      ibv_wc wc{};
      if (next_wc(cq, wc) != 0 || wc.status != IBV_WC_SUCCESS) {
        ++failures;
        return;
      }
      ++seen[static_cast<std::size_t>(wc.wr_id) - 1];
      slots.release();
    }
  });
  auto poster = [&](int first, bool reads) {
    for (int i = 0; i < per_poster; ++i) {
      slots.acquire();
      // NOLINTNEXTLINE(performance-no-int-to-ptr): op_context carries an index
      auto* ctx = reinterpret_cast<void*>(static_cast<std::uintptr_t>(first + i + 1));
      // Reads from the first half of the remote slice, writes to the second.
      const std::size_t at = static_cast<std::size_t>(i % 32) * 64;
      const int rc =
          reads
              ? rpma_read(conn, mr, slice + at, remote, at, 64, RPMA_F_COMPLETION_ALWAYS, ctx)
              : rpma_write(conn, remote, slice / 2 + at, mr, at, 64, RPMA_F_COMPLETION_ALWAYS, ctx);
      if (rc != 0) {
        ++failures;
        slots.release();
      }
    }
  };
  std::thread writes(poster, 0, false);
  std::thread reads(poster, per_poster, true);
  writes.join();
  reads.join();
  if (failures.load() > 0) {
    // The waiter would wait for completions that never come: end it.
    (void)rpma_conn_disconnect(conn);
  }
  waiter.join();
  EXPECT_EQ(failures.load(), 0);
  for (int n : seen) ASSERT_EQ(n, 1);
  close(conn);
  EXPECT_EQ(rpma_mr_remote_delete(&remote), 0);
  EXPECT_EQ(rpma_mr_dereg(&mr), 0);
  server.join();
  EXPECT_EQ(rpma_conn_cfg_delete(&cfg), 0);
}

}  // namespace

}  // namespace threads_capi_integration_test

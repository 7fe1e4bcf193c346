// Every error row of the C data path and completion calls (librpma 1.3's
// manual blocks in include/librpma.h) on a real connected pair of
// the soft provider (the default here): argument errors of each posting call,
// flush NOSUPP cases, RPMA_E_NO_COMPLETION from rpma_cq_get_wc and a
// non-blocking rpma_cq_wait, rpma_cq_get_wc's num_entries rules, shared vs
// not-shared channels, a full send queue, a remote access error, completions
// on error only, rpma_mr_* argument errors and out-parameters left untouched
// on failure. Every wait is bounded (poll with a timeout).
#include <librpma.h>

#include "support/address_space.hpp"
#include "support/test_addr.hpp"

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace datapath_args_capi_test {

using arpma::test::free_port;
using arpma::test::test_addr;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t region = 4096;
constexpr int wait_ms = 10000;  // the longest any single wait may take

template <typename T>
T* sentinel() {
  return reinterpret_cast<T*>(static_cast<std::uintptr_t>(0x5e5e5e5e5e5e5e50U));
}
constexpr int sentinel_int = 0x5e5e5e5e;

void* ctx(std::uintptr_t v) { return reinterpret_cast<void*>(v); }

bool readable(int fd, int ms) {
  pollfd pfd{fd, POLLIN, 0};
  for (;;) {
    const int n = ::poll(&pfd, 1, ms);
    if (n < 0 && errno == EINTR) continue;
    return n == 1;
  }
}

void set_nonblock(int fd) {
  const int fl = ::fcntl(fd, F_GETFL);
  ASSERT_GE(fl, 0);
  ASSERT_EQ(::fcntl(fd, F_SETFL, fl | O_NONBLOCK), 0);
}

// One completion of `cq` (not on a shared channel) within `ms`, or none.
std::optional<ibv_wc> wait_wc(rpma_cq* cq, int ms = wait_ms) {
  int fd = -1;
  EXPECT_EQ(rpma_cq_get_fd(cq, &fd), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    ibv_wc wc{};
    const int rc = rpma_cq_get_wc(cq, 1, &wc, nullptr);
    if (rc == 0) return wc;
    EXPECT_EQ(rc, RPMA_E_NO_COMPLETION);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0 || !readable(fd, static_cast<int>(left))) return std::nullopt;
    const int w = rpma_cq_wait(cq);
    EXPECT_TRUE(w == 0 || w == RPMA_E_NO_COMPLETION) << w;  // a non-blocking fd may race
  }
}

// The next CM event within wait_ms (RPMA_CONN_UNDEFINED when none).
rpma_conn_event next_event(rpma_conn* conn) {
  int fd = -1;
  EXPECT_EQ(rpma_conn_get_event_fd(conn, &fd), 0);
  rpma_conn_event ev = RPMA_CONN_UNDEFINED;
  if (!readable(fd, wait_ms)) {
    ADD_FAILURE() << "no connection event within " << wait_ms << " ms";
    return ev;
  }
  EXPECT_EQ(rpma_conn_next_event(conn, &ev), 0);
  return ev;
}

class datapath_args : public ::testing::Test {
 protected:
  void SetUp() override {
    ibv_context* dev = nullptr;
    ASSERT_EQ(rpma_utils_get_ibv_context(addr.c_str(), RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev), 0);
    ASSERT_EQ(rpma_peer_new(dev, &peer), 0);
    ASSERT_EQ(rpma_conn_cfg_new(&cfg), 0);
    ibv = dev;
  }
  void TearDown() override {
    if (conn != nullptr) close();
    if (server.joinable()) server.join();
    EXPECT_EQ(rpma_mr_dereg(&mr), 0);
    EXPECT_EQ(rpma_mr_remote_delete(&remote), 0);
    EXPECT_EQ(rpma_conn_cfg_delete(&cfg), 0);
    EXPECT_EQ(rpma_peer_delete(&peer), 0);
  }

  // A server thread: accepts one connection with its region's descriptor as
  // private data (`recvs` receives posted before accepting), collects the
  // receive completions, waits for CLOSED. Every wait bounded.
  void serve(int usage, int recvs = 0, int sends = 0) {
    std::atomic<bool> listening{false};
    server = std::thread([this, usage, recvs, sends, &listening] {
      rpma_ep* ep = nullptr;
      const int lrc = rpma_ep_listen(peer, addr.c_str(), port.c_str(), &ep);
      listening = true;
      ASSERT_EQ(lrc, 0);
      rpma_mr_local* smr = nullptr;
      EXPECT_EQ(rpma_mr_reg(peer, server_memory.data(), region, usage, &smr), 0);
      int ep_fd = -1;
      EXPECT_EQ(rpma_ep_get_fd(ep, &ep_fd), 0);
      rpma_conn_req* req = nullptr;
      if (readable(ep_fd, wait_ms)) {
        EXPECT_EQ(rpma_ep_next_conn_req(ep, nullptr, &req), 0);
      } else {
        ADD_FAILURE() << "no connection request";
      }
      rpma_conn* sconn = nullptr;
      if (req != nullptr) {
        for (int i = 0; i < recvs; ++i)
          EXPECT_EQ(rpma_conn_req_recv(req, smr, static_cast<std::size_t>(i) * 64, 64,
                                       ctx(static_cast<std::uintptr_t>(i + 1))),
                    0);
        char desc[21];
        EXPECT_EQ(rpma_mr_get_descriptor(smr, desc), 0);
        const rpma_conn_private_data pdata{desc, sizeof desc};
        EXPECT_EQ(rpma_conn_req_connect(&req, &pdata, &sconn), 0);
      }
      if (sconn != nullptr) {
        EXPECT_EQ(next_event(sconn), RPMA_CONN_ESTABLISHED);
        if (recvs > 0) {
          rpma_cq* rcq = nullptr;
          EXPECT_EQ(rpma_conn_get_cq(sconn, &rcq), 0);
          for (int i = 0; i < recvs; ++i) {
            auto wc = wait_wc(rcq);
            if (!wc) break;
            server_wcs.push_back(*wc);
          }
        }
        if (sends > 0) {
          rpma_cq* scq = nullptr;
          EXPECT_EQ(rpma_conn_get_cq(sconn, &scq), 0);
          std::memcpy(server_memory.data(), "to-the-client", 14);
          for (int i = 0; i < sends; ++i) {
            EXPECT_EQ(rpma_send(sconn, smr, 0, 14, RPMA_F_COMPLETION_ALWAYS, nullptr), 0);
            auto wc = wait_wc(scq);
            EXPECT_TRUE(wc && wc->status == IBV_WC_SUCCESS);
          }
        }
        const rpma_conn_event ev = next_event(sconn);
        EXPECT_TRUE(ev == RPMA_CONN_CLOSED || ev == RPMA_CONN_LOST) << ev;
        EXPECT_EQ(rpma_conn_disconnect(sconn), 0);
        EXPECT_EQ(rpma_conn_delete(&sconn), 0);
      }
      EXPECT_EQ(rpma_mr_dereg(&smr), 0);
      EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
    });
    while (!listening) std::this_thread::sleep_for(1ms);
  }

  // Connects with `cfg`; `remote` is the server's region, `mr` a local one
  // of `usage`, `cq` the connection's main CQ.
  void connect(int usage = RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_SEND |
                           RPMA_MR_USAGE_RECV) {
    rpma_conn_req* req = nullptr;
    ASSERT_EQ(rpma_conn_req_new(peer, addr.c_str(), port.c_str(), cfg, &req), 0);
    ASSERT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), 0);
    ASSERT_EQ(next_event(conn), RPMA_CONN_ESTABLISHED);
    rpma_conn_private_data pdata{};
    ASSERT_EQ(rpma_conn_get_private_data(conn, &pdata), 0);
    ASSERT_EQ(rpma_mr_remote_from_descriptor(pdata.ptr, pdata.len, &remote), 0);
    ASSERT_EQ(rpma_mr_reg(peer, mine.data(), region, usage, &mr), 0);
    ASSERT_EQ(rpma_conn_get_cq(conn, &cq), 0);
  }

  void close() {
    EXPECT_EQ(rpma_conn_disconnect(conn), 0);
    const rpma_conn_event ev = next_event(conn);
    EXPECT_TRUE(ev == RPMA_CONN_CLOSED || ev == RPMA_CONN_LOST) << ev;
    EXPECT_EQ(rpma_conn_delete(&conn), 0);
    EXPECT_EQ(conn, nullptr);
  }

  void expect_cq_empty() {
    ibv_wc wc{};
    wc.wr_id = 0x77;
    int got = sentinel_int;
    EXPECT_EQ(rpma_cq_get_wc(cq, 1, &wc, &got), RPMA_E_NO_COMPLETION);
    EXPECT_EQ(got, sentinel_int) << "untouched on failure";
    EXPECT_EQ(wc.wr_id, 0x77U) << "untouched on failure";
  }

  std::string addr = test_addr();
  std::string port = free_port(addr);
  rpma_peer* peer = nullptr;
  ibv_context* ibv = nullptr;
  rpma_conn_cfg* cfg = nullptr;
  std::thread server;
  std::vector<char> server_memory = std::vector<char>(region);
  std::vector<ibv_wc> server_wcs;
  std::vector<char> mine = std::vector<char>(region);
  rpma_conn* conn = nullptr;
  rpma_mr_remote* remote = nullptr;
  rpma_mr_local* mr = nullptr;
  rpma_cq* cq = nullptr;
};

constexpr int always = RPMA_F_COMPLETION_ALWAYS;

TEST_F(datapath_args, null_connection_is_invalid_for_every_posting_call) {
  serve(RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY);
  connect();
  const char eight[8] = {};
  EXPECT_EQ(rpma_read(nullptr, mr, 0, remote, 0, 8, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write(nullptr, remote, 0, mr, 0, 8, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write_with_imm(nullptr, remote, 0, mr, 0, 8, always, 1, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_atomic_write(nullptr, remote, 0, eight, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_flush(nullptr, remote, 0, 8, RPMA_FLUSH_TYPE_VISIBILITY, always, nullptr),
            RPMA_E_INVAL);
  EXPECT_EQ(rpma_send(nullptr, mr, 0, 8, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_send_with_imm(nullptr, mr, 0, 8, always, 1, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_recv(nullptr, mr, 0, 8, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_apply_remote_peer_cfg(nullptr, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_apply_remote_peer_cfg(conn, nullptr), RPMA_E_INVAL);
  expect_cq_empty();
}

TEST_F(datapath_args, flags_zero_is_invalid) {
  serve(RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY);
  connect();
  const char eight[8] = {};
  EXPECT_EQ(rpma_read(conn, mr, 0, remote, 0, 8, 0, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write(conn, remote, 0, mr, 0, 8, 0, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write_with_imm(conn, remote, 0, mr, 0, 8, 0, 1, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_atomic_write(conn, remote, 0, eight, 0, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_flush(conn, remote, 0, 8, RPMA_FLUSH_TYPE_VISIBILITY, 0, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_send(conn, mr, 0, 8, 0, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_send_with_imm(conn, mr, 0, 8, 0, 1, nullptr), RPMA_E_INVAL);
  // also the zero-length forms: flags are checked first
  EXPECT_EQ(rpma_read(conn, nullptr, 0, nullptr, 0, 0, 0, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_send(conn, nullptr, 0, 0, 0, nullptr), RPMA_E_INVAL);
  expect_cq_empty();
}

TEST_F(datapath_args, missing_buffers) {
  serve(RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY);
  connect();
  // read: dst and src both, or neither with offsets and len 0
  EXPECT_EQ(rpma_read(conn, nullptr, 0, remote, 0, 8, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_read(conn, mr, 0, nullptr, 0, 8, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_read(conn, nullptr, 0, nullptr, 0, 8, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_read(conn, mr, 0, nullptr, 0, 0, always, nullptr), RPMA_E_INVAL) << "one NULL";
  EXPECT_EQ(rpma_read(conn, nullptr, 0, remote, 0, 0, always, nullptr), RPMA_E_INVAL) << "one NULL";
  EXPECT_EQ(rpma_read(conn, nullptr, 8, nullptr, 0, 0, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_read(conn, nullptr, 0, nullptr, 8, 0, always, nullptr), RPMA_E_INVAL);
  // write and write_with_imm: the same rule
  EXPECT_EQ(rpma_write(conn, nullptr, 0, mr, 0, 8, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write(conn, remote, 0, nullptr, 0, 8, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write(conn, nullptr, 0, nullptr, 0, 8, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write(conn, remote, 0, nullptr, 0, 0, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write(conn, nullptr, 4, nullptr, 0, 0, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write_with_imm(conn, nullptr, 0, mr, 0, 8, always, 1, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write_with_imm(conn, remote, 0, nullptr, 0, 8, always, 1, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write_with_imm(conn, nullptr, 0, nullptr, 4, 0, always, 1, nullptr), RPMA_E_INVAL);
  // atomic write: both always needed
  const char eight[8] = {};
  EXPECT_EQ(rpma_atomic_write(conn, nullptr, 0, eight, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_atomic_write(conn, remote, 0, nullptr, always, nullptr), RPMA_E_INVAL);
  // flush: dst needed
  EXPECT_EQ(rpma_flush(conn, nullptr, 0, 8, RPMA_FLUSH_TYPE_VISIBILITY, always, nullptr),
            RPMA_E_INVAL);
  EXPECT_EQ(rpma_flush(conn, nullptr, 0, 0, RPMA_FLUSH_TYPE_VISIBILITY, always, nullptr),
            RPMA_E_INVAL);
  // send / send_with_imm / recv: src or dst NULL only with offset and len 0
  EXPECT_EQ(rpma_send(conn, nullptr, 0, 8, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_send(conn, nullptr, 8, 0, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_send_with_imm(conn, nullptr, 0, 8, always, 1, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_send_with_imm(conn, nullptr, 8, 0, always, 1, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_recv(conn, nullptr, 0, 8, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_recv(conn, nullptr, 8, 0, nullptr), RPMA_E_INVAL);
  expect_cq_empty();

  // both NULL with nothing to move: posted, and completes
  ASSERT_EQ(rpma_read(conn, nullptr, 0, nullptr, 0, 0, always, ctx(11)), 0);
  auto wc = wait_wc(cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc->status);
  EXPECT_EQ(wc->opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wc->wr_id, 11U);
  ASSERT_EQ(rpma_write(conn, nullptr, 0, nullptr, 0, 0, always, ctx(12)), 0);
  wc = wait_wc(cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc->status);
  EXPECT_EQ(wc->opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(wc->wr_id, 12U);
  ASSERT_EQ(rpma_recv(conn, nullptr, 0, 0, ctx(13)), 0) << "a receive of nothing";
  expect_cq_empty();
}

TEST_F(datapath_args, zero_length_messages_with_null_buffers) {
  serve(RPMA_MR_USAGE_RECV | RPMA_MR_USAGE_WRITE_DST, 3);
  connect();
  ASSERT_EQ(rpma_send(conn, nullptr, 0, 0, always, ctx(1)), 0);
  ASSERT_EQ(rpma_send_with_imm(conn, nullptr, 0, 0, always, 0x1234, ctx(2)), 0);
  ASSERT_EQ(rpma_write_with_imm(conn, nullptr, 0, nullptr, 0, 0, always, 77, ctx(3)), 0);
  for (std::uintptr_t i = 1; i <= 3; ++i) {
    auto wc = wait_wc(cq);
    ASSERT_TRUE(wc) << i;
    EXPECT_EQ(wc->status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc->status);
    EXPECT_EQ(wc->wr_id, i);
    EXPECT_EQ(wc->opcode, i == 3 ? IBV_WC_RDMA_WRITE : IBV_WC_SEND);
  }
  close();
  server.join();
  ASSERT_EQ(server_wcs.size(), 3U);
  EXPECT_EQ(server_wcs[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(server_wcs[0].byte_len, 0U);
  EXPECT_EQ(server_wcs[1].opcode, IBV_WC_RECV);
  EXPECT_EQ(server_wcs[1].wc_flags & IBV_WC_WITH_IMM, IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(server_wcs[1].imm_data), 0x1234U);
  EXPECT_EQ(server_wcs[2].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(ntohl(server_wcs[2].imm_data), 77U);
}

TEST_F(datapath_args, ranges_outside_a_region_are_invalid_before_the_wire) {
  // docs/compatibility.md, "Data path: ranges are checked before the wire"
  serve(RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY);
  connect();
  const std::size_t huge = std::size_t{1} << 33;  // over 4 GiB
  const std::size_t wrap = SIZE_MAX - 3;          // offset + len overflows
  EXPECT_EQ(rpma_write(conn, remote, region - 4, mr, 0, 8, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write(conn, remote, 0, mr, region - 4, 8, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write(conn, remote, wrap, mr, 0, 8, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write(conn, remote, 0, mr, 0, huge, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_read(conn, mr, region, remote, 0, 1, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_read(conn, mr, 0, remote, wrap, 8, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write_with_imm(conn, remote, region, mr, 0, 1, always, 1, nullptr), RPMA_E_INVAL);
  const char eight[8] = {};
  EXPECT_EQ(rpma_atomic_write(conn, remote, region, eight, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_flush(conn, remote, region - 4, 8, RPMA_FLUSH_TYPE_VISIBILITY, always, nullptr),
            RPMA_E_INVAL);
  EXPECT_EQ(rpma_send(conn, mr, region - 1, 2, always, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_send_with_imm(conn, mr, wrap, 8, always, 1, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_recv(conn, mr, region, 1, nullptr), RPMA_E_INVAL);
  expect_cq_empty();
  // nothing was posted: the connection is as good as before
  ASSERT_EQ(rpma_write(conn, remote, region - 8, mr, region - 8, 8, always, ctx(5)), 0);
  auto wc = wait_wc(cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc->status);
  EXPECT_EQ(wc->wr_id, 5U);
}

TEST_F(datapath_args, atomic_write_alignment) {
  serve(RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY);
  connect();
  const char eight[8] = {'0', '1', '2', '3', '4', '5', '6', '7'};
  for (std::size_t off : {1U, 2U, 4U, 7U, 12U})
    EXPECT_EQ(rpma_atomic_write(conn, remote, off, eight, always, nullptr), RPMA_E_INVAL) << off;
  expect_cq_empty();
  ASSERT_EQ(rpma_atomic_write(conn, remote, 16, eight, always, ctx(3)), 0);
  auto wc = wait_wc(cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc->status);
  EXPECT_EQ(wc->wr_id, 3U);
  ASSERT_EQ(rpma_flush(conn, remote, 16, 8, RPMA_FLUSH_TYPE_VISIBILITY, always, ctx(4)), 0);
  wc = wait_wc(cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(server_memory.data() + 16, eight, 8), 0);
}

TEST_F(datapath_args, flush_type_and_usage) {
  // the region has no flush usage at all
  serve(RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC);
  connect();
  EXPECT_EQ(rpma_flush(conn, remote, 0, 8, RPMA_FLUSH_TYPE_VISIBILITY, always, nullptr),
            RPMA_E_NOSUPP)
      << "VISIBILITY without the usage";
  EXPECT_EQ(rpma_flush(conn, remote, 0, 8, RPMA_FLUSH_TYPE_PERSISTENT, always, nullptr),
            RPMA_E_NOSUPP)
      << "PERSISTENT without direct write to PMem";
  EXPECT_EQ(rpma_flush(conn, remote, 0, 8, static_cast<rpma_flush_type>(7), always, nullptr),
            RPMA_E_INVAL)
      << "unknown type (docs/compatibility.md)";
  rpma_peer_cfg* pcfg = nullptr;
  ASSERT_EQ(rpma_peer_cfg_new(&pcfg), 0);
  ASSERT_EQ(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true), 0);
  ASSERT_EQ(rpma_conn_apply_remote_peer_cfg(conn, pcfg), 0);
  EXPECT_EQ(rpma_flush(conn, remote, 0, 8, RPMA_FLUSH_TYPE_PERSISTENT, always, nullptr),
            RPMA_E_NOSUPP)
      << "PERSISTENT with direct write, but the region lacks the usage";
  // applying a cfg that says no takes it back
  ASSERT_EQ(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, false), 0);
  ASSERT_EQ(rpma_conn_apply_remote_peer_cfg(conn, pcfg), 0);
  EXPECT_EQ(rpma_peer_cfg_delete(&pcfg), 0);
  expect_cq_empty();
}

TEST_F(datapath_args, flush_persistent_needs_both_direct_write_and_the_usage) {
  serve(RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT);
  connect();
  int flush_type = sentinel_int;
  ASSERT_EQ(rpma_mr_remote_get_flush_type(remote, &flush_type), 0);
  EXPECT_EQ(flush_type, RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT) << "a usage mask";
  EXPECT_EQ(rpma_flush(conn, remote, 0, 8, RPMA_FLUSH_TYPE_PERSISTENT, always, nullptr),
            RPMA_E_NOSUPP)
      << "the usage, but no direct write to PMem";
  EXPECT_EQ(rpma_flush(conn, remote, 0, 8, RPMA_FLUSH_TYPE_VISIBILITY, always, nullptr),
            RPMA_E_NOSUPP)
      << "PERSISTENT usage does not grant VISIBILITY";
  rpma_peer_cfg* pcfg = nullptr;
  ASSERT_EQ(rpma_peer_cfg_new(&pcfg), 0);
  ASSERT_EQ(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true), 0);
  ASSERT_EQ(rpma_conn_apply_remote_peer_cfg(conn, pcfg), 0);
  EXPECT_EQ(rpma_peer_cfg_delete(&pcfg), 0);
  expect_cq_empty();
  std::memcpy(mine.data(), "persist", 8);
  ASSERT_EQ(rpma_write(conn, remote, 64, mr, 0, 8, RPMA_F_COMPLETION_ON_ERROR, ctx(1)), 0);
  ASSERT_EQ(rpma_flush(conn, remote, 64, 8, RPMA_FLUSH_TYPE_PERSISTENT, always, ctx(2)), 0);
  auto wc = wait_wc(cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc->status);
  EXPECT_EQ(wc->wr_id, 2U) << "only the flush was signaled";
  EXPECT_STREQ(server_memory.data() + 64, "persist");
  expect_cq_empty();
}

TEST_F(datapath_args, completion_on_error_gives_no_completion_on_success) {
  serve(RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC);
  connect();
  std::memcpy(mine.data(), "quiet", 6);
  for (std::uintptr_t i = 1; i <= 3; ++i)
    ASSERT_EQ(rpma_write(conn, remote, 0, mr, 0, 6, RPMA_F_COMPLETION_ON_ERROR, ctx(i)), 0);
  ASSERT_EQ(rpma_read(conn, mr, 100, remote, 0, 6, always, ctx(9)), 0);
  auto wc = wait_wc(cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc->wr_id, 9U) << "the first completion is the signaled read's";
  EXPECT_EQ(wc->opcode, IBV_WC_RDMA_READ);
  EXPECT_STREQ(mine.data() + 100, "quiet");
  EXPECT_FALSE(wait_wc(cq, 200)) << "nothing for the unsignaled writes";
}

TEST_F(datapath_args, a_remote_access_error_completes_even_unsignaled) {
  serve(RPMA_MR_USAGE_WRITE_DST);
  connect();
  // the server's descriptor with another rkey
  char desc[21];
  rpma_mr_local* probe = nullptr;
  ASSERT_EQ(rpma_mr_reg(peer, mine.data(), 64, RPMA_MR_USAGE_WRITE_DST, &probe), 0);
  ASSERT_EQ(rpma_mr_get_descriptor(probe, desc), 0);
  std::uint32_t rkey = 0;
  std::memcpy(&rkey, desc + 16, 4);
  rkey ^= 0x5a5a5a5aU;
  std::memcpy(desc + 16, &rkey, 4);
  rpma_mr_remote* wrong = nullptr;
  ASSERT_EQ(rpma_mr_remote_from_descriptor(desc, sizeof desc, &wrong), 0);
  ASSERT_EQ(rpma_write(conn, wrong, 0, mr, 0, 8, RPMA_F_COMPLETION_ON_ERROR, ctx(21)), 0);
  auto wc = wait_wc(cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc->status);
  EXPECT_EQ(wc->wr_id, 21U);
  // the QP is in error now: a later post is accepted and flushed
  ASSERT_EQ(rpma_write(conn, remote, 0, mr, 0, 8, always, ctx(22)), 0);
  wc = wait_wc(cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(wc->status);
  EXPECT_EQ(wc->wr_id, 22U);
  EXPECT_EQ(rpma_mr_remote_delete(&wrong), 0);
  EXPECT_EQ(rpma_mr_dereg(&probe), 0);
}

TEST_F(datapath_args, a_full_send_queue_is_a_provider_error) {
  // No receive at the server: the first send waits (RNR) and nothing after it
  // is acknowledged, so the send queue fills with signaled, unpolled requests.
  ASSERT_EQ(rpma_conn_cfg_set_sq_size(cfg, 4), 0);
  ASSERT_EQ(rpma_conn_cfg_set_cq_size(cfg, 16), 0);
  serve(RPMA_MR_USAGE_WRITE_DST);
  connect();
  int posted = 0;
  int rc = 0;
  for (; posted < 32; ++posted) {
    rc = rpma_send(conn, mr, 0, 8, always, ctx(static_cast<std::uintptr_t>(posted + 1)));
    if (rc != 0) break;
  }
  EXPECT_EQ(rc, RPMA_E_PROVIDER);
  EXPECT_EQ(posted, 4) << "sq_size requests fit";
  EXPECT_EQ(rpma_recv(conn, mr, 0, 8, nullptr), 0) << "the receive queue is not full";
}

TEST_F(datapath_args, a_full_receive_queue_is_a_provider_error) {
  ASSERT_EQ(rpma_conn_cfg_set_rq_size(cfg, 3), 0);
  serve(RPMA_MR_USAGE_WRITE_DST);
  connect();
  int posted = 0;
  int rc = 0;
  for (; posted < 32; ++posted) {
    rc = rpma_recv(conn, mr, static_cast<std::size_t>(posted) * 8, 8, nullptr);
    if (rc != 0) break;
  }
  EXPECT_EQ(rc, RPMA_E_PROVIDER);
  EXPECT_EQ(posted, 3);
}

TEST_F(datapath_args, completion_calls) {
  serve(RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC);
  connect();
  ibv_wc wc[4]{};
  int got = sentinel_int;
  // rpma_cq_get_wc's argument rules
  EXPECT_EQ(rpma_cq_get_wc(nullptr, 1, wc, &got), RPMA_E_INVAL);
  EXPECT_EQ(rpma_cq_get_wc(cq, 1, nullptr, &got), RPMA_E_INVAL);
  EXPECT_EQ(rpma_cq_get_wc(cq, 0, wc, &got), RPMA_E_INVAL);
  EXPECT_EQ(rpma_cq_get_wc(cq, -1, wc, &got), RPMA_E_INVAL);
  EXPECT_EQ(rpma_cq_get_wc(cq, 2, wc, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(got, sentinel_int);
  // an empty CQ
  EXPECT_EQ(rpma_cq_get_wc(cq, 1, wc, nullptr), RPMA_E_NO_COMPLETION);
  EXPECT_EQ(rpma_cq_get_wc(cq, 4, wc, &got), RPMA_E_NO_COMPLETION);
  EXPECT_EQ(got, sentinel_int);
  // rpma_cq_wait / rpma_cq_get_fd
  EXPECT_EQ(rpma_cq_wait(nullptr), RPMA_E_INVAL);
  int fd = sentinel_int;
  EXPECT_EQ(rpma_cq_get_fd(nullptr, &fd), RPMA_E_INVAL);
  EXPECT_EQ(rpma_cq_get_fd(cq, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(fd, sentinel_int);
  ASSERT_EQ(rpma_cq_get_fd(cq, &fd), 0);
  set_nonblock(fd);
  EXPECT_EQ(rpma_cq_wait(cq), RPMA_E_NO_COMPLETION) << "non-blocking fd, nothing pending";
  // no shared channel here
  rpma_cq* fired = sentinel<rpma_cq>();
  bool is_rcq = true;
  EXPECT_EQ(rpma_conn_wait(conn, 0, &fired, &is_rcq), RPMA_E_NOT_SHARED_CHNL);
  EXPECT_EQ(fired, sentinel<rpma_cq>());
  EXPECT_TRUE(is_rcq);
  EXPECT_EQ(rpma_conn_wait(nullptr, 0, &fired, &is_rcq), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_wait(conn, 0, nullptr, &is_rcq), RPMA_E_INVAL);
  int cfd = sentinel_int;
  EXPECT_EQ(rpma_conn_get_compl_fd(conn, &cfd), RPMA_E_NOT_SHARED_CHNL);
  EXPECT_EQ(cfd, sentinel_int);
  EXPECT_EQ(rpma_conn_get_compl_fd(nullptr, &cfd), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_get_compl_fd(conn, nullptr), RPMA_E_INVAL);
  rpma_cq* rcq = sentinel<rpma_cq>();
  EXPECT_EQ(rpma_conn_get_rcq(conn, &rcq), 0);
  EXPECT_EQ(rcq, nullptr) << "rcq_size 0: none";
  // several completions in one call; a non-blocking fd still serves wait_wc
  for (std::uintptr_t i = 1; i <= 3; ++i)
    ASSERT_EQ(rpma_read(conn, mr, 0, remote, 0, 8, always, ctx(i)), 0);
  int total = 0;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (total < 3 && std::chrono::steady_clock::now() < deadline) {
    got = sentinel_int;
    const int rc = rpma_cq_get_wc(cq, 4, wc, &got);
    if (rc == RPMA_E_NO_COMPLETION) {
      EXPECT_EQ(got, sentinel_int);
      if (readable(fd, 1000)) (void)rpma_cq_wait(cq);
      continue;
    }
    ASSERT_EQ(rc, 0);
    ASSERT_GE(got, 1);
    ASSERT_LE(got, 3 - total);
    for (int i = 0; i < got; ++i) {
      EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS);
      EXPECT_EQ(wc[i].wr_id, static_cast<std::uint64_t>(total + i + 1)) << "in order";
    }
    total += got;
  }
  EXPECT_EQ(total, 3);
  expect_cq_empty();
}

TEST_F(datapath_args, a_shared_channel) {
  ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg, true), 0);
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(cfg, 4), 0);
  serve(RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC);
  connect();
  rpma_cq* rcq = nullptr;
  ASSERT_EQ(rpma_conn_get_rcq(conn, &rcq), 0);
  ASSERT_NE(rcq, nullptr);
  EXPECT_EQ(rpma_cq_wait(cq), RPMA_E_SHARED_CHANNEL);
  EXPECT_EQ(rpma_cq_wait(rcq), RPMA_E_SHARED_CHANNEL);
  int cfd = sentinel_int;
  ASSERT_EQ(rpma_conn_get_compl_fd(conn, &cfd), 0);
  ASSERT_GE(cfd, 0);
  int fd = -1;
  EXPECT_EQ(rpma_cq_get_fd(cq, &fd), 0);
  EXPECT_EQ(fd, cfd) << "both CQs on the shared channel";
  EXPECT_EQ(rpma_cq_get_fd(rcq, &fd), 0);
  EXPECT_EQ(fd, cfd);
  set_nonblock(cfd);
  rpma_cq* fired = sentinel<rpma_cq>();
  EXPECT_EQ(rpma_conn_wait(conn, 0, &fired, nullptr), RPMA_E_NO_COMPLETION);
  EXPECT_EQ(fired, sentinel<rpma_cq>()) << "untouched on failure";
  ibv_wc wc{};
  EXPECT_EQ(rpma_cq_get_wc(rcq, 1, &wc, nullptr), RPMA_E_NO_COMPLETION);
  // a completion: rpma_conn_wait reports the main CQ
  ASSERT_EQ(rpma_read(conn, mr, 0, remote, 0, 8, always, ctx(8)), 0);
  bool is_rcq = true;
  int rc = RPMA_E_NO_COMPLETION;
  while ((rc = rpma_cq_get_wc(cq, 1, &wc, nullptr)) == RPMA_E_NO_COMPLETION) {
    ASSERT_TRUE(readable(cfd, wait_ms));
    const int w = rpma_conn_wait(conn, 0, &fired, &is_rcq);
    if (w == RPMA_E_NO_COMPLETION) continue;
    ASSERT_EQ(w, 0);
    EXPECT_EQ(fired, cq);
    EXPECT_FALSE(is_rcq);
  }
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(wc.wr_id, 8U);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
}

TEST_F(datapath_args, a_shared_channel_reports_the_receive_cq) {
  ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg, true), 0);
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(cfg, 4), 0);
  serve(RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_WRITE_DST, 0, 1);
  connect();
  rpma_cq* rcq = nullptr;
  ASSERT_EQ(rpma_conn_get_rcq(conn, &rcq), 0);
  ASSERT_NE(rcq, nullptr);
  ASSERT_EQ(rpma_recv(conn, mr, 128, 64, ctx(31)), 0);
  int cfd = -1;
  ASSERT_EQ(rpma_conn_get_compl_fd(conn, &cfd), 0);
  ibv_wc wc{};
  int rc = RPMA_E_NO_COMPLETION;
  while ((rc = rpma_cq_get_wc(rcq, 1, &wc, nullptr)) == RPMA_E_NO_COMPLETION) {
    ASSERT_TRUE(readable(cfd, wait_ms)) << "no completion event";
    rpma_cq* fired = nullptr;
    bool is_rcq = false;
    ASSERT_EQ(rpma_conn_wait(conn, 0, &fired, &is_rcq), 0);
    EXPECT_EQ(fired, rcq);
    EXPECT_TRUE(is_rcq);
  }
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.byte_len, 14U);
  EXPECT_EQ(wc.wr_id, 31U);
  EXPECT_STREQ(mine.data() + 128, "to-the-client");
  EXPECT_EQ(rpma_cq_get_wc(cq, 1, &wc, nullptr), RPMA_E_NO_COMPLETION) << "nothing on the main CQ";
}

TEST_F(datapath_args, many_completions_in_one_call) {
  ASSERT_EQ(rpma_conn_cfg_set_sq_size(cfg, 40), 0);
  ASSERT_EQ(rpma_conn_cfg_set_cq_size(cfg, 40), 0);
  serve(RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC);
  connect();
  constexpr int n = 20;  // more than one internal batch of 16
  for (std::uintptr_t i = 1; i <= n; ++i)
    ASSERT_EQ(rpma_read(conn, mr, 8 * i, remote, 0, 8, always, ctx(i)), 0);
  int fd = -1;
  ASSERT_EQ(rpma_cq_get_fd(cq, &fd), 0);
  std::vector<ibv_wc> wcs(32);
  int total = 0;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (total < n && std::chrono::steady_clock::now() < deadline) {
    int got = sentinel_int;
    const int rc = rpma_cq_get_wc(cq, 32, wcs.data(), &got);
    if (rc == RPMA_E_NO_COMPLETION) {
      if (readable(fd, 1000)) {
        EXPECT_EQ(rpma_cq_wait(cq), 0);
      }
      continue;
    }
    ASSERT_EQ(rc, 0);
    ASSERT_GE(got, 1);
    ASSERT_LE(got, n - total);
    for (int i = 0; i < got; ++i) {
      EXPECT_EQ(wcs[static_cast<std::size_t>(i)].status, IBV_WC_SUCCESS);
      EXPECT_EQ(wcs[static_cast<std::size_t>(i)].wr_id, static_cast<std::uint64_t>(total + i + 1));
    }
    total += got;
  }
  EXPECT_EQ(total, n);
  expect_cq_empty();
}

TEST_F(datapath_args, conn_req_recv_arguments) {
  // a request that is never connected: only its receive queue matters
  serve(RPMA_MR_USAGE_WRITE_DST);
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer, addr.c_str(), port.c_str(), cfg, &req), 0);
  ASSERT_EQ(rpma_mr_reg(peer, mine.data(), region, RPMA_MR_USAGE_RECV, &mr), 0);
  EXPECT_EQ(rpma_conn_req_recv(nullptr, mr, 0, 8, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_req_recv(req, nullptr, 0, 8, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_req_recv(req, nullptr, 0, 0, nullptr), RPMA_E_INVAL)
      << "librpma: dst is required here";
  EXPECT_EQ(rpma_conn_req_recv(req, mr, region, 1, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_req_recv(req, mr, SIZE_MAX, 2, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_req_recv(req, mr, 0, region, nullptr), 0);
  // connect it so that the server thread ends its wait
  ASSERT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), 0);
  ASSERT_EQ(next_event(conn), RPMA_CONN_ESTABLISHED);
}

TEST_F(datapath_args, srq_recv_arguments) {
  rpma_srq* srq = nullptr;
  ASSERT_EQ(rpma_srq_new(peer, nullptr, &srq), 0);
  ASSERT_EQ(rpma_mr_reg(peer, mine.data(), region, RPMA_MR_USAGE_RECV, &mr), 0);
  EXPECT_EQ(rpma_srq_recv(nullptr, mr, 0, 8, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_recv(srq, nullptr, 0, 8, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_recv(srq, nullptr, 8, 0, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_recv(srq, mr, region, 1, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_recv(srq, mr, SIZE_MAX, 2, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_recv(srq, nullptr, 0, 0, nullptr), 0) << "a receive of nothing";
  EXPECT_EQ(rpma_srq_recv(srq, mr, 0, 8, nullptr), 0);
  rpma_cq* rcq = sentinel<rpma_cq>();
  EXPECT_EQ(rpma_srq_get_rcq(nullptr, &rcq), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_get_rcq(srq, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rcq, sentinel<rpma_cq>());
  ASSERT_EQ(rpma_srq_get_rcq(srq, &rcq), 0);
  ASSERT_NE(rcq, nullptr);
  ibv_wc wc{};
  EXPECT_EQ(rpma_cq_get_wc(rcq, 1, &wc, nullptr), RPMA_E_NO_COMPLETION);
  int fd = -1;
  ASSERT_EQ(rpma_cq_get_fd(rcq, &fd), 0);
  set_nonblock(fd);
  EXPECT_EQ(rpma_cq_wait(rcq), RPMA_E_NO_COMPLETION);
  EXPECT_EQ(rpma_srq_delete(&srq), 0);
  EXPECT_EQ(srq, nullptr);
  EXPECT_EQ(rpma_srq_delete(nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_delete(&srq), 0);
}

// What ibv_reg_mr refuses, rpma_mr_reg refuses too (RPMA_E_PROVIDER, as
// librpma reports a failed ibv_reg_mr), on every provider: the soft one
// used to accept all of these and then let a remote peer read or crash.
TEST_F(datapath_args, mr_reg_refuses_ranges_verbs_refuses) {
  const std::size_t page = arpma::test::page_size();
  const arpma::test::pages ro(1, PROT_READ);
  const arpma::test::pages two(2);
  ASSERT_NE(ro.base, nullptr);
  ASSERT_NE(two.base, nullptr);
  two.revoke_from(1);
  auto* top = reinterpret_cast<char*>(arpma::test::highest_mapping_end());  // NOLINT
  auto* base = reinterpret_cast<char*>(two.base);
  const int any = RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST;
  struct range {
    void* ptr;
    std::size_t size;
    int usage;
    const char* what;
  };
  const range refused[] = {
      {base, SIZE_MAX, any, "SIZE_MAX"},
      {base + 16, SIZE_MAX - 8, any, "wraps the address space"},
      {reinterpret_cast<void*>(0x10), 64, any, "pointer 0x10"},  // NOLINT
      {top, 64, RPMA_MR_USAGE_READ_SRC, "unmapped"},
      {top - page, 2 * page, RPMA_MR_USAGE_READ_SRC, "half unmapped"},
      {top - page, std::size_t{1} << 30, RPMA_MR_USAGE_READ_SRC, "1 GiB over one page"},
      {base, 2 * page, any, "half inaccessible"},
      {ro.base, page, RPMA_MR_USAGE_WRITE_DST, "read-only page for remote writes"},
      {ro.base, page, RPMA_MR_USAGE_RECV, "read-only page for receives"},
      {ro.base, page, RPMA_MR_USAGE_READ_DST, "read-only page as a read's destination"},
  };
  for (const range& r : refused) {
    rpma_mr_local* refused_mr = sentinel<rpma_mr_local>();
    EXPECT_EQ(rpma_mr_reg(peer, r.ptr, r.size, r.usage, &refused_mr), RPMA_E_PROVIDER) << r.what;
    EXPECT_EQ(refused_mr, sentinel<rpma_mr_local>()) << r.what;
  }
  // What verbs accepts still registers.
  rpma_mr_local* accepted = nullptr;
  ASSERT_EQ(rpma_mr_reg(peer, ro.base, page, RPMA_MR_USAGE_READ_SRC, &accepted), 0);
  EXPECT_EQ(rpma_mr_dereg(&accepted), 0);
  ASSERT_EQ(rpma_mr_reg(peer, base, page, any, &accepted), 0);
  EXPECT_EQ(rpma_mr_dereg(&accepted), 0);
}

TEST_F(datapath_args, mr_argument_errors_leave_out_parameters_untouched) {
  std::vector<char> buf(256);
  const int usage = RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST;
  rpma_mr_local* local = sentinel<rpma_mr_local>();
  EXPECT_EQ(rpma_mr_reg(nullptr, buf.data(), buf.size(), usage, &local), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_reg(peer, nullptr, buf.size(), usage, &local), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_reg(peer, buf.data(), 0, usage, &local), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_reg(peer, buf.data(), buf.size(), 0, &local), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_reg(peer, buf.data(), buf.size(), 1 << 8, &local), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_reg(peer, buf.data(), buf.size(), usage | (1 << 12), &local), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_reg(peer, buf.data(), buf.size(), usage, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(local, sentinel<rpma_mr_local>());

  local = nullptr;
  ASSERT_EQ(rpma_mr_reg(peer, buf.data() + 8, 200,
                        usage | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY | RPMA_MR_USAGE_RECV, &local),
            0);
  // getters
  void* ptr = sentinel<void>();
  std::size_t size = 12345;
  EXPECT_EQ(rpma_mr_get_ptr(nullptr, &ptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_get_ptr(local, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_get_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_get_size(local, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(ptr, sentinel<void>());
  EXPECT_EQ(size, 12345U);
  EXPECT_EQ(rpma_mr_get_ptr(local, &ptr), 0);
  EXPECT_EQ(ptr, buf.data() + 8);
  EXPECT_EQ(rpma_mr_get_size(local, &size), 0);
  EXPECT_EQ(size, 200U);
  // descriptor
  std::size_t desc_size = 12345;
  EXPECT_EQ(rpma_mr_get_descriptor_size(nullptr, &desc_size), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_get_descriptor_size(local, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(desc_size, 12345U);
  EXPECT_EQ(rpma_mr_get_descriptor_size(local, &desc_size), 0);
  EXPECT_EQ(desc_size, 21U);
  unsigned char desc[32];
  std::memset(desc, 0xee, sizeof desc);
  EXPECT_EQ(rpma_mr_get_descriptor(nullptr, desc), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_get_descriptor(local, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(desc[0], 0xee);
  ASSERT_EQ(rpma_mr_get_descriptor(local, desc), 0);
  EXPECT_EQ(desc[21], 0xee) << "exactly 21 bytes";
  std::uint64_t d_addr = 0;
  std::uint64_t d_len = 0;
  std::memcpy(&d_addr, desc, 8);  // little-endian host
  std::memcpy(&d_len, desc + 8, 8);
  EXPECT_EQ(d_addr, reinterpret_cast<std::uintptr_t>(buf.data() + 8));
  EXPECT_EQ(d_len, 200U);
  EXPECT_EQ(desc[20], usage | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY | RPMA_MR_USAGE_RECV);
  // remote from descriptor
  rpma_mr_remote* rem = sentinel<rpma_mr_remote>();
  EXPECT_EQ(rpma_mr_remote_from_descriptor(nullptr, 21, &rem), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_remote_from_descriptor(desc, 21, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_remote_from_descriptor(desc, 20, &rem), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_remote_from_descriptor(desc, 0, &rem), RPMA_E_INVAL);
  unsigned char no_usage[21];
  std::memcpy(no_usage, desc, 21);
  no_usage[20] = 0;
  EXPECT_EQ(rpma_mr_remote_from_descriptor(no_usage, 21, &rem), RPMA_E_INVAL);
  EXPECT_EQ(rem, sentinel<rpma_mr_remote>());
  rem = nullptr;
  ASSERT_EQ(rpma_mr_remote_from_descriptor(desc, 32, &rem), 0) << "longer is fine";
  std::size_t rsize = 12345;
  int flush_type = sentinel_int;
  EXPECT_EQ(rpma_mr_remote_get_size(nullptr, &rsize), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_remote_get_size(rem, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_remote_get_flush_type(nullptr, &flush_type), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_remote_get_flush_type(rem, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rsize, 12345U);
  EXPECT_EQ(flush_type, sentinel_int);
  EXPECT_EQ(rpma_mr_remote_get_size(rem, &rsize), 0);
  EXPECT_EQ(rsize, 200U);
  EXPECT_EQ(rpma_mr_remote_get_flush_type(rem, &flush_type), 0);
  EXPECT_EQ(flush_type, RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY);
  EXPECT_EQ(rpma_mr_remote_delete(nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_remote_delete(&rem), 0);
  EXPECT_EQ(rem, nullptr);
  EXPECT_EQ(rpma_mr_remote_delete(&rem), 0) << "NULL: nothing to do";
  // advise: the soft provider has nothing to fault in; what ibv_advise_mr
  // refuses (a range outside the region, an unknown advice or flag) is
  // RPMA_E_INVAL, as librpma maps EINVAL / EFAULT
  EXPECT_EQ(rpma_mr_advise(nullptr, 0, 8, 0, 0), RPMA_E_INVAL);
  for (const int advice : {0, 1, 2})
    for (const std::uint32_t flags : {0U, 1U})
      EXPECT_EQ(rpma_mr_advise(local, 0, 8, advice, flags), 0) << advice << " " << flags;
  EXPECT_EQ(rpma_mr_advise(local, 0, 200, 0, 0), 0) << "the whole region";
  EXPECT_EQ(rpma_mr_advise(local, 192, 8, 0, 0), 0) << "its last bytes";
  EXPECT_EQ(rpma_mr_advise(local, 0, 201, 0, 0), RPMA_E_INVAL) << "past its end";
  EXPECT_EQ(rpma_mr_advise(local, 193, 8, 0, 0), RPMA_E_INVAL) << "past its end";
  EXPECT_EQ(rpma_mr_advise(local, SIZE_MAX, 2, 0, 0), RPMA_E_INVAL) << "an overflowing range";
  EXPECT_EQ(rpma_mr_advise(local, 0, 8, 3, 0), RPMA_E_INVAL) << "an unknown advice";
  EXPECT_EQ(rpma_mr_advise(local, 0, 8, -1, 0), RPMA_E_INVAL) << "an unknown advice";
  EXPECT_EQ(rpma_mr_advise(local, 0, 8, 0, 2), RPMA_E_INVAL) << "an unknown flag";
  // ODP: the soft provider has none
  int odp = sentinel_int;
  EXPECT_EQ(rpma_utils_ibv_context_is_odp_capable(nullptr, &odp), RPMA_E_INVAL);
  EXPECT_EQ(rpma_utils_ibv_context_is_odp_capable(ibv, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(odp, sentinel_int);
  EXPECT_EQ(rpma_utils_ibv_context_is_odp_capable(ibv, &odp), 0);
  EXPECT_EQ(odp, 0);
  // dereg: always NULLs; NULL is fine; a NULL pointer-to-pointer is not
  EXPECT_EQ(rpma_mr_dereg(nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_dereg(&local), 0);
  EXPECT_EQ(local, nullptr);
  EXPECT_EQ(rpma_mr_dereg(&local), 0);
}

}  // namespace

}  // namespace datapath_args_capi_test

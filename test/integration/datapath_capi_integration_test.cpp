// The C data path end to end on the provider the environment chooses: a
// server thread exposes a region (its descriptor in the accept's private
// data), the client writes, flushes, reads, atomically writes and exchanges
// messages, and completions come through rpma_cq_wait / rpma_cq_get_wc or
// rpma_conn_wait.
#include <librpma.h>
#include "support/capi_wait.hpp"
#include "support/test_addr.hpp"
#include "support/transport.hpp"

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace datapath_capi_integration_test {

using arpma::test::free_port;
using arpma::test::next_wc;
using arpma::test::test_addr;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t region = 4096;

class datapath_capi : public ::testing::Test {
 protected:
  void SetUp() override {
    ibv_context* dev = nullptr;
    ASSERT_EQ(rpma_utils_get_ibv_context(addr.c_str(), RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev), 0);
    ASSERT_EQ(rpma_peer_new(dev, &peer), 0);
    ASSERT_EQ(rpma_conn_cfg_new(&cfg), 0);
  }
  void TearDown() override {
    if (server.joinable()) server.join();
    EXPECT_EQ(rpma_conn_cfg_delete(&cfg), 0);
    EXPECT_EQ(rpma_peer_delete(&peer), 0);
  }

  // A server thread: accepts one connection with its region's descriptor as
  // private data, keeps `recvs` receives posted, waits for CLOSED.
  void serve(int usage, int recvs = 0) {
    std::atomic<bool> listening{false};
    server = std::thread([this, usage, recvs, &listening] {
      rpma_ep* ep = nullptr;
      ASSERT_EQ(rpma_ep_listen(peer, addr.c_str(), port.c_str(), &ep), 0);
      listening = true;
      rpma_mr_local* mr = nullptr;
      ASSERT_EQ(rpma_mr_reg(peer, server_memory.data(), region, usage, &mr), 0);
      rpma_conn_req* req = nullptr;
      ASSERT_EQ(rpma_ep_next_conn_req(ep, nullptr, &req), 0);
      for (int i = 0; i < recvs; ++i)
        ASSERT_EQ(rpma_conn_req_recv(req, mr, static_cast<std::size_t>(i) * 64, 64,
                                     reinterpret_cast<void*>(static_cast<std::uintptr_t>(i + 1))),
                  0);
      char desc[21];
      ASSERT_EQ(rpma_mr_get_descriptor(mr, desc), 0);
      const rpma_conn_private_data pdata{desc, sizeof desc};
      rpma_conn* conn = nullptr;
      ASSERT_EQ(rpma_conn_req_connect(&req, &pdata, &conn), 0);
      rpma_conn_event ev = RPMA_CONN_UNDEFINED;
      ASSERT_EQ(rpma_conn_next_event(conn, &ev), 0);
      ASSERT_EQ(ev, RPMA_CONN_ESTABLISHED);
      if (recvs > 0) {
        rpma_cq* rcq = nullptr;
        ASSERT_EQ(rpma_conn_get_cq(conn, &rcq), 0);
        for (int i = 0; i < recvs; ++i) server_wcs.push_back(next_wc(rcq));
      }
      ASSERT_EQ(rpma_conn_next_event(conn, &ev), 0);
      EXPECT_EQ(ev, RPMA_CONN_CLOSED);
      EXPECT_EQ(rpma_conn_delete(&conn), 0);
      EXPECT_EQ(rpma_mr_dereg(&mr), 0);
      EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
    });
    while (!listening) std::this_thread::sleep_for(1ms);
  }

  // Connects; *remote is the server's region.
  rpma_conn* connect(rpma_mr_remote** remote) {
    rpma_conn_req* req = nullptr;
    EXPECT_EQ(rpma_conn_req_new(peer, addr.c_str(), port.c_str(), cfg, &req), 0);
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

  void close(rpma_conn*& conn) {
    EXPECT_EQ(rpma_conn_disconnect(conn), 0);
    rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    EXPECT_EQ(rpma_conn_next_event(conn, &ev), 0);
    EXPECT_EQ(rpma_conn_delete(&conn), 0);
  }

  std::string addr = test_addr();
  std::string port = free_port(addr);
  rpma_peer* peer = nullptr;
  rpma_conn_cfg* cfg = nullptr;
  std::thread server;
  std::vector<char> server_memory = std::vector<char>(region);
  std::vector<ibv_wc> server_wcs;
};

TEST_F(datapath_capi, write_flush_read_and_atomic_write) {
  serve(RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY);
  rpma_mr_remote* remote = nullptr;
  rpma_conn* conn = connect(&remote);
  std::vector<char> mine(region);
  rpma_mr_local* mr = nullptr;
  ASSERT_EQ(
      rpma_mr_reg(peer, mine.data(), region, RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST, &mr),
      0);
  rpma_cq* cq = nullptr;
  ASSERT_EQ(rpma_conn_get_cq(conn, &cq), 0);
  const char hello[] = "hello, remote memory";
  std::memcpy(mine.data(), hello, sizeof hello);

  ASSERT_EQ(rpma_write(conn, remote, 100, mr, 0, sizeof hello, RPMA_F_COMPLETION_ON_ERROR, nullptr),
            0);
  int tag = 7;
  ASSERT_EQ(rpma_flush(conn, remote, 100, sizeof hello, RPMA_FLUSH_TYPE_VISIBILITY,
                       RPMA_F_COMPLETION_ALWAYS, &tag),
            0);
  ibv_wc wc = next_wc(cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.wr_id, reinterpret_cast<std::uintptr_t>(&tag)) << "only the flush was signaled";
  EXPECT_EQ(std::memcmp(server_memory.data() + 100, hello, sizeof hello), 0);

  ASSERT_EQ(rpma_read(conn, mr, 1000, remote, 100, sizeof hello, RPMA_F_COMPLETION_ALWAYS, nullptr),
            0);
  wc = next_wc(cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(std::memcmp(mine.data() + 1000, hello, sizeof hello), 0);

  const char eight[8] = {'a', 't', 'o', 'm', 'i', 'c', '!', '\0'};
  EXPECT_EQ(rpma_atomic_write(conn, remote, 4, eight, RPMA_F_COMPLETION_ALWAYS, nullptr),
            RPMA_E_INVAL)
      << "unaligned";
  ASSERT_EQ(rpma_atomic_write(conn, remote, 8, eight, RPMA_F_COMPLETION_ALWAYS, nullptr), 0);
  ASSERT_EQ(
      rpma_flush(conn, remote, 8, 8, RPMA_FLUSH_TYPE_VISIBILITY, RPMA_F_COMPLETION_ALWAYS, nullptr),
      0);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(next_wc(cq).status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(server_memory.data() + 8, eight, 8), 0);

  // What librpma refuses, and what arpma refuses before the wire.
  EXPECT_EQ(
      rpma_flush(conn, remote, 0, 8, RPMA_FLUSH_TYPE_PERSISTENT, RPMA_F_COMPLETION_ALWAYS, nullptr),
      RPMA_E_NOSUPP);
  EXPECT_EQ(rpma_write(conn, remote, region - 4, mr, 0, 8, RPMA_F_COMPLETION_ALWAYS, nullptr),
            RPMA_E_INVAL);
  EXPECT_EQ(rpma_write(conn, remote, 0, mr, 0, 8, 0, nullptr), RPMA_E_INVAL);
  ibv_wc none{};
  EXPECT_EQ(rpma_cq_get_wc(cq, 1, &none, nullptr), RPMA_E_NO_COMPLETION);

  EXPECT_EQ(rpma_mr_dereg(&mr), 0);
  EXPECT_EQ(rpma_mr_remote_delete(&remote), 0);
  close(conn);
}

TEST_F(datapath_capi, messages_with_and_without_immediate_data) {
  serve(RPMA_MR_USAGE_RECV | RPMA_MR_USAGE_WRITE_DST, 3);
  rpma_mr_remote* remote = nullptr;
  rpma_conn* conn = connect(&remote);
  std::vector<char> mine(region);
  rpma_mr_local* mr = nullptr;
  ASSERT_EQ(
      rpma_mr_reg(peer, mine.data(), region, RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_WRITE_SRC, &mr), 0);
  rpma_cq* cq = nullptr;
  ASSERT_EQ(rpma_conn_get_cq(conn, &cq), 0);
  std::memcpy(mine.data(), "ping", 5);
  ASSERT_EQ(rpma_send(conn, mr, 0, 5, RPMA_F_COMPLETION_ALWAYS, nullptr), 0);
  const bool iwarp = arpma::test::iwarp();
  if (iwarp) {
    // No immediate data on iWARP: the provider refuses both posts, as under librpma;
    // two plain messages take the server's other receives.
    EXPECT_EQ(rpma_send_with_imm(conn, mr, 0, 5, RPMA_F_COMPLETION_ALWAYS, 0xabcd, nullptr),
              RPMA_E_PROVIDER);
    EXPECT_EQ(
        rpma_write_with_imm(conn, remote, 2048, mr, 0, 5, RPMA_F_COMPLETION_ALWAYS, 42, nullptr),
        RPMA_E_PROVIDER);
    ASSERT_EQ(rpma_send(conn, mr, 0, 5, RPMA_F_COMPLETION_ALWAYS, nullptr), 0);
    ASSERT_EQ(rpma_send(conn, mr, 0, 5, RPMA_F_COMPLETION_ALWAYS, nullptr), 0);
  } else {
    ASSERT_EQ(rpma_send_with_imm(conn, mr, 0, 5, RPMA_F_COMPLETION_ALWAYS, 0xabcd, nullptr), 0);
  }
  if (!iwarp) {
    ASSERT_EQ(
        rpma_write_with_imm(conn, remote, 2048, mr, 0, 5, RPMA_F_COMPLETION_ALWAYS, 42, nullptr),
        0);
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(next_wc(cq).status, IBV_WC_SUCCESS);
  EXPECT_EQ(rpma_mr_dereg(&mr), 0);
  EXPECT_EQ(rpma_mr_remote_delete(&remote), 0);
  close(conn);
  server.join();
  ASSERT_EQ(server_wcs.size(), 3U);
  EXPECT_EQ(server_wcs[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(server_wcs[0].byte_len, 5U);
  EXPECT_EQ(server_wcs[0].wr_id, 1U);
  EXPECT_STREQ(server_memory.data(), "ping");
  if (iwarp) {
    for (const auto& wc : server_wcs) EXPECT_EQ(wc.wc_flags & IBV_WC_WITH_IMM, 0U);
    return;
  }
  EXPECT_EQ(server_wcs[1].wc_flags & IBV_WC_WITH_IMM, IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(server_wcs[1].imm_data), 0xabcdU);
  EXPECT_EQ(server_wcs[2].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(ntohl(server_wcs[2].imm_data), 42U);
  EXPECT_STREQ(server_memory.data() + 2048, "ping");
}

TEST_F(datapath_capi, a_shared_channel_reports_which_cq_fired) {
  ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg, true), 0);
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(cfg, 4), 0);
  serve(RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY);
  rpma_mr_remote* remote = nullptr;
  rpma_conn* conn = connect(&remote);
  std::vector<char> mine(64);
  rpma_mr_local* mr = nullptr;
  ASSERT_EQ(rpma_mr_reg(peer, mine.data(), mine.size(), RPMA_MR_USAGE_WRITE_SRC, &mr), 0);
  rpma_cq* cq = nullptr;
  EXPECT_EQ(rpma_conn_get_cq(conn, &cq), 0);
  EXPECT_EQ(rpma_cq_wait(cq), RPMA_E_SHARED_CHANNEL);
  ASSERT_EQ(rpma_write(conn, remote, 0, mr, 0, 8, RPMA_F_COMPLETION_ALWAYS, nullptr), 0);
  rpma_cq* fired = nullptr;
  bool is_rcq = true;
  ibv_wc wc{};
  while (rpma_cq_get_wc(cq, 1, &wc, nullptr) == RPMA_E_NO_COMPLETION) {
    ASSERT_EQ(rpma_conn_wait(conn, 0, &fired, &is_rcq), 0);
    EXPECT_EQ(fired, cq);
    EXPECT_FALSE(is_rcq);
  }
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(rpma_mr_dereg(&mr), 0);
  EXPECT_EQ(rpma_mr_remote_delete(&remote), 0);
  close(conn);
}

TEST_F(datapath_capi, a_forged_rkey_is_a_remote_access_error) {
  serve(RPMA_MR_USAGE_WRITE_DST);
  rpma_mr_remote* remote = nullptr;
  rpma_conn* conn = connect(&remote);
  char desc[21];
  std::vector<char> mine(64);
  rpma_mr_local* mr = nullptr;
  ASSERT_EQ(rpma_mr_reg(peer, mine.data(), mine.size(),
                        RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST, &mr),
            0);
  // The server's descriptor with another rkey.
  std::vector<char> before = server_memory;
  rpma_mr_local* probe = nullptr;
  ASSERT_EQ(rpma_mr_reg(peer, mine.data(), mine.size(),
                        RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC, &probe),
            0);
  ASSERT_EQ(rpma_mr_get_descriptor(probe, desc), 0);  // a valid layout, the wrong region
  rpma_mr_remote* forged = nullptr;
  ASSERT_EQ(rpma_mr_remote_from_descriptor(desc, sizeof desc, &forged), 0);
  rpma_cq* cq = nullptr;
  ASSERT_EQ(rpma_conn_get_cq(conn, &cq), 0);
  std::uint32_t bad_rkey = 0;
  std::memcpy(&bad_rkey, desc + 16, 4);
  bad_rkey ^= 0x5a5a5a5a;
  std::memcpy(desc + 16, &bad_rkey, 4);
  rpma_mr_remote* wrong = nullptr;
  ASSERT_EQ(rpma_mr_remote_from_descriptor(desc, sizeof desc, &wrong), 0);
  if (arpma::test::iwarp()) {
    // An iWARP write completes once sent; a read, which the responder must answer,
    // meets the forged key; siw's responder terminates the connection, the read is flushed.
    ASSERT_EQ(rpma_read(conn, mr, 0, wrong, 0, 8, RPMA_F_COMPLETION_ALWAYS, nullptr), 0);
    const ibv_wc wc = next_wc(cq);
    EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(wc.status);
  } else {
    ASSERT_EQ(rpma_write(conn, wrong, 0, mr, 0, 8, RPMA_F_COMPLETION_ON_ERROR, nullptr), 0);
    const ibv_wc wc = next_wc(cq);
    EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  }
  EXPECT_EQ(server_memory, before) << "nothing written anywhere on the server";
  EXPECT_EQ(rpma_mr_remote_delete(&wrong), 0);
  EXPECT_EQ(rpma_mr_remote_delete(&forged), 0);
  EXPECT_EQ(rpma_mr_dereg(&probe), 0);
  EXPECT_EQ(rpma_mr_dereg(&mr), 0);
  EXPECT_EQ(rpma_mr_remote_delete(&remote), 0);
  rpma_conn_event ev = RPMA_CONN_UNDEFINED;
  EXPECT_EQ(rpma_conn_disconnect(conn), 0);
  EXPECT_EQ(rpma_conn_next_event(conn, &ev), 0);
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
}

}  // namespace

}  // namespace datapath_capi_integration_test

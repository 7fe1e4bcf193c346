// Shared receive queues through the C API on the provider the environment
// chooses: two connections of one server share an SRQ, each client sends one
// message, and both land in SRQ receives whose completions come on the SRQ's
// own receive CQ with the qp_num of the connection that received.
#include <librpma.h>
#include "support/capi_wait.hpp"
#include "support/test_addr.hpp"
#include "support/transport.hpp"

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <fcntl.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace srq_capi_integration_test {

using arpma::test::free_port;
using arpma::test::next_wc;
using arpma::test::test_addr;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t region = 4096;

void* ctx(std::uintptr_t v) { return reinterpret_cast<void*>(v); }

class srq_capi : public ::testing::Test {
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

  // A server thread: accepts `n` connections made with `server_cfg`, reports
  // each one's qp_num and whether it has an RCQ, then waits for each CLOSED.
  void serve(rpma_conn_cfg* server_cfg, int n) {
    std::atomic<bool> listening{false};
    server = std::thread([this, server_cfg, n, &listening] {
      rpma_ep* ep = nullptr;
      ASSERT_EQ(rpma_ep_listen(peer, addr.c_str(), port.c_str(), &ep), 0);
      listening = true;
      std::vector<rpma_conn*> conns;
      for (int i = 0; i < n; ++i) {
        rpma_conn_req* req = nullptr;
        ASSERT_EQ(rpma_ep_next_conn_req(ep, server_cfg, &req), 0);
        rpma_conn* conn = nullptr;
        ASSERT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), 0);
        rpma_conn_event ev = RPMA_CONN_UNDEFINED;
        ASSERT_EQ(rpma_conn_next_event(conn, &ev), 0);
        ASSERT_EQ(ev, RPMA_CONN_ESTABLISHED);
        std::uint32_t qp = 0;
        EXPECT_EQ(rpma_conn_get_qp_num(conn, &qp), 0);
        rpma_cq* rcq = reinterpret_cast<rpma_cq*>(ctx(1));  // overwritten
        EXPECT_EQ(rpma_conn_get_rcq(conn, &rcq), 0);
        server_rcq_null[i] = rcq == nullptr;
        server_qp[i].set_value(qp);
        conns.push_back(conn);
      }
      for (auto* conn : conns) {
        rpma_conn_event ev = RPMA_CONN_UNDEFINED;
        EXPECT_EQ(rpma_conn_next_event(conn, &ev), 0);
        EXPECT_EQ(ev, RPMA_CONN_CLOSED);
        EXPECT_EQ(rpma_conn_delete(&conn), 0);
      }
      EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
    });
    while (!listening) std::this_thread::sleep_for(1ms);
  }

  rpma_conn* connect() {
    rpma_conn_req* req = nullptr;
    EXPECT_EQ(rpma_conn_req_new(peer, addr.c_str(), port.c_str(), cfg, &req), 0);
    rpma_conn* conn = nullptr;
    EXPECT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), 0);
    rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    EXPECT_EQ(rpma_conn_next_event(conn, &ev), 0);
    EXPECT_EQ(ev, RPMA_CONN_ESTABLISHED);
    return conn;
  }

  void close(rpma_conn*& conn) {
    EXPECT_EQ(rpma_conn_disconnect(conn), 0);
    rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    EXPECT_EQ(rpma_conn_next_event(conn, &ev), 0);
    EXPECT_EQ(rpma_conn_delete(&conn), 0);
  }

  // Sends `text` (with its NUL) on `conn` and waits for the send to complete.
  void send(rpma_conn* conn, const char* text) {
    std::array<char, 64> buf{};
    std::strncpy(buf.data(), text, buf.size() - 1);
    rpma_mr_local* mr = nullptr;
    ASSERT_EQ(rpma_mr_reg(peer, buf.data(), buf.size(), RPMA_MR_USAGE_SEND, &mr), 0);
    ASSERT_EQ(rpma_send(conn, mr, 0, std::strlen(text) + 1, RPMA_F_COMPLETION_ALWAYS, nullptr), 0);
    rpma_cq* cq = nullptr;
    ASSERT_EQ(rpma_conn_get_cq(conn, &cq), 0);
    EXPECT_EQ(next_wc(cq).status, IBV_WC_SUCCESS);
    EXPECT_EQ(rpma_mr_dereg(&mr), 0);
  }

  std::string addr = test_addr();
  std::string port = free_port(addr);
  rpma_peer* peer = nullptr;
  rpma_conn_cfg* cfg = nullptr;
  std::thread server;
  std::array<std::promise<std::uint32_t>, 2> server_qp;
  std::array<bool, 2> server_rcq_null{};
};

TEST_F(srq_capi, two_connections_receive_through_one_srq_and_its_rcq) {
  rpma_srq* srq = nullptr;
  ASSERT_EQ(rpma_srq_new(peer, nullptr, &srq), 0);  // defaults: it has an RCQ
  rpma_cq* srq_rcq = nullptr;
  ASSERT_EQ(rpma_srq_get_rcq(srq, &srq_rcq), 0);
  ASSERT_NE(srq_rcq, nullptr);
  std::vector<char> in(region);
  rpma_mr_local* in_mr = nullptr;
  ASSERT_EQ(rpma_mr_reg(peer, in.data(), region, RPMA_MR_USAGE_RECV, &in_mr), 0);
  for (std::uintptr_t i = 0; i < 2; ++i)
    ASSERT_EQ(rpma_srq_recv(srq, in_mr, i * 64, 64, ctx(100 + i)), 0);

  rpma_conn_cfg* server_cfg = nullptr;
  ASSERT_EQ(rpma_conn_cfg_new(&server_cfg), 0);
  ASSERT_EQ(rpma_conn_cfg_set_srq(server_cfg, srq), 0);
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(server_cfg, 8), 0);  // ignored: the SRQ has an RCQ
  serve(server_cfg, 2);
  rpma_conn* one = connect();
  rpma_conn* two = connect();
  const std::uint32_t qp_one = server_qp[0].get_future().get();
  const std::uint32_t qp_two = server_qp[1].get_future().get();
  EXPECT_TRUE(server_rcq_null[0]) << "the SRQ's RCQ replaces the connection's";
  EXPECT_TRUE(server_rcq_null[1]);

  send(one, "from one");
  const ibv_wc first = next_wc(srq_rcq);
  send(two, "from two");
  const ibv_wc second = next_wc(srq_rcq);
  for (const auto& wc : {first, second}) {
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  }
  EXPECT_EQ(first.qp_num, qp_one);
  EXPECT_EQ(second.qp_num, qp_two);
  EXPECT_EQ(first.byte_len, sizeof "from one");
  // Receives are taken in the order they were posted, whoever sends.
  EXPECT_EQ(first.wr_id, 100U);
  EXPECT_EQ(second.wr_id, 101U);
  EXPECT_STREQ(in.data(), "from one");
  EXPECT_STREQ(in.data() + 64, "from two");
  ibv_wc none{};
  EXPECT_EQ(rpma_cq_get_wc(srq_rcq, 1, &none, nullptr), RPMA_E_NO_COMPLETION);

  // The SRQ handle may go first: the server's connections keep the SRQ.
  EXPECT_EQ(rpma_srq_delete(&srq), 0);
  EXPECT_EQ(srq, nullptr);
  close(one);
  close(two);
  server.join();
  EXPECT_EQ(rpma_mr_dereg(&in_mr), 0);
  EXPECT_EQ(rpma_conn_cfg_delete(&server_cfg), 0);
}

TEST_F(srq_capi, an_srq_without_rcq_completes_on_the_connection_cq) {
  rpma_srq_cfg* scfg = nullptr;
  ASSERT_EQ(rpma_srq_cfg_new(&scfg), 0);
  ASSERT_EQ(rpma_srq_cfg_set_rcq_size(scfg, 0), 0);
  ASSERT_EQ(rpma_srq_cfg_set_rq_size(scfg, 4), 0);
  rpma_srq* srq = nullptr;
  ASSERT_EQ(rpma_srq_new(peer, scfg, &srq), 0);
  rpma_cq* srq_rcq = reinterpret_cast<rpma_cq*>(ctx(1));
  ASSERT_EQ(rpma_srq_get_rcq(srq, &srq_rcq), 0);
  EXPECT_EQ(srq_rcq, nullptr);
  std::vector<char> in(region);
  rpma_mr_local* in_mr = nullptr;
  ASSERT_EQ(rpma_mr_reg(peer, in.data(), region, RPMA_MR_USAGE_RECV, &in_mr), 0);
  ASSERT_EQ(rpma_srq_recv(srq, in_mr, 0, 64, ctx(7)), 0);

  // The client uses an SRQ too, with a shared channel: fine without an RCQ.
  ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg, true), 0);
  rpma_conn_cfg* server_cfg = nullptr;
  ASSERT_EQ(rpma_conn_cfg_new(&server_cfg), 0);
  ASSERT_EQ(rpma_conn_cfg_set_srq(server_cfg, srq), 0);
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(server_cfg, 0), 0);
  serve(server_cfg, 1);
  rpma_conn* conn = connect();
  EXPECT_NE(server_qp[0].get_future().get(), 0U);
  EXPECT_TRUE(server_rcq_null[0]) << "rcq_size 0: none";
  close(conn);
  server.join();
  ASSERT_EQ(rpma_conn_cfg_delete(&server_cfg), 0);

  // Now a server connection in this thread, whose CQ the receive (posted
  // above, still in the SRQ) completes on; the client waits with
  // rpma_cq_wait, so no shared channel there.
  ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg, false), 0);
  port = free_port(addr);
  rpma_ep* ep = nullptr;
  ASSERT_EQ(rpma_ep_listen(peer, addr.c_str(), port.c_str(), &ep), 0);
  rpma_conn_cfg* scfg2 = nullptr;
  ASSERT_EQ(rpma_conn_cfg_new(&scfg2), 0);
  ASSERT_EQ(rpma_conn_cfg_set_srq(scfg2, srq), 0);
  std::promise<rpma_conn*> client;
  std::thread connector([&] { client.set_value(connect()); });
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_ep_next_conn_req(ep, scfg2, &req), 0);
  rpma_conn* srv = nullptr;
  ASSERT_EQ(rpma_conn_req_connect(&req, nullptr, &srv), 0);
  rpma_conn_event ev = RPMA_CONN_UNDEFINED;
  ASSERT_EQ(rpma_conn_next_event(srv, &ev), 0);
  ASSERT_EQ(ev, RPMA_CONN_ESTABLISHED);
  connector.join();
  rpma_conn* cl = client.get_future().get();
  std::uint32_t srv_qp = 0;
  ASSERT_EQ(rpma_conn_get_qp_num(srv, &srv_qp), 0);
  send(cl, "no rcq");
  rpma_cq* srv_cq = nullptr;
  ASSERT_EQ(rpma_conn_get_cq(srv, &srv_cq), 0);
  const ibv_wc wc = next_wc(srv_cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.wr_id, 7U);
  EXPECT_EQ(wc.qp_num, srv_qp);
  EXPECT_STREQ(in.data(), "no rcq");
  // Both ends on this thread: the server must read its DISCONNECTED (which
  // answers the DREQ) before the client's own DISCONNECTED can come, as on
  // rdma_cm over a real device.
  EXPECT_EQ(rpma_conn_disconnect(cl), 0);
  ASSERT_EQ(rpma_conn_next_event(srv, &ev), 0);
  EXPECT_EQ(ev, RPMA_CONN_CLOSED);
  ASSERT_EQ(rpma_conn_next_event(cl, &ev), 0);
  EXPECT_EQ(ev, RPMA_CONN_CLOSED);
  EXPECT_EQ(rpma_conn_delete(&cl), 0);
  EXPECT_EQ(rpma_conn_delete(&srv), 0);
  EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
  EXPECT_EQ(rpma_conn_cfg_delete(&scfg2), 0);
  EXPECT_EQ(rpma_srq_delete(&srq), 0);
  EXPECT_EQ(rpma_srq_cfg_delete(&scfg), 0);
  EXPECT_EQ(rpma_mr_dereg(&in_mr), 0);
}

TEST_F(srq_capi, a_shared_channel_with_an_srq_rcq_is_invalid) {
  rpma_srq* srq = nullptr;
  ASSERT_EQ(rpma_srq_new(peer, nullptr, &srq), 0);
  ASSERT_EQ(rpma_conn_cfg_set_srq(cfg, srq), 0);
  ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg, true), 0);
  rpma_ep* ep = nullptr;
  ASSERT_EQ(rpma_ep_listen(peer, addr.c_str(), port.c_str(), &ep), 0);
  rpma_conn_req* req = nullptr;
  EXPECT_EQ(rpma_conn_req_new(peer, addr.c_str(), port.c_str(), cfg, &req), RPMA_E_INVAL);
  EXPECT_EQ(req, nullptr);
  // Without the shared channel the same cfg makes a request.
  ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg, false), 0);
  ASSERT_EQ(rpma_conn_req_new(peer, addr.c_str(), port.c_str(), cfg, &req), 0);
  EXPECT_EQ(rpma_conn_req_delete(&req), 0);
  EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
  EXPECT_EQ(rpma_srq_delete(&srq), 0);
}

TEST_F(srq_capi, cfg_defaults_and_setters) {
  rpma_srq_cfg* scfg = nullptr;
  ASSERT_EQ(rpma_srq_cfg_new(&scfg), 0);
  std::uint32_t size = 0;
  ASSERT_EQ(rpma_srq_cfg_get_rq_size(scfg, &size), 0);
  EXPECT_EQ(size, 20U) << "librpma's code (its manual says 100)";
  ASSERT_EQ(rpma_srq_cfg_get_rcq_size(scfg, &size), 0);
  EXPECT_EQ(size, 20U);
  ASSERT_EQ(rpma_srq_cfg_set_rq_size(scfg, 0), 0);
  ASSERT_EQ(rpma_srq_cfg_set_rcq_size(scfg, UINT32_MAX), 0);
  ASSERT_EQ(rpma_srq_cfg_get_rq_size(scfg, &size), 0);
  EXPECT_EQ(size, 0U);
  ASSERT_EQ(rpma_srq_cfg_get_rcq_size(scfg, &size), 0);
  EXPECT_EQ(size, UINT32_MAX);
  EXPECT_EQ(rpma_srq_cfg_delete(&scfg), 0);
  EXPECT_EQ(scfg, nullptr);
  EXPECT_EQ(rpma_srq_cfg_delete(&scfg), 0) << "a second delete is harmless";
}

TEST_F(srq_capi, argument_errors) {
  rpma_srq_cfg* scfg = nullptr;
  std::uint32_t size = 0;
  EXPECT_EQ(rpma_srq_cfg_new(nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_cfg_delete(nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_cfg_set_rq_size(nullptr, 1), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_cfg_set_rcq_size(nullptr, 1), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_cfg_get_rq_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_cfg_get_rcq_size(nullptr, &size), RPMA_E_INVAL);
  ASSERT_EQ(rpma_srq_cfg_new(&scfg), 0);
  EXPECT_EQ(rpma_srq_cfg_get_rq_size(scfg, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_cfg_get_rcq_size(scfg, nullptr), RPMA_E_INVAL);

  rpma_srq* srq = nullptr;
  EXPECT_EQ(rpma_srq_new(nullptr, scfg, &srq), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_new(peer, scfg, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(srq, nullptr);
  EXPECT_EQ(rpma_srq_delete(nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_delete(&srq), 0) << "NULL *srq_ptr";

  ASSERT_EQ(rpma_srq_cfg_set_rq_size(scfg, 2), 0);
  ASSERT_EQ(rpma_srq_new(peer, scfg, &srq), 0);
  std::vector<char> in(128);
  rpma_mr_local* mr = nullptr;
  ASSERT_EQ(rpma_mr_reg(peer, in.data(), in.size(), RPMA_MR_USAGE_RECV, &mr), 0);
  EXPECT_EQ(rpma_srq_recv(nullptr, mr, 0, 8, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_recv(srq, nullptr, 1, 0, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_recv(srq, nullptr, 0, 1, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_recv(srq, mr, 120, 16, nullptr), RPMA_E_INVAL) << "past the region";
  EXPECT_EQ(rpma_srq_recv(srq, mr, 129, 0, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_recv(srq, mr, SIZE_MAX, 2, nullptr), RPMA_E_INVAL) << "overflow";
  // siw takes no receive without a buffer (libsiw: EINVAL), a provider's error as under librpma.
  EXPECT_EQ(rpma_srq_recv(srq, nullptr, 0, 0, nullptr), arpma::test::iwarp() ? RPMA_E_PROVIDER : 0)
      << "an empty receive";
  EXPECT_EQ(rpma_srq_recv(srq, mr, 0, 128, nullptr), 0);
  // Full at 2 (the soft provider) or at what the device rounded 2 up to.
  int rc = 0;
  for (int i = 0; i < 1024 && rc == 0; ++i) rc = rpma_srq_recv(srq, mr, 0, 8, nullptr);
  EXPECT_EQ(rc, RPMA_E_PROVIDER) << "the SRQ fills up";

  rpma_cq* rcq = nullptr;
  EXPECT_EQ(rpma_srq_get_rcq(nullptr, &rcq), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_get_rcq(srq, nullptr), RPMA_E_INVAL);
  ASSERT_EQ(rpma_srq_get_rcq(srq, &rcq), 0);
  ASSERT_NE(rcq, nullptr);
  int fd = -1;
  ASSERT_EQ(rpma_cq_get_fd(rcq, &fd), 0);
  ASSERT_GE(fd, 0);
  const int flags = ::fcntl(fd, F_GETFL);
  EXPECT_EQ(flags & O_NONBLOCK, 0) << "blocking, as librpma's";
  ASSERT_EQ(::fcntl(fd, F_SETFL, flags | O_NONBLOCK), 0);
  EXPECT_EQ(rpma_cq_wait(rcq), RPMA_E_NO_COMPLETION);
  ibv_wc wc{};
  EXPECT_EQ(rpma_cq_get_wc(rcq, 1, &wc, nullptr), RPMA_E_NO_COMPLETION);
  EXPECT_EQ(rpma_cq_get_wc(rcq, 2, &wc, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_cq_get_wc(rcq, 0, &wc, nullptr), RPMA_E_INVAL);

  EXPECT_EQ(rpma_srq_delete(&srq), 0);
  EXPECT_EQ(srq, nullptr);
  EXPECT_EQ(rpma_mr_dereg(&mr), 0);
  EXPECT_EQ(rpma_srq_cfg_delete(&scfg), 0);
}

}  // namespace

}  // namespace srq_capi_integration_test

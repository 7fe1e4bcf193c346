// rpma_conn_req_new end to end on the provider the environment chooses: the
// soft provider on loopback here, rdma-core in the Soft-RoCE guest
// (ARPMA_PROVIDER=verbs ARPMA_TEST_ADDR=$RXE_VM_IP). No fake anywhere.
#include <librpma.h>

#include "arpma/conn_req.hpp"
#include "arpma/error.hpp"
#include "arpma/peer.hpp"
#include "support/test_addr.hpp"
#include "support/transport.hpp"

#include <gtest/gtest.h>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace conn_req_integration_test {

using arpma::test::test_addr;
namespace {

class conn_req_integration : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = arpma::get_ibv_context(addr, arpma::ibv_context_type::remote);
    ASSERT_TRUE(dev) << addr << ": " << dev.error().message();
    auto p = arpma::peer::create(dev.value());
    ASSERT_TRUE(p) << p.error().message();
    peer.emplace(std::move(p).value());
  }

  std::string addr = test_addr();
  std::optional<arpma::peer> peer;
};

TEST_F(conn_req_integration, blocking_c_call) {
  ibv_context* dev = nullptr;
  ASSERT_EQ(rpma_utils_get_ibv_context(addr.c_str(), RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev), 0);
  rpma_peer* cpeer = nullptr;
  ASSERT_EQ(rpma_peer_new(dev, &cpeer), 0);
  rpma_conn_cfg* cfg = nullptr;
  ASSERT_EQ(rpma_conn_cfg_new(&cfg), 0);
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(cfg, 8), 0);
  ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg, true), 0);
  rpma_conn_req* req = nullptr;
  EXPECT_EQ(rpma_conn_req_new(cpeer, addr.c_str(), "7204", cfg, &req), 0);
  EXPECT_NE(req, nullptr);
  EXPECT_EQ(rpma_conn_req_delete(&req), 0);
  EXPECT_EQ(rpma_conn_cfg_delete(&cfg), 0);
  EXPECT_EQ(rpma_peer_delete(&cpeer), 0);
}

TEST_F(conn_req_integration, coroutines_and_callbacks_share_one_loop) {
  boost::asio::io_context io;
  std::uint32_t co_qp = 0;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        auto req = co_await arpma::async_conn_req_new(*peer, addr, "7204", arpma::conn_cfg{},
                                                      boost::asio::use_awaitable);
        co_qp = req.qp_num();
      },
      [](const std::exception_ptr& e) {
        if (e) std::rethrow_exception(e);
      });
  std::vector<arpma::conn_req> ready;
  int failed = 0;
  const int many = arpma::test::connections_on_this_device(200);
  for (int i = 0; i < many; ++i)
    arpma::async_conn_req_new(io.get_executor(), *peer, addr, "7204", arpma::conn_cfg{},
                              [&](std::error_code ec, arpma::conn_req r) {
                                if (ec) ++failed;
                                ready.push_back(std::move(r));
                              });
  io.run();
  EXPECT_NE(co_qp, 0u);
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(ready.size(), static_cast<std::size_t>(many));
}

TEST_F(conn_req_integration, cancelled_requests_leave_nothing_behind) {
  boost::asio::io_context io;
  int aborted = 0;
  int completed = 0;
  for (int i = 0; i < 50; ++i) {
    boost::asio::cancellation_signal signal;
    arpma::async_conn_req_new(
        io.get_executor(), *peer, addr, "7204", arpma::conn_cfg{},
        boost::asio::bind_cancellation_slot(signal.slot(), [&](std::error_code ec, auto) {
          ++(ec == std::errc::operation_canceled ? aborted : completed);
        }));
    for (int step = 0; step < i % 4; ++step) io.run_one();
    signal.emit(boost::asio::cancellation_type::terminal);
    io.run();
    io.restart();
  }
  EXPECT_EQ(aborted + completed, 50);
  EXPECT_GT(aborted, 0);
}

}  // namespace

}  // namespace conn_req_integration_test

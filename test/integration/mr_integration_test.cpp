// Memory registrations on the provider the environment chooses (soft here,
// rdma-core in the Soft-RoCE guest), in C++ and through the C API.
#include "arpma/mr.hpp"

#include "arpma/conn_req.hpp"
#include "arpma/error.hpp"
#include "arpma/peer.hpp"
#include "support/test_addr.hpp"

#include <librpma.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace mr_integration_test {

using arpma::test::test_addr;
namespace {

class mr_integration : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = arpma::get_ibv_context(addr, arpma::ibv_context_type::local);
    ASSERT_TRUE(dev) << dev.error().message();
    ctx = dev.value();
    auto p = arpma::peer::create(ctx);
    ASSERT_TRUE(p) << p.error().message();
    peer.emplace(std::move(p).value());
  }

  std::string addr = test_addr();
  ibv_context* ctx = nullptr;
  std::optional<arpma::peer> peer;
  std::vector<char> buffer = std::vector<char>(4096);
};

TEST_F(mr_integration, every_usage_registers_and_describes_itself) {
  for (int usage = 1; usage <= arpma::mr_usage::all; usage <<= 1) {
    auto mr = arpma::local_mr::reg(*peer, buffer.data(), buffer.size(), usage);
    ASSERT_TRUE(mr) << usage << ": " << mr.error().message();
    EXPECT_EQ(mr.value().ptr(), buffer.data());
    EXPECT_EQ(mr.value().size(), buffer.size());
    const auto desc = mr.value().descriptor();
    auto remote = arpma::remote_mr::from_descriptor(desc);
    ASSERT_TRUE(remote);
    EXPECT_EQ(remote.value().addr(), reinterpret_cast<std::uintptr_t>(buffer.data()));
    EXPECT_EQ(remote.value().size(), buffer.size());
    EXPECT_EQ(remote.value().usage(), usage);
    EXPECT_EQ(remote.value().descriptor(), desc);
    EXPECT_FALSE(mr.value().dereg());
    EXPECT_FALSE(mr.value());
  }
}

TEST_F(mr_integration, the_descriptor_is_librpmas_little_endian_layout) {
  auto mr = arpma::local_mr::reg(*peer, buffer.data(), buffer.size(),
                                 arpma::mr_usage::write_dst | arpma::mr_usage::read_src);
  ASSERT_TRUE(mr);
  const auto d = mr.value().descriptor();
  std::uint64_t addr_le = 0;
  for (int i = 7; i >= 0; --i) addr_le = (addr_le << 8) | d[static_cast<std::size_t>(i)];
  EXPECT_EQ(addr_le, reinterpret_cast<std::uintptr_t>(buffer.data()));
  EXPECT_EQ(d[8], buffer.size() & 0xff);
  EXPECT_EQ(d[9], (buffer.size() >> 8) & 0xff);
  EXPECT_EQ(d[20], arpma::mr_usage::write_dst | arpma::mr_usage::read_src);
}

TEST_F(mr_integration, bad_registrations_are_invalid_arguments) {
  EXPECT_EQ(arpma::local_mr::reg(*peer, nullptr, 1, arpma::mr_usage::send).error(),
            arpma::errc::invalid_argument);
  EXPECT_EQ(arpma::local_mr::reg(*peer, buffer.data(), 0, arpma::mr_usage::send).error(),
            arpma::errc::invalid_argument);
  EXPECT_EQ(arpma::local_mr::reg(*peer, buffer.data(), 8, 0).error(),
            arpma::errc::invalid_argument);
  EXPECT_EQ(arpma::local_mr::reg(*peer, buffer.data(), 8, 1 << 8).error(),
            arpma::errc::invalid_argument);
}

TEST_F(mr_integration, bad_descriptors_are_invalid_arguments) {
  arpma::mr_descriptor d{};
  d[20] = arpma::mr_usage::read_src;
  EXPECT_TRUE(arpma::remote_mr::from_descriptor(d));
  EXPECT_EQ(arpma::remote_mr::from_descriptor(std::span(d).first(20)).error(),
            arpma::errc::invalid_argument);
  d[20] = 0;
  EXPECT_EQ(arpma::remote_mr::from_descriptor(d).error(), arpma::errc::invalid_argument);
}

TEST_F(mr_integration, c_api_round_trip_and_argument_errors) {
  rpma_peer* cpeer = nullptr;
  ASSERT_EQ(rpma_peer_new(ctx, &cpeer), 0);
  rpma_mr_local* mr = nullptr;
  EXPECT_EQ(rpma_mr_reg(nullptr, buffer.data(), 8, RPMA_MR_USAGE_SEND, &mr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_reg(cpeer, buffer.data(), 8, 0, &mr), RPMA_E_INVAL);
  EXPECT_EQ(mr, nullptr);
  ASSERT_EQ(rpma_mr_reg(cpeer, buffer.data(), buffer.size(),
                        RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT, &mr),
            0);
  size_t size = 0;
  ASSERT_EQ(rpma_mr_get_descriptor_size(mr, &size), 0);
  EXPECT_EQ(size, 21U);
  std::vector<char> desc(size);
  ASSERT_EQ(rpma_mr_get_descriptor(mr, desc.data()), 0);
  rpma_mr_remote* remote = nullptr;
  EXPECT_EQ(rpma_mr_remote_from_descriptor(desc.data(), 20, &remote), RPMA_E_INVAL);
  ASSERT_EQ(rpma_mr_remote_from_descriptor(desc.data(), desc.size(), &remote), 0);
  size_t remote_size = 0;
  ASSERT_EQ(rpma_mr_remote_get_size(remote, &remote_size), 0);
  EXPECT_EQ(remote_size, buffer.size());
  int flush_type = 0;
  ASSERT_EQ(rpma_mr_remote_get_flush_type(remote, &flush_type), 0);
  EXPECT_EQ(flush_type, RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT);
  void* ptr = nullptr;
  ASSERT_EQ(rpma_mr_get_ptr(mr, &ptr), 0);
  EXPECT_EQ(ptr, buffer.data());
  int odp = -1;
  EXPECT_EQ(rpma_utils_ibv_context_is_odp_capable(ctx, &odp), 0);
  EXPECT_EQ(odp, 0) << "neither soft nor rxe (Linux 6.1) does On-Demand Paging";
  // rdma-core reports EOPNOTSUPP for a driver without advise_mr (rxe); the
  // soft provider has nothing to fault in.
  const char* prov = std::getenv("ARPMA_PROVIDER");  // NOLINT(concurrency-mt-unsafe)
  const bool verbs = prov != nullptr && std::string(prov) == "verbs";
  EXPECT_EQ(rpma_mr_advise(mr, 0, 8, 0, 0), verbs ? RPMA_E_NOSUPP : 0);
  EXPECT_EQ(rpma_mr_advise(mr, 0, buffer.size() + 1, 0, 0), RPMA_E_INVAL) << "past its end";
  EXPECT_EQ(rpma_mr_remote_delete(&remote), 0);
  EXPECT_EQ(remote, nullptr);
  EXPECT_EQ(rpma_mr_dereg(&mr), 0);
  EXPECT_EQ(mr, nullptr);
  EXPECT_EQ(rpma_peer_delete(&cpeer), 0);
}

TEST_F(mr_integration, conn_req_recv_posts_until_the_receive_queue_is_full) {
  rpma_peer* cpeer = nullptr;
  ASSERT_EQ(rpma_peer_new(ctx, &cpeer), 0);
  rpma_conn_cfg* cfg = nullptr;
  ASSERT_EQ(rpma_conn_cfg_new(&cfg), 0);
  ASSERT_EQ(rpma_conn_cfg_set_rq_size(cfg, 2), 0);
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(cpeer, addr.c_str(), "7204", cfg, &req), 0);
  rpma_mr_local* mr = nullptr;
  ASSERT_EQ(rpma_mr_reg(cpeer, buffer.data(), buffer.size(), RPMA_MR_USAGE_RECV, &mr), 0);
  EXPECT_EQ(rpma_conn_req_recv(nullptr, mr, 0, 8, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_req_recv(req, nullptr, 0, 8, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_req_recv(req, mr, buffer.size() - 4, 8, nullptr), RPMA_E_INVAL);
  // Devices may round the queue up (rxe does): at least 2 fit, and then it is full.
  int posted = 0;
  int rc = 0;
  while (posted < 4096 && (rc = rpma_conn_req_recv(req, mr, 0, 64, nullptr)) == 0) ++posted;
  EXPECT_GE(posted, 2);
  EXPECT_EQ(rc, RPMA_E_PROVIDER) << "queue full after " << posted;
  EXPECT_EQ(rpma_conn_req_delete(&req), 0);
  EXPECT_EQ(rpma_mr_dereg(&mr), 0);
  EXPECT_EQ(rpma_conn_cfg_delete(&cfg), 0);
  EXPECT_EQ(rpma_peer_delete(&cpeer), 0);
}

}  // namespace

}  // namespace mr_integration_test

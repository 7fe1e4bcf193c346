// The blocking C flavour: rpma_utils_get_ibv_context, rpma_peer_*, and
// rpma_conn_req_new/_delete against the scripted provider — return codes,
// untouched out-parameters, nothing left behind.
#include <librpma.h>

#include "fake/fake_provider.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace conn_req_capi_test {

using arpma::test::fake_provider;
using event = arpma::provider::cm_event_type;

namespace {

auto* const sentinel_req = reinterpret_cast<rpma_conn_req*>(0x5a5a);

class conn_req_capi : public ::testing::Test {
 protected:
  void SetUp() override {
    ibv_context* dev = nullptr;
    ASSERT_EQ(rpma_utils_get_ibv_context("192.0.2.1", RPMA_UTIL_IBV_CONTEXT_REMOTE, &dev), 0);
    ASSERT_EQ(dev, fake.device());
    ASSERT_EQ(rpma_peer_new(dev, &peer), 0);
  }
  void TearDown() override {
    EXPECT_EQ(rpma_peer_delete(&peer), 0);
    EXPECT_EQ(peer, nullptr);
    EXPECT_THAT(fake.violations(), ::testing::IsEmpty());
    EXPECT_EQ(fake.live_objects(), 0u);
  }

  fake_provider fake;
  arpma::provider::scoped_override use_fake{fake};
  rpma_peer* peer = nullptr;
};

TEST_F(conn_req_capi, new_and_delete) {
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer, "192.0.2.1", "7204", nullptr, &req), 0);
  ASSERT_NE(req, nullptr);
  auto qp = fake.qp_of(fake.ids().front());
  ASSERT_TRUE(qp);
  EXPECT_EQ(qp->send_cqe, 10);
  EXPECT_TRUE(qp->same_cq);
  EXPECT_EQ(rpma_conn_req_delete(&req), 0);
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(rpma_conn_req_delete(&req), 0);
  EXPECT_EQ(fake.live_objects(), 1u);  // the peer's PD
}

TEST_F(conn_req_capi, cfg_shapes_the_queues) {
  rpma_conn_cfg* cfg = nullptr;
  ASSERT_EQ(rpma_conn_cfg_new(&cfg), 0);
  ASSERT_EQ(rpma_conn_cfg_set_cq_size(cfg, 20), 0);
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(cfg, 30), 0);
  ASSERT_EQ(rpma_conn_cfg_set_sq_size(cfg, 40), 0);
  ASSERT_EQ(rpma_conn_cfg_set_rq_size(cfg, 50), 0);
  ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg, true), 0);
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer, "192.0.2.1", "7204", cfg, &req), 0);
  auto qp = fake.qp_of(fake.ids().front());
  ASSERT_TRUE(qp);
  EXPECT_EQ(qp->send_cqe, 20);
  EXPECT_EQ(qp->recv_cqe, 30);
  EXPECT_TRUE(qp->shared_comp_channel);
  EXPECT_EQ(qp->config.max_send_wr, 40u);
  EXPECT_EQ(qp->config.max_recv_wr, 50u);
  EXPECT_EQ(rpma_conn_req_delete(&req), 0);
  EXPECT_EQ(rpma_conn_cfg_delete(&cfg), 0);
}

TEST_F(conn_req_capi, each_request_gets_an_event_channel_of_its_own) {
  rpma_conn_req* a = nullptr;
  rpma_conn_req* b = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer, "192.0.2.1", "7204", nullptr, &a), 0);
  ASSERT_EQ(rpma_conn_req_new(peer, "192.0.2.2", "7204", nullptr, &b), 0);
  EXPECT_EQ(fake.event_channels_created(), 2);
  EXPECT_EQ(rpma_conn_req_delete(&a), 0);
  EXPECT_EQ(rpma_conn_req_delete(&b), 0);
}

class conn_req_capi_failure : public conn_req_capi,
                              public ::testing::WithParamInterface<const char*> {};

TEST_P(conn_req_capi_failure, returns_provider_error_and_leaves_req_untouched) {
  fake.fail(GetParam(), EIO);
  rpma_conn_req* req = sentinel_req;
  EXPECT_EQ(rpma_conn_req_new(peer, "192.0.2.1", "7204", nullptr, &req), RPMA_E_PROVIDER);
  EXPECT_EQ(req, sentinel_req);
  EXPECT_EQ(fake.live_objects(), 1u);
}

INSTANTIATE_TEST_SUITE_P(each_step, conn_req_capi_failure,
                         ::testing::Values("create_event_channel", "create_id", "resolve_addr",
                                           "resolve_route", "create_comp_channel", "create_cq",
                                           "req_notify_cq", "create_qp"));

TEST_F(conn_req_capi, addr_error_route_error_and_timeout_are_provider_errors) {
  rpma_conn_req* req = sentinel_req;
  fake.on_resolve_addr({{event::addr_error, -EHOSTUNREACH}});
  EXPECT_EQ(rpma_conn_req_new(peer, "192.0.2.1", "7204", nullptr, &req), RPMA_E_PROVIDER);
  fake.on_resolve_addr({{event::addr_resolved}});
  fake.on_resolve_route({{event::route_error, -ETIMEDOUT}});
  EXPECT_EQ(rpma_conn_req_new(peer, "192.0.2.1", "7204", nullptr, &req), RPMA_E_PROVIDER);
  fake.on_resolve_route({});
  rpma_conn_cfg* cfg = nullptr;
  ASSERT_EQ(rpma_conn_cfg_new(&cfg), 0);
  ASSERT_EQ(rpma_conn_cfg_set_timeout(cfg, 30), 0);
  EXPECT_EQ(rpma_conn_req_new(peer, "192.0.2.1", "7204", cfg, &req), RPMA_E_PROVIDER);
  EXPECT_EQ(rpma_conn_cfg_delete(&cfg), 0);
  EXPECT_EQ(req, sentinel_req);
  EXPECT_EQ(fake.live_objects(), 1u);
}

TEST_F(conn_req_capi, null_arguments_are_invalid_before_anything_happens) {
  rpma_conn_req* req = sentinel_req;
  (void)fake.take_calls();
  EXPECT_EQ(rpma_conn_req_new(nullptr, "192.0.2.1", "7204", nullptr, &req), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_req_new(peer, nullptr, "7204", nullptr, &req), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_req_new(peer, "192.0.2.1", nullptr, nullptr, &req), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_req_new(peer, "192.0.2.1", "7204", nullptr, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_req_delete(nullptr), RPMA_E_INVAL);
  EXPECT_EQ(req, sentinel_req);
  EXPECT_TRUE(fake.take_calls().empty());
}

TEST_F(conn_req_capi, delete_goes_on_after_a_failed_step_and_reports_it) {
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer, "192.0.2.1", "7204", nullptr, &req), 0);
  fake.fail("destroy_cq", EBUSY);
  EXPECT_EQ(rpma_conn_req_delete(&req), RPMA_E_PROVIDER);
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(fake.live_objects(), 1u);
}

TEST_F(conn_req_capi, peer_new_maps_pd_errors_like_librpma) {
  rpma_peer* other = nullptr;
  fake.fail("alloc_pd", ENOMEM);
  EXPECT_EQ(rpma_peer_new(fake.device(), &other), RPMA_E_NOMEM);
  fake.fail("alloc_pd", EACCES);
  EXPECT_EQ(rpma_peer_new(fake.device(), &other), RPMA_E_PROVIDER);
  EXPECT_EQ(other, nullptr);
}

TEST_F(conn_req_capi, peer_delete_frees_even_when_the_pd_fails) {
  rpma_peer* other = nullptr;
  ASSERT_EQ(rpma_peer_new(fake.device(), &other), 0);
  fake.fail("dealloc_pd", EBUSY);
  EXPECT_EQ(rpma_peer_delete(&other), RPMA_E_PROVIDER);
  EXPECT_EQ(other, nullptr);
}

TEST_F(conn_req_capi, device_lookup_failure_is_a_provider_error) {
  fake.fail("find_device", ENODEV);
  ibv_context* dev = nullptr;
  EXPECT_EQ(rpma_utils_get_ibv_context("192.0.2.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev),
            RPMA_E_PROVIDER);
  EXPECT_EQ(dev, nullptr);
}

}  // namespace

}  // namespace conn_req_capi_test

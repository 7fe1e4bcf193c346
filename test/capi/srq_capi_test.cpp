// rpma_srq_new / rpma_srq_delete and connections using an SRQ against the
// scripted provider: creation order (SRQ, then the RCQ's channel, CQ and
// arming), every failure point unwinding to nothing, the teardown order, the
// QP shape with an SRQ, and who destroys the SRQ when connections share it.
#include <librpma.h>

#include "fake/fake_provider.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

namespace srq_capi_test {

using arpma::test::fake_provider;
using ::testing::ElementsAre;

namespace {

using strings = std::vector<std::string>;

class srq_capi : public ::testing::Test {
 protected:
  void SetUp() override {
    ibv_context* dev = nullptr;
    ASSERT_EQ(rpma_utils_get_ibv_context("192.0.2.1", RPMA_UTIL_IBV_CONTEXT_REMOTE, &dev), 0);
    ASSERT_EQ(rpma_peer_new(dev, &peer), 0);
    ASSERT_EQ(rpma_conn_cfg_new(&cfg), 0);
    ASSERT_EQ(rpma_srq_cfg_new(&scfg), 0);
    (void)fake.take_calls();
    baseline = fake.live_objects();  // the peer's PD
  }
  void TearDown() override {
    EXPECT_EQ(rpma_srq_cfg_delete(&scfg), 0);
    EXPECT_EQ(rpma_conn_cfg_delete(&cfg), 0);
    EXPECT_EQ(rpma_peer_delete(&peer), 0);
    EXPECT_THAT(fake.violations(), ::testing::IsEmpty());
    EXPECT_EQ(fake.live_objects(), 0u);
  }

  // A connected active connection made with `cfg`.
  rpma_conn* connected() {
    rpma_conn_req* req = nullptr;
    EXPECT_EQ(rpma_conn_req_new(peer, "192.0.2.1", "7204", cfg, &req), 0);
    rpma_conn* conn = nullptr;
    EXPECT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), 0);
    rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    EXPECT_EQ(rpma_conn_next_event(conn, &ev), 0);
    EXPECT_EQ(ev, RPMA_CONN_ESTABLISHED);
    return conn;
  }

  fake_provider fake;
  arpma::provider::scoped_override use_fake{fake};
  rpma_peer* peer = nullptr;
  rpma_conn_cfg* cfg = nullptr;
  rpma_srq_cfg* scfg = nullptr;
  std::size_t baseline = 0;
};

const strings srq_creation = {"create_srq", "create_comp_channel", "create_cq", "req_notify_cq"};
const strings srq_teardown = {"destroy_cq", "destroy_comp_channel", "destroy_srq"};

TEST_F(srq_capi, an_srq_with_rcq_is_made_and_torn_down_in_reverse) {
  rpma_srq* srq = nullptr;
  ASSERT_EQ(rpma_srq_new(peer, scfg, &srq), 0);
  EXPECT_EQ(fake.take_calls(), srq_creation);
  EXPECT_EQ(fake.live_objects(), baseline + 3);
  EXPECT_EQ(rpma_srq_delete(&srq), 0);
  EXPECT_EQ(srq, nullptr);
  EXPECT_EQ(fake.take_calls(), srq_teardown);
  EXPECT_EQ(fake.live_objects(), baseline);
}

TEST_F(srq_capi, an_srq_without_rcq_is_only_the_srq) {
  ASSERT_EQ(rpma_srq_cfg_set_rcq_size(scfg, 0), 0);
  rpma_srq* srq = nullptr;
  ASSERT_EQ(rpma_srq_new(peer, scfg, &srq), 0);
  EXPECT_THAT(fake.take_calls(), ElementsAre("create_srq"));
  rpma_cq* rcq = nullptr;
  ASSERT_EQ(rpma_srq_get_rcq(srq, &rcq), 0);
  EXPECT_EQ(rcq, nullptr);
  EXPECT_EQ(rpma_srq_delete(&srq), 0);
  EXPECT_THAT(fake.take_calls(), ElementsAre("destroy_srq"));
}

TEST_F(srq_capi, every_creation_failure_unwinds_what_was_made) {
  for (std::size_t step = 0; step < srq_creation.size(); ++step) {
    SCOPED_TRACE(srq_creation[step]);
    fake.fail(srq_creation[step], EIO);
    rpma_srq* srq = nullptr;
    EXPECT_EQ(rpma_srq_new(peer, scfg, &srq), RPMA_E_PROVIDER);
    EXPECT_EQ(srq, nullptr);
    EXPECT_EQ(fake.live_objects(), baseline);
    const strings made(srq_creation.begin(), srq_creation.begin() + static_cast<long>(step) + 1);
    strings expected = made;
    // Undo in reverse: the CQ (armed or not), its channel, the SRQ.
    if (step >= 3) expected.emplace_back("destroy_cq");
    if (step >= 2) expected.emplace_back("destroy_comp_channel");
    if (step >= 1) expected.emplace_back("destroy_srq");
    EXPECT_EQ(fake.take_calls(), expected);
  }
}

TEST_F(srq_capi, delete_goes_on_after_a_failure_and_reports_the_first) {
  rpma_srq* srq = nullptr;
  ASSERT_EQ(rpma_srq_new(peer, scfg, &srq), 0);
  (void)fake.take_calls();
  fake.fail("destroy_cq", EIO);
  EXPECT_EQ(rpma_srq_delete(&srq), RPMA_E_PROVIDER);
  EXPECT_EQ(srq, nullptr);
  EXPECT_EQ(fake.take_calls(), srq_teardown);
}

TEST_F(srq_capi, a_connection_receives_from_the_srq_into_its_rcq) {
  ASSERT_EQ(rpma_srq_cfg_set_rcq_size(scfg, 7), 0);
  rpma_srq* srq = nullptr;
  ASSERT_EQ(rpma_srq_new(peer, scfg, &srq), 0);
  ASSERT_EQ(rpma_conn_cfg_set_srq(cfg, srq), 0);
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(cfg, 5), 0);  // ignored: the SRQ's RCQ is used
  (void)fake.take_calls();
  rpma_conn* conn = connected();
  const strings calls = fake.take_calls();
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "create_cq"), 1) << "the CQ only";
  const auto qp = fake.qp_of(fake.ids().back());
  ASSERT_NE(qp, nullptr);
  EXPECT_NE(qp->config.shared_rq, nullptr);
  EXPECT_EQ(qp->send_cqe, 10);
  EXPECT_EQ(qp->recv_cqe, 7) << "the SRQ's RCQ";
  rpma_cq* rcq = reinterpret_cast<rpma_cq*>(&fake);  // overwritten
  ASSERT_EQ(rpma_conn_get_rcq(conn, &rcq), 0);
  EXPECT_EQ(rcq, nullptr);

  // The handle goes first; the connection keeps the SRQ until it is deleted.
  EXPECT_EQ(rpma_srq_delete(&srq), 0);
  EXPECT_THAT(fake.take_calls(), ::testing::IsEmpty());
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
  EXPECT_EQ(fake.take_calls(),
            (strings{"destroy_qp", "destroy_cq", "destroy_comp_channel", "destroy_srq",
                     "destroy_cq", "destroy_comp_channel", "destroy_id", "destroy_event_channel"}));
}

TEST_F(srq_capi, an_srq_without_rcq_leaves_the_connection_rcq_to_the_cfg) {
  ASSERT_EQ(rpma_srq_cfg_set_rcq_size(scfg, 0), 0);
  rpma_srq* srq = nullptr;
  ASSERT_EQ(rpma_srq_new(peer, scfg, &srq), 0);
  ASSERT_EQ(rpma_conn_cfg_set_srq(cfg, srq), 0);
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(cfg, 5), 0);
  ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg, true), 0);  // fine without an SRQ RCQ
  rpma_conn* conn = connected();
  const auto qp = fake.qp_of(fake.ids().back());
  ASSERT_NE(qp, nullptr);
  EXPECT_NE(qp->config.shared_rq, nullptr);
  EXPECT_EQ(qp->recv_cqe, 5);
  EXPECT_TRUE(qp->shared_comp_channel);
  rpma_cq* rcq = nullptr;
  ASSERT_EQ(rpma_conn_get_rcq(conn, &rcq), 0);
  EXPECT_NE(rcq, nullptr);
  // Deleted while the connection lives: in librpma ibv_destroy_srq says EBUSY.
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
  (void)fake.take_calls();
  EXPECT_EQ(rpma_srq_delete(&srq), 0);
  EXPECT_THAT(fake.take_calls(), ElementsAre("destroy_srq"));
}

TEST_F(srq_capi, a_shared_channel_and_an_srq_rcq_are_refused_before_any_queue) {
  rpma_srq* srq = nullptr;
  ASSERT_EQ(rpma_srq_new(peer, scfg, &srq), 0);
  ASSERT_EQ(rpma_conn_cfg_set_srq(cfg, srq), 0);
  ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg, true), 0);
  (void)fake.take_calls();
  rpma_conn_req* req = nullptr;
  EXPECT_EQ(rpma_conn_req_new(peer, "192.0.2.1", "7204", cfg, &req), RPMA_E_INVAL);
  EXPECT_EQ(req, nullptr);
  for (const auto& call : fake.take_calls()) {
    EXPECT_NE(call, "create_comp_channel");
    EXPECT_NE(call, "create_cq");
    EXPECT_NE(call, "create_qp");
  }
  EXPECT_EQ(fake.live_objects(), baseline + 3) << "only the SRQ and its RCQ remain";
  EXPECT_EQ(rpma_srq_delete(&srq), 0);
}

TEST_F(srq_capi, recv_posts_on_the_srq) {
  rpma_srq* srq = nullptr;
  ASSERT_EQ(rpma_srq_new(peer, scfg, &srq), 0);
  (void)fake.take_calls();
  EXPECT_EQ(rpma_srq_recv(srq, nullptr, 0, 0, nullptr), 0);
  fake.fail("post_srq_recv", ENOMEM);
  EXPECT_EQ(rpma_srq_recv(srq, nullptr, 0, 0, nullptr), RPMA_E_PROVIDER);
  EXPECT_THAT(fake.take_calls(), ElementsAre("post_srq_recv", "post_srq_recv"));
  EXPECT_EQ(rpma_srq_delete(&srq), 0);
}

}  // namespace

}  // namespace srq_capi_test

// rpma_conn_req_connect, rpma_conn_* and rpma_peer_cfg_* against the scripted
// provider: the request consumed or not as librpma does, connect and accept
// failures, the mapping of every rdma_cm event, private data, the teardown
// order of rpma_conn_delete, the CQ and fd getters.
#include <librpma.h>

#include "fake/fake_provider.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>

#include <string>
#include <vector>

namespace conn_capi_test {

using arpma::test::fake_provider;
using event = arpma::provider::cm_event_type;
using ::testing::ElementsAre;
using namespace std::chrono_literals;

namespace {

using strings = std::vector<std::string>;

auto* const sentinel_conn = reinterpret_cast<rpma_conn*>(0x5a5a);

class conn_capi : public ::testing::Test {
 protected:
  void SetUp() override {
    ibv_context* dev = nullptr;
    ASSERT_EQ(rpma_utils_get_ibv_context("192.0.2.1", RPMA_UTIL_IBV_CONTEXT_REMOTE, &dev), 0);
    ASSERT_EQ(rpma_peer_new(dev, &peer), 0);
    ASSERT_EQ(rpma_conn_cfg_new(&cfg), 0);
  }
  void TearDown() override {
    EXPECT_EQ(rpma_conn_cfg_delete(&cfg), 0);
    EXPECT_EQ(rpma_peer_delete(&peer), 0);
    EXPECT_THAT(fake.violations(), ::testing::IsEmpty());
    EXPECT_EQ(fake.live_objects(), 0u);
  }

  rpma_conn_req* request() {
    rpma_conn_req* req = nullptr;
    EXPECT_EQ(rpma_conn_req_new(peer, "192.0.2.1", "7204", cfg, &req), 0);
    (void)fake.take_calls();
    return req;
  }

  // Connected (ESTABLISHED read) active connection.
  rpma_conn* connected() {
    rpma_conn_req* req = request();
    rpma_conn* conn = nullptr;
    EXPECT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), 0);
    rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    EXPECT_EQ(rpma_conn_next_event(conn, &ev), 0);
    EXPECT_EQ(ev, RPMA_CONN_ESTABLISHED);
    (void)fake.take_calls();
    return conn;
  }

  arpma::provider::cm_id* id() const { return fake.ids().back(); }

  fake_provider fake;
  arpma::provider::scoped_override use_fake{fake};
  rpma_peer* peer = nullptr;
  rpma_conn_cfg* cfg = nullptr;
};

const strings active_teardown = {"destroy_qp", "destroy_cq", "destroy_comp_channel", "destroy_id",
                                 "destroy_event_channel"};

// ---- rpma_conn_req_connect ------------------------------------------------------------

TEST_F(conn_capi, connect_sends_the_private_data_and_consumes_the_request) {
  rpma_conn_req* req = request();
  char hello[] = "hello";
  const rpma_conn_private_data pdata{hello, 5};
  rpma_conn* conn = nullptr;
  ASSERT_EQ(rpma_conn_req_connect(&req, &pdata, &conn), 0);
  EXPECT_EQ(req, nullptr);
  ASSERT_NE(conn, nullptr);
  EXPECT_THAT(fake.take_calls(), ElementsAre("connect")) << "nothing moves: born on its channel";
  const auto sent = fake.sent_data();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(std::string(sent[0].private_data.begin(), sent[0].private_data.end()), "hello");
  int fd = -1;
  ASSERT_EQ(rpma_conn_get_event_fd(conn, &fd), 0);
  EXPECT_EQ(fcntl(fd, F_GETFL) & O_NONBLOCK, 0) << "blocking, as librpma's";
  rpma_cq* cq = nullptr;
  ASSERT_EQ(rpma_conn_get_cq(conn, &cq), 0);
  ASSERT_EQ(rpma_cq_get_fd(cq, &fd), 0);
  EXPECT_EQ(fcntl(fd, F_GETFL) & O_NONBLOCK, 0) << "the completion fd too";
  (void)fake.take_calls();  // the fd getters are not what this checks
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
  EXPECT_EQ(conn, nullptr);
  EXPECT_EQ(fake.take_calls(), active_teardown);
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
  EXPECT_EQ(rpma_conn_delete(nullptr), RPMA_E_INVAL);
}

TEST_F(conn_capi, connect_without_a_request_is_invalid_and_consumes_nothing) {
  (void)fake.take_calls();
  rpma_conn* conn = sentinel_conn;
  EXPECT_EQ(rpma_conn_req_connect(nullptr, nullptr, &conn), RPMA_E_INVAL);
  rpma_conn_req* none = nullptr;
  EXPECT_EQ(rpma_conn_req_connect(&none, nullptr, &conn), RPMA_E_INVAL);
  EXPECT_EQ(conn, sentinel_conn);
  EXPECT_TRUE(fake.take_calls().empty());
}

TEST_F(conn_capi, connect_with_bad_arguments_consumes_the_request) {
  char byte = 1;
  const rpma_conn_private_data null_ptr{nullptr, 1};
  const rpma_conn_private_data zero_len{&byte, 0};
  for (int i = 0; i < 3; ++i) {
    rpma_conn_req* req = request();
    rpma_conn* conn = sentinel_conn;
    const int rc = i == 0   ? rpma_conn_req_connect(&req, nullptr, nullptr)
                   : i == 1 ? rpma_conn_req_connect(&req, &null_ptr, &conn)
                            : rpma_conn_req_connect(&req, &zero_len, &conn);
    EXPECT_EQ(rc, RPMA_E_INVAL);
    EXPECT_EQ(req, nullptr) << "consumed (librpma: rpma_conn_req_connect frees the request)";
    EXPECT_EQ(conn, sentinel_conn);
    EXPECT_EQ(fake.take_calls(), active_teardown) << "released, never connected";
  }
  EXPECT_EQ(fake.live_objects(), 1u);
}

TEST_F(conn_capi, a_failed_connect_releases_everything) {
  rpma_conn_req* req = request();
  fake.fail("connect", EIO);
  rpma_conn* conn = sentinel_conn;
  EXPECT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), RPMA_E_PROVIDER);
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(conn, sentinel_conn);
  strings expected{"connect"};
  expected.insert(expected.end(), active_teardown.begin(), active_teardown.end());
  EXPECT_EQ(fake.take_calls(), expected);
  EXPECT_EQ(fake.live_objects(), 1u);
}

TEST_F(conn_capi, private_data_longer_than_rdma_cm_allows_is_a_provider_error) {
  rpma_conn_req* req = request();
  std::vector<char> big(57, 'x');
  const rpma_conn_private_data pdata{big.data(), 57};
  rpma_conn* conn = sentinel_conn;
  EXPECT_EQ(rpma_conn_req_connect(&req, &pdata, &conn), RPMA_E_PROVIDER);
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(conn, sentinel_conn);
}

// ---- the passive side -----------------------------------------------------------------

class conn_capi_passive : public conn_capi {
 protected:
  void SetUp() override {
    conn_capi::SetUp();
    ASSERT_EQ(rpma_ep_listen(peer, "127.0.0.1", "7204", &ep), 0);
    listener = fake.ids().front();
  }
  void TearDown() override {
    EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
    conn_capi::TearDown();
  }
  rpma_conn_req* incoming(std::vector<std::uint8_t> pdata = {}) {
    fake.incoming(listener, std::move(pdata));
    rpma_conn_req* req = nullptr;
    EXPECT_EQ(rpma_ep_next_conn_req(ep, cfg, &req), 0);
    (void)fake.take_calls();
    return req;
  }

  rpma_ep* ep = nullptr;
  arpma::provider::cm_id* listener = nullptr;
};

TEST_F(conn_capi_passive, accept_keeps_the_clients_private_data) {
  rpma_conn_req* req = incoming({4, 5, 6});
  char reply[] = "ok";
  const rpma_conn_private_data pdata{reply, 2};
  rpma_conn* conn = nullptr;
  ASSERT_EQ(rpma_conn_req_connect(&req, &pdata, &conn), 0);
  EXPECT_THAT(fake.take_calls(), ElementsAre("accept"));
  EXPECT_THAT(fake.sent_data().back().private_data, ElementsAre('o', 'k'));
  rpma_conn_event ev = RPMA_CONN_UNDEFINED;
  ASSERT_EQ(rpma_conn_next_event(conn, &ev), 0);
  EXPECT_EQ(ev, RPMA_CONN_ESTABLISHED);
  rpma_conn_private_data got{};
  ASSERT_EQ(rpma_conn_get_private_data(conn, &got), 0);
  ASSERT_EQ(got.len, 3);
  const auto* bytes = static_cast<const std::uint8_t*>(got.ptr);
  EXPECT_THAT(std::vector<std::uint8_t>(bytes, bytes + got.len), ElementsAre(4, 5, 6));
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
  EXPECT_EQ(fake.take_calls(), active_teardown) << "accepted: destroyed, not rejected";
}

TEST_F(conn_capi_passive, a_failed_accept_rejects_and_destroys_the_request) {
  rpma_conn_req* req = incoming();
  fake.fail("accept", EIO);
  rpma_conn* conn = sentinel_conn;
  EXPECT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), RPMA_E_PROVIDER);
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(conn, sentinel_conn);
  EXPECT_THAT(fake.take_calls(),
              ElementsAre("accept", "destroy_qp", "destroy_cq", "destroy_comp_channel", "reject",
                          "destroy_id", "destroy_event_channel"))
      << "deliberately more than librpma, which neither rejects nor destroys the id";
  EXPECT_EQ(fake.ids().size(), 1u);
}

TEST_F(conn_capi_passive, bad_arguments_reject_the_consumed_request) {
  rpma_conn_req* req = incoming();
  EXPECT_EQ(rpma_conn_req_connect(&req, nullptr, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(req, nullptr);
  EXPECT_THAT(fake.take_calls(), ElementsAre("destroy_qp", "destroy_cq", "destroy_comp_channel",
                                             "reject", "destroy_id", "destroy_event_channel"));
}

// ---- rpma_conn_next_event --------------------------------------------------------------

struct mapping {
  event type;
  rpma_conn_event expected;
};

class conn_capi_event : public conn_capi, public ::testing::WithParamInterface<mapping> {};

TEST_P(conn_capi_event, maps_as_librpma) {
  rpma_conn* conn = connected();
  fake.deliver(id(), GetParam().type);
  rpma_conn_event ev = RPMA_CONN_UNDEFINED;
  EXPECT_EQ(rpma_conn_next_event(conn, &ev), 0);
  EXPECT_EQ(ev, GetParam().expected);
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
}

INSTANTIATE_TEST_SUITE_P(every_event, conn_capi_event,
                         ::testing::Values(mapping{event::established, RPMA_CONN_ESTABLISHED},
                                           mapping{event::connect_error, RPMA_CONN_LOST},
                                           mapping{event::device_removal, RPMA_CONN_LOST},
                                           mapping{event::disconnected, RPMA_CONN_CLOSED},
                                           mapping{event::timewait_exit, RPMA_CONN_CLOSED},
                                           mapping{event::rejected, RPMA_CONN_REJECTED},
                                           mapping{event::unreachable, RPMA_CONN_UNREACHABLE}),
                         [](const auto& param_info) {
                           return std::string(arpma::provider::to_string(param_info.param.type));
                         });

class conn_capi_unmapped : public conn_capi, public ::testing::WithParamInterface<event> {};

TEST_P(conn_capi_unmapped, is_unknown_and_leaves_the_event) {
  rpma_conn* conn = connected();
  fake.deliver(id(), GetParam());
  rpma_conn_event ev = RPMA_CONN_UNREACHABLE;  // a sentinel: never the answer here
  EXPECT_EQ(rpma_conn_next_event(conn, &ev), RPMA_E_UNKNOWN);
  EXPECT_EQ(ev, RPMA_CONN_UNREACHABLE);
  // ... and it is consumed: the next one is read.
  fake.deliver(id(), event::disconnected);
  EXPECT_EQ(rpma_conn_next_event(conn, &ev), 0);
  EXPECT_EQ(ev, RPMA_CONN_CLOSED);
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
}

INSTANTIATE_TEST_SUITE_P(others, conn_capi_unmapped,
                         ::testing::Values(event::addr_resolved, event::addr_error,
                                           event::route_resolved, event::route_error,
                                           event::connect_response, event::addr_change,
                                           event::other),
                         [](const auto& param_info) {
                           return std::string(arpma::provider::to_string(param_info.param));
                         });

TEST_F(conn_capi, next_event_on_a_non_blocking_fd_with_nothing_pending_is_no_event) {
  rpma_conn* conn = connected();
  int fd = -1;
  ASSERT_EQ(rpma_conn_get_event_fd(conn, &fd), 0);
  ASSERT_EQ(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
  rpma_conn_event ev = RPMA_CONN_UNREACHABLE;  // a sentinel: never the answer here
  EXPECT_EQ(rpma_conn_next_event(conn, &ev), RPMA_E_NO_EVENT);
  EXPECT_EQ(ev, RPMA_CONN_UNREACHABLE);
  EXPECT_EQ(rpma_conn_next_event(nullptr, &ev), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_next_event(conn, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
}

TEST_F(conn_capi, a_delayed_event_is_waited_for_on_a_blocking_fd) {
  fake.on_connect({{event::established, 0, 30ms}});
  rpma_conn_req* req = request();
  rpma_conn* conn = nullptr;
  ASSERT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), 0);
  rpma_conn_event ev = RPMA_CONN_UNDEFINED;
  EXPECT_EQ(rpma_conn_next_event(conn, &ev), 0);
  EXPECT_EQ(ev, RPMA_CONN_ESTABLISHED);
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
}

TEST_F(conn_capi, the_servers_private_data_is_kept_from_established) {
  fake.on_connect({{event::established, 0, 0ms, {9, 8, 7}}});
  rpma_conn_req* req = request();
  rpma_conn* conn = nullptr;
  ASSERT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), 0);
  rpma_conn_private_data got{reinterpret_cast<void*>(1), 1};
  ASSERT_EQ(rpma_conn_get_private_data(conn, &got), 0);
  EXPECT_EQ(got.ptr, nullptr) << "none before ESTABLISHED is read";
  EXPECT_EQ(got.len, 0);
  rpma_conn_event ev = RPMA_CONN_UNDEFINED;
  ASSERT_EQ(rpma_conn_next_event(conn, &ev), 0);
  ASSERT_EQ(rpma_conn_get_private_data(conn, &got), 0);
  ASSERT_EQ(got.len, 3);
  const auto* bytes = static_cast<const std::uint8_t*>(got.ptr);
  EXPECT_THAT(std::vector<std::uint8_t>(bytes, bytes + got.len), ElementsAre(9, 8, 7));
  // A later ESTABLISHED does not replace it (librpma stores only the first).
  fake.deliver(id(), {event::established, 0, 0ms, {1}});
  ASSERT_EQ(rpma_conn_next_event(conn, &ev), 0);
  ASSERT_EQ(rpma_conn_get_private_data(conn, &got), 0);
  EXPECT_EQ(got.len, 3);
  EXPECT_EQ(rpma_conn_get_private_data(nullptr, &got), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_get_private_data(conn, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
}

// ---- disconnect and delete ---------------------------------------------------------------

TEST_F(conn_capi, disconnect_then_closed) {
  rpma_conn* conn = connected();
  EXPECT_EQ(rpma_conn_disconnect(conn), 0);
  EXPECT_THAT(fake.take_calls(), ElementsAre("disconnect"));
  rpma_conn_event ev = RPMA_CONN_UNDEFINED;
  ASSERT_EQ(rpma_conn_next_event(conn, &ev), 0);
  EXPECT_EQ(ev, RPMA_CONN_CLOSED);
  EXPECT_EQ(rpma_conn_disconnect(nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
  EXPECT_EQ(fake.take_calls(), active_teardown) << "delete does not disconnect again";
}

TEST_F(conn_capi, a_failed_disconnect_is_a_provider_error) {
  rpma_conn* conn = connected();
  fake.fail("disconnect", EIO);
  EXPECT_EQ(rpma_conn_disconnect(conn), RPMA_E_PROVIDER);
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
}

TEST_F(conn_capi, delete_order_with_receive_cq_and_own_channels) {
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(cfg, 5), 0);
  rpma_conn* conn = connected();
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
  EXPECT_THAT(fake.take_calls(),
              ElementsAre("destroy_qp", "destroy_cq", "destroy_comp_channel", "destroy_cq",
                          "destroy_comp_channel", "destroy_id", "destroy_event_channel"))
      << "QP, RCQ (and its channel), CQ (and its channel), id, event channel";
}

TEST_F(conn_capi, delete_order_with_a_shared_completion_channel) {
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(cfg, 5), 0);
  ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg, true), 0);
  rpma_conn* conn = connected();
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
  EXPECT_THAT(fake.take_calls(),
              ElementsAre("destroy_qp", "destroy_cq", "destroy_cq", "destroy_comp_channel",
                          "destroy_id", "destroy_event_channel"))
      << "QP, RCQ, CQ, shared channel, id, event channel";
}

TEST_F(conn_capi, a_failed_step_of_delete_is_reported_and_teardown_goes_on) {
  rpma_conn* conn = connected();
  fake.fail("destroy_cq", EIO);
  EXPECT_EQ(rpma_conn_delete(&conn), RPMA_E_PROVIDER);
  EXPECT_EQ(conn, nullptr);
  EXPECT_EQ(fake.take_calls(), active_teardown);
}

// ---- getters ------------------------------------------------------------------------------

TEST_F(conn_capi, cq_rcq_and_their_fds_without_a_shared_channel) {
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(cfg, 5), 0);
  rpma_conn* conn = connected();
  rpma_cq* cq = nullptr;
  rpma_cq* rcq = nullptr;
  ASSERT_EQ(rpma_conn_get_cq(conn, &cq), 0);
  ASSERT_EQ(rpma_conn_get_rcq(conn, &rcq), 0);
  ASSERT_NE(cq, nullptr);
  ASSERT_NE(rcq, nullptr);
  EXPECT_NE(cq, rcq);
  int cq_fd = -1;
  int rcq_fd = -1;
  ASSERT_EQ(rpma_cq_get_fd(cq, &cq_fd), 0);
  ASSERT_EQ(rpma_cq_get_fd(rcq, &rcq_fd), 0);
  EXPECT_GE(cq_fd, 0);
  EXPECT_GE(rcq_fd, 0);
  EXPECT_NE(cq_fd, rcq_fd);
  int fd = -1;
  EXPECT_EQ(rpma_conn_get_compl_fd(conn, &fd), RPMA_E_NOT_SHARED_CHNL);
  EXPECT_EQ(fd, -1);
  std::uint32_t qp_num = 0;
  ASSERT_EQ(rpma_conn_get_qp_num(conn, &qp_num), 0);
  EXPECT_NE(qp_num, 0u);
  EXPECT_EQ(rpma_conn_get_cq(nullptr, &cq), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_get_cq(conn, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_get_rcq(nullptr, &rcq), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_get_rcq(conn, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_cq_get_fd(nullptr, &fd), RPMA_E_INVAL);
  EXPECT_EQ(rpma_cq_get_fd(cq, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_get_compl_fd(nullptr, &fd), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_get_qp_num(nullptr, &qp_num), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_get_qp_num(conn, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_get_event_fd(nullptr, &fd), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_get_event_fd(conn, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
}

TEST_F(conn_capi, no_rcq_without_rcq_size) {
  rpma_conn* conn = connected();
  auto* rcq = reinterpret_cast<rpma_cq*>(0x1);
  ASSERT_EQ(rpma_conn_get_rcq(conn, &rcq), 0);
  EXPECT_EQ(rcq, nullptr);
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
}

// librpma: with a shared channel each CQ reports the shared fd.
TEST_F(conn_capi, a_shared_channel_is_the_fd_of_both_cqs) {
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(cfg, 5), 0);
  ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg, true), 0);
  rpma_conn* conn = connected();
  int fd = -1;
  ASSERT_EQ(rpma_conn_get_compl_fd(conn, &fd), 0);
  EXPECT_GE(fd, 0);
  rpma_cq* cq = nullptr;
  rpma_cq* rcq = nullptr;
  ASSERT_EQ(rpma_conn_get_cq(conn, &cq), 0);
  ASSERT_EQ(rpma_conn_get_rcq(conn, &rcq), 0);
  int cq_fd = -1;
  ASSERT_EQ(rpma_cq_get_fd(cq, &cq_fd), 0);
  EXPECT_EQ(cq_fd, fd);
  cq_fd = -1;
  ASSERT_EQ(rpma_cq_get_fd(rcq, &cq_fd), 0);
  EXPECT_EQ(cq_fd, fd);
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
}

// ---- peer configuration -------------------------------------------------------------------

TEST_F(conn_capi, apply_remote_peer_cfg) {
  rpma_conn* conn = connected();
  rpma_peer_cfg* pcfg = nullptr;
  ASSERT_EQ(rpma_peer_cfg_new(&pcfg), 0);
  ASSERT_EQ(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true), 0);
  EXPECT_EQ(rpma_conn_apply_remote_peer_cfg(conn, pcfg), 0);
  EXPECT_EQ(rpma_conn_apply_remote_peer_cfg(nullptr, pcfg), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_apply_remote_peer_cfg(conn, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_peer_cfg_delete(&pcfg), 0);
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
}

TEST(peer_cfg_capi, new_set_get_delete) {
  rpma_peer_cfg* pcfg = nullptr;
  ASSERT_EQ(rpma_peer_cfg_new(&pcfg), 0);
  bool supported = true;
  ASSERT_EQ(rpma_peer_cfg_get_direct_write_to_pmem(pcfg, &supported), 0);
  EXPECT_FALSE(supported) << "false by default";
  ASSERT_EQ(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true), 0);
  ASSERT_EQ(rpma_peer_cfg_get_direct_write_to_pmem(pcfg, &supported), 0);
  EXPECT_TRUE(supported);
  EXPECT_EQ(rpma_peer_cfg_new(nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_peer_cfg_set_direct_write_to_pmem(nullptr, true), RPMA_E_INVAL);
  EXPECT_EQ(rpma_peer_cfg_get_direct_write_to_pmem(nullptr, &supported), RPMA_E_INVAL);
  EXPECT_EQ(rpma_peer_cfg_get_direct_write_to_pmem(pcfg, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_peer_cfg_delete(&pcfg), 0);
  EXPECT_EQ(pcfg, nullptr);
  EXPECT_EQ(rpma_peer_cfg_delete(&pcfg), 0);
  EXPECT_EQ(rpma_peer_cfg_delete(nullptr), RPMA_E_INVAL);
}

TEST(peer_cfg_capi, descriptor_round_trip) {
  for (bool value : {false, true}) {
    rpma_peer_cfg* pcfg = nullptr;
    ASSERT_EQ(rpma_peer_cfg_new(&pcfg), 0);
    ASSERT_EQ(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, value), 0);
    size_t size = 0;
    ASSERT_EQ(rpma_peer_cfg_get_descriptor_size(pcfg, &size), 0);
    EXPECT_EQ(size, 1u);
    std::vector<unsigned char> desc(size, 0xee);
    ASSERT_EQ(rpma_peer_cfg_get_descriptor(pcfg, desc.data()), 0);
    rpma_peer_cfg* copy = nullptr;
    ASSERT_EQ(rpma_peer_cfg_from_descriptor(desc.data(), size, &copy), 0);
    bool supported = !value;
    ASSERT_EQ(rpma_peer_cfg_get_direct_write_to_pmem(copy, &supported), 0);
    EXPECT_EQ(supported, value);
    EXPECT_EQ(rpma_peer_cfg_delete(&copy), 0);
    EXPECT_EQ(rpma_peer_cfg_delete(&pcfg), 0);
  }
}

TEST(peer_cfg_capi, descriptor_argument_checks) {
  rpma_peer_cfg* pcfg = nullptr;
  ASSERT_EQ(rpma_peer_cfg_new(&pcfg), 0);
  unsigned char desc[1] = {1};
  size_t size = 0;
  EXPECT_EQ(rpma_peer_cfg_get_descriptor(nullptr, desc), RPMA_E_INVAL);
  EXPECT_EQ(rpma_peer_cfg_get_descriptor(pcfg, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_peer_cfg_get_descriptor_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_EQ(rpma_peer_cfg_get_descriptor_size(pcfg, nullptr), RPMA_E_INVAL);
  auto* untouched = reinterpret_cast<rpma_peer_cfg*>(0x5a5a);
  rpma_peer_cfg* out = untouched;
  EXPECT_EQ(rpma_peer_cfg_from_descriptor(desc, 0, &out), RPMA_E_INVAL);
  EXPECT_EQ(rpma_peer_cfg_from_descriptor(nullptr, 1, &out), RPMA_E_INVAL);
  EXPECT_EQ(rpma_peer_cfg_from_descriptor(desc, 1, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(out, untouched);
  EXPECT_EQ(rpma_peer_cfg_delete(&pcfg), 0);
}

}  // namespace

}  // namespace conn_capi_test

// rpma_ep_* and the passive side of rpma_conn_req_* against the scripted
// provider: every failure point of rpma_ep_listen and rpma_ep_next_conn_req
// (return code, teardown order, untouched out-parameters, nothing left
// behind), the endpoint's fd, shutdown with requests not read yet.
#include <librpma.h>

#include "fake/fake_provider.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>

#include <string>
#include <vector>

namespace ep_capi_test {

using arpma::test::fake_provider;
using event = arpma::provider::cm_event_type;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

namespace {

using strings = std::vector<std::string>;

auto* const sentinel_ep = reinterpret_cast<rpma_ep*>(0x5a5a);
auto* const sentinel_req = reinterpret_cast<rpma_conn_req*>(0xa5a5);

class ep_capi : public ::testing::Test {
 protected:
  void SetUp() override {
    ibv_context* dev = nullptr;
    ASSERT_EQ(rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev), 0);
    ASSERT_EQ(rpma_peer_new(dev, &peer), 0);
    (void)fake.take_calls();
  }
  void TearDown() override {
    EXPECT_EQ(rpma_peer_delete(&peer), 0);
    EXPECT_THAT(fake.violations(), ::testing::IsEmpty());
    EXPECT_EQ(fake.live_objects(), 0u);
  }

  rpma_ep* listen() {
    rpma_ep* ep = nullptr;
    EXPECT_EQ(rpma_ep_listen(peer, "127.0.0.1", "7204", &ep), 0);
    (void)fake.take_calls();
    return ep;
  }
  arpma::provider::cm_id* listener() const { return fake.ids().front(); }

  fake_provider fake;
  arpma::provider::scoped_override use_fake{fake};
  rpma_peer* peer = nullptr;
};

const strings request_sequence = {
    "create_event_channel", "migrate_id", "set_context", "create_comp_channel", "create_cq",
    "req_notify_cq",        "create_qp"};
const strings request_teardown = {"destroy_qp", "destroy_cq", "destroy_comp_channel",
                                  "reject",     "destroy_id", "destroy_event_channel"};

// ---- rpma_ep_listen ------------------------------------------------------------------

TEST_F(ep_capi, listen_get_fd_and_shutdown) {
  rpma_ep* ep = nullptr;
  ASSERT_EQ(rpma_ep_listen(peer, "127.0.0.1", "7204", &ep), 0);
  ASSERT_NE(ep, nullptr);
  EXPECT_THAT(fake.take_calls(),
              ElementsAre("create_event_channel", "create_id", "bind_addr", "listen"));
  int fd = -1;
  ASSERT_EQ(rpma_ep_get_fd(ep, &fd), 0);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(fcntl(fd, F_GETFL) & O_NONBLOCK, 0) << "blocking, as librpma's";
  EXPECT_EQ(rpma_ep_get_fd(nullptr, &fd), RPMA_E_INVAL);
  EXPECT_EQ(rpma_ep_get_fd(ep, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
  EXPECT_EQ(ep, nullptr);
  EXPECT_THAT(fake.take_calls(), ElementsAre("destroy_id", "destroy_event_channel"));
  EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
  EXPECT_EQ(rpma_ep_shutdown(nullptr), RPMA_E_INVAL);
  EXPECT_EQ(fake.live_objects(), 1u);
}

TEST_F(ep_capi, listen_null_arguments_are_invalid_and_create_nothing) {
  rpma_ep* ep = sentinel_ep;
  EXPECT_EQ(rpma_ep_listen(nullptr, "127.0.0.1", "7204", &ep), RPMA_E_INVAL);
  EXPECT_EQ(rpma_ep_listen(peer, nullptr, "7204", &ep), RPMA_E_INVAL);
  EXPECT_EQ(rpma_ep_listen(peer, "127.0.0.1", nullptr, &ep), RPMA_E_INVAL);
  EXPECT_EQ(rpma_ep_listen(peer, "127.0.0.1", "7204", nullptr), RPMA_E_INVAL);
  EXPECT_EQ(ep, sentinel_ep);
  EXPECT_TRUE(fake.take_calls().empty());
}

TEST_F(ep_capi, listen_empty_address_or_port_is_invalid_and_creates_nothing) {
  rpma_ep* ep = sentinel_ep;
  EXPECT_EQ(rpma_ep_listen(peer, "", "7204", &ep), RPMA_E_INVAL);
  EXPECT_EQ(rpma_ep_listen(peer, "127.0.0.1", "", &ep), RPMA_E_INVAL);
  EXPECT_EQ(rpma_ep_listen(peer, "", "", &ep), RPMA_E_INVAL);
  EXPECT_EQ(ep, sentinel_ep);
  EXPECT_TRUE(fake.take_calls().empty());
}

struct failure {
  std::string call;
  strings expected;
};

class ep_listen_failure : public ep_capi, public ::testing::WithParamInterface<failure> {};

TEST_P(ep_listen_failure, is_a_provider_error_unwound_in_reverse) {
  fake.fail(GetParam().call, EIO);
  rpma_ep* ep = sentinel_ep;
  EXPECT_EQ(rpma_ep_listen(peer, "127.0.0.1", "7204", &ep), RPMA_E_PROVIDER);
  EXPECT_EQ(ep, sentinel_ep) << "untouched on failure";
  EXPECT_THAT(fake.take_calls(), ElementsAreArray(GetParam().expected));
  EXPECT_EQ(fake.live_objects(), 1u) << "only the PD";
}

INSTANTIATE_TEST_SUITE_P(
    each_step, ep_listen_failure,
    ::testing::Values(failure{"create_event_channel", {"create_event_channel"}},
                      failure{"create_id",
                              {"create_event_channel", "create_id", "destroy_event_channel"}},
                      failure{"bind_addr",
                              {"create_event_channel", "create_id", "bind_addr", "destroy_id",
                               "destroy_event_channel"}},
                      failure{"listen",
                              {"create_event_channel", "create_id", "bind_addr", "listen",
                               "destroy_id", "destroy_event_channel"}}),
    [](const auto& param_info) { return param_info.param.call; });

// ---- rpma_ep_next_conn_req -----------------------------------------------------------

TEST_F(ep_capi, next_conn_req_moves_the_request_to_a_channel_of_its_own) {
  rpma_ep* ep = listen();
  auto* id = fake.incoming(listener(), {1, 2, 3, 4});
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_ep_next_conn_req(ep, nullptr, &req), 0);
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(fake.take_calls(), request_sequence);
  EXPECT_NE(fake.channel_of(id), fake.channel_of(listener()));
  rpma_conn_private_data pdata{};
  ASSERT_EQ(rpma_conn_req_get_private_data(req, &pdata), 0);
  ASSERT_EQ(pdata.len, 4);
  const auto* bytes = static_cast<const std::uint8_t*>(pdata.ptr);
  EXPECT_THAT(std::vector<std::uint8_t>(bytes, bytes + pdata.len), ElementsAre(1, 2, 3, 4));
  // Deleting an incoming request rejects it and destroys its id (librpma leaks the id).
  EXPECT_EQ(rpma_conn_req_delete(&req), 0);
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(fake.take_calls(), request_teardown);
  EXPECT_EQ(fake.ids().size(), 1u);
  EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
}

TEST_F(ep_capi, next_conn_req_without_private_data_has_none) {
  rpma_ep* ep = listen();
  fake.incoming(listener());
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_ep_next_conn_req(ep, nullptr, &req), 0);
  rpma_conn_private_data pdata{reinterpret_cast<void*>(1), 9};
  ASSERT_EQ(rpma_conn_req_get_private_data(req, &pdata), 0);
  EXPECT_EQ(pdata.ptr, nullptr);
  EXPECT_EQ(pdata.len, 0);
  EXPECT_EQ(rpma_conn_req_delete(&req), 0);
  EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
}

class ep_next_failure : public ep_capi, public ::testing::WithParamInterface<failure> {};

TEST_P(ep_next_failure, rejects_and_destroys_the_request) {
  rpma_ep* ep = listen();
  fake.fail(GetParam().call, EIO);
  fake.incoming(listener());
  rpma_conn_cfg* cfg = nullptr;
  ASSERT_EQ(rpma_conn_cfg_new(&cfg), 0);
  ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg, true), 0);
  rpma_conn_req* req = sentinel_req;
  EXPECT_EQ(rpma_ep_next_conn_req(ep, cfg, &req), RPMA_E_PROVIDER);
  EXPECT_EQ(req, sentinel_req) << "untouched on failure";
  EXPECT_THAT(fake.take_calls(), ElementsAreArray(GetParam().expected));
  EXPECT_EQ(fake.ids().size(), 1u) << "the request's id is destroyed";
  EXPECT_EQ(fake.live_objects(), 3u) << "PD, the endpoint's channel and id";
  const auto sent = fake.sent_data();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].call, "reject");
  EXPECT_EQ(rpma_conn_cfg_delete(&cfg), 0);
  EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
}

INSTANTIATE_TEST_SUITE_P(
    each_step, ep_next_failure,
    ::testing::Values(
        failure{"create_event_channel", {"create_event_channel", "reject", "destroy_id"}},
        failure{"migrate_id",
                {"create_event_channel", "migrate_id", "reject", "destroy_id",
                 "destroy_event_channel"}},
        // With a shared completion channel: that first, then each CQ's.
        failure{"create_comp_channel",
                {"create_event_channel", "migrate_id", "set_context", "create_comp_channel",
                 "reject", "destroy_id", "destroy_event_channel"}},
        failure{
            "create_cq",
            {"create_event_channel", "migrate_id", "set_context", "create_comp_channel",
             "create_cq", "destroy_comp_channel", "reject", "destroy_id", "destroy_event_channel"}},
        failure{"req_notify_cq",
                {"create_event_channel", "migrate_id", "set_context", "create_comp_channel",
                 "create_cq", "req_notify_cq", "destroy_cq", "destroy_comp_channel", "reject",
                 "destroy_id", "destroy_event_channel"}},
        failure{"create_qp",
                {"create_event_channel", "migrate_id", "set_context", "create_comp_channel",
                 "create_cq", "req_notify_cq", "create_qp", "destroy_cq", "destroy_comp_channel",
                 "reject", "destroy_id", "destroy_event_channel"}}),
    [](const auto& param_info) { return param_info.param.call; });

TEST_F(ep_capi, next_conn_req_on_a_non_blocking_fd_with_nothing_pending_is_no_event) {
  rpma_ep* ep = listen();
  int fd = -1;
  ASSERT_EQ(rpma_ep_get_fd(ep, &fd), 0);
  ASSERT_EQ(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
  rpma_conn_req* req = sentinel_req;
  EXPECT_EQ(rpma_ep_next_conn_req(ep, nullptr, &req), RPMA_E_NO_EVENT);
  EXPECT_EQ(req, sentinel_req);
  // ... and the request arriving afterwards is there.
  fake.incoming(listener());
  ASSERT_EQ(rpma_ep_next_conn_req(ep, nullptr, &req), 0);
  EXPECT_EQ(rpma_conn_req_delete(&req), 0);
  EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
}

TEST_F(ep_capi, an_event_other_than_a_request_is_invalid) {
  rpma_ep* ep = listen();
  fake.deliver(listener(), event::addr_change);
  rpma_conn_req* req = sentinel_req;
  EXPECT_EQ(rpma_ep_next_conn_req(ep, nullptr, &req), RPMA_E_INVAL);
  EXPECT_EQ(req, sentinel_req);
  EXPECT_TRUE(fake.take_calls().empty());
  EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
}

TEST_F(ep_capi, next_conn_req_null_arguments_are_invalid) {
  rpma_ep* ep = listen();
  rpma_conn_req* req = sentinel_req;
  EXPECT_EQ(rpma_ep_next_conn_req(nullptr, nullptr, &req), RPMA_E_INVAL);
  EXPECT_EQ(rpma_ep_next_conn_req(ep, nullptr, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(req, sentinel_req);
  EXPECT_TRUE(fake.take_calls().empty());
  EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
}

TEST_F(ep_capi, events_of_a_request_reach_its_own_fd_not_the_endpoints) {
  rpma_ep* ep = listen();
  auto* id = fake.incoming(listener());
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_ep_next_conn_req(ep, nullptr, &req), 0);
  fake.deliver(id, event::disconnected);
  EXPECT_EQ(fake.queued(fake.channel_of(listener())), 0u);
  EXPECT_EQ(fake.queued(fake.channel_of(id)), 1u);
  int fd = -1;
  ASSERT_EQ(rpma_ep_get_fd(ep, &fd), 0);
  ASSERT_EQ(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
  rpma_conn_req* other = sentinel_req;
  EXPECT_EQ(rpma_ep_next_conn_req(ep, nullptr, &other), RPMA_E_NO_EVENT);
  EXPECT_EQ(rpma_conn_req_delete(&req), 0);
  EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
}

TEST_F(ep_capi, events_queued_before_the_request_was_read_move_with_it) {
  rpma_ep* ep = listen();
  auto* id = fake.incoming(listener());
  fake.deliver(id, event::disconnected);  // behind the CONNECT_REQUEST, on the endpoint's fd
  EXPECT_EQ(fake.queued(fake.channel_of(listener())), 2u);
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_ep_next_conn_req(ep, nullptr, &req), 0);
  EXPECT_EQ(fake.queued(fake.channel_of(listener())), 0u) << "migrate_id took it along";
  EXPECT_EQ(fake.queued(fake.channel_of(id)), 1u);
  int fd = -1;
  ASSERT_EQ(rpma_ep_get_fd(ep, &fd), 0);
  ASSERT_EQ(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
  rpma_conn_req* other = sentinel_req;
  EXPECT_EQ(rpma_ep_next_conn_req(ep, nullptr, &other), RPMA_E_NO_EVENT)
      << "the endpoint never reads a request's event as its own";
  // The connection reads it after ESTABLISHED.
  rpma_conn* conn = nullptr;
  ASSERT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), 0);
  rpma_conn_event ev = RPMA_CONN_UNDEFINED;
  ASSERT_EQ(rpma_conn_next_event(conn, &ev), 0);
  EXPECT_EQ(ev, RPMA_CONN_CLOSED);
  ASSERT_EQ(rpma_conn_next_event(conn, &ev), 0);
  EXPECT_EQ(ev, RPMA_CONN_ESTABLISHED);
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
  EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
}

TEST_F(ep_capi, shutdown_with_requests_not_read_drops_them) {
  rpma_ep* ep = listen();
  fake.incoming(listener(), {1});
  fake.incoming(listener(), {2});
  EXPECT_EQ(fake.ids().size(), 3u);
  EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
  EXPECT_EQ(ep, nullptr);
  EXPECT_THAT(fake.take_calls(), ElementsAre("destroy_id", "destroy_event_channel"));
  EXPECT_EQ(fake.live_objects(), 1u);
}

TEST_F(ep_capi, requests_outlive_the_endpoint) {
  rpma_ep* ep = listen();
  fake.incoming(listener());
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_ep_next_conn_req(ep, nullptr, &req), 0);
  EXPECT_EQ(rpma_ep_shutdown(&ep), 0);
  rpma_conn* conn = nullptr;
  ASSERT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), 0);
  rpma_conn_event ev = RPMA_CONN_UNDEFINED;
  ASSERT_EQ(rpma_conn_next_event(conn, &ev), 0);
  EXPECT_EQ(ev, RPMA_CONN_ESTABLISHED);
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
}

TEST_F(ep_capi, a_failed_shutdown_still_frees_the_endpoint) {
  rpma_ep* ep = listen();
  fake.fail("destroy_id", EIO);
  EXPECT_EQ(rpma_ep_shutdown(&ep), RPMA_E_PROVIDER);
  EXPECT_EQ(ep, nullptr) << "as librpma's code (not its manual)";
  EXPECT_THAT(fake.take_calls(), ElementsAre("destroy_id", "destroy_event_channel"));
}

}  // namespace

}  // namespace ep_capi_test

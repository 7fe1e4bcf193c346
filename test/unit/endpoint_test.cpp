// arpma::endpoint against the scripted provider: listen and its failure
// points, incoming requests (their queues, their failures, their events),
// reject, cancellation, shutdown and a destroyed io_context.
#include "arpma/endpoint.hpp"

#include "arpma/connection.hpp"
#include "arpma/error.hpp"
#include "fake/fake_provider.hpp"
#include "support/wait.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace endpoint_test {

namespace asio = boost::asio;
using arpma::test::fake_provider;
using event = arpma::provider::cm_event_type;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using namespace std::chrono_literals;

namespace {

using strings = std::vector<std::string>;

struct next_outcome {
  std::error_code ec;
  arpma::error_code async_ec;  // as the handler received it
  arpma::conn_req req;
  // Atomic: an empty object completes on the system executor's thread
  // while the test thread waits for it.
  std::atomic<int> calls{0};
};

struct connect_outcome {
  std::error_code ec;
  arpma::error_code async_ec;
  arpma::connection conn;
  // Atomic: an empty object completes on the system executor's thread
  // while the test thread waits for it.
  std::atomic<int> calls{0};
};

class endpoint_test : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = arpma::peer::create(fake.device());
    ASSERT_TRUE(p) << p.error().message();
    peer.emplace(std::move(p).value());
    (void)fake.take_calls();
  }

  void TearDown() override {
    EXPECT_THAT(fake.violations(), ::testing::IsEmpty());
    peer.reset();
    io.reset();
    EXPECT_EQ(fake.live_objects(), 0u) << "provider objects leaked";
  }

  // Runs the loop until `done` holds, for at most 5 s.
  /// Runs the loop until `done()` (at most 5s); whether it holds.
  template <class Done>
  [[nodiscard]] bool run_until(Done done, std::chrono::milliseconds limit = 5s) {
    return arpma::test::run_until(*io, done, limit);
  }
  // Runs whatever is ready now (and what that makes ready), without waiting.
  void settle() {
    for (int i = 0; i < 5; ++i) {
      io->restart();
      (void)io->poll();
    }
  }

  arpma::endpoint listen() {
    auto ep = arpma::endpoint::listen(io->get_executor(), *peer, "127.0.0.1", "0");
    EXPECT_TRUE(ep) << ep.error().message();
    return ep ? std::move(ep).value() : arpma::endpoint();
  }
  arpma::provider::cm_id* listener() const { return fake.ids().front(); }

  void next(arpma::endpoint& ep, next_outcome& out, const arpma::conn_cfg& cfg = {}) {
    ep.async_next_conn_req(cfg, [&out](arpma::error_code ec, arpma::conn_req req) {
      out.ec = ec;
      out.async_ec = ec;
      out.req = std::move(req);
      ++out.calls;
    });
  }

  // An incoming request the endpoint has taken and handed out.
  arpma::conn_req take_request(arpma::endpoint& ep, std::vector<std::uint8_t> pdata = {}) {
    fake.incoming(listener(), std::move(pdata));
    next_outcome out;
    next(ep, out);
    EXPECT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
    EXPECT_FALSE(out.ec) << out.ec.message();
    return std::move(out.req);
  }

  /// Accepts `req` with `pdata`; `out` records the outcome.
  static void accept(arpma::conn_req& req, connect_outcome& out,
                     std::vector<std::uint8_t> pdata = {}) {
    req.async_connect(std::move(pdata), [&out](arpma::error_code ec, arpma::connection conn) {
      out.ec = ec;
      out.async_ec = ec;
      out.conn = std::move(conn);
      ++out.calls;
    });
  }

  std::size_t pd_only() const { return 1; }

  fake_provider fake;
  arpma::provider::scoped_override use_fake{fake};
  std::unique_ptr<asio::io_context> io = std::make_unique<asio::io_context>();
  std::optional<arpma::peer> peer;
};

// ---- listen --------------------------------------------------------------------

TEST_F(endpoint_test, listen_binds_and_listens_on_the_shared_channel) {
  auto ep = listen();
  ASSERT_TRUE(ep);
  EXPECT_THAT(fake.take_calls(),
              ElementsAre("create_event_channel", "create_id", "bind_addr", "listen"));
  EXPECT_EQ(ep.port(), 20000) << "port 0 picks one; port() says which";
  EXPECT_EQ(ep.shutdown(), std::error_code());
  EXPECT_FALSE(ep);
  settle();  // the cancelled wait on the shared channel's fd lets go of it
  EXPECT_THAT(fake.take_calls(), ElementsAre("destroy_id", "destroy_event_channel"));
  EXPECT_EQ(fake.live_objects(), pd_only());
}

TEST_F(endpoint_test, listen_reports_the_port_asked_for) {
  auto ep = arpma::endpoint::listen(io->get_executor(), *peer, "127.0.0.1", "7204");
  ASSERT_TRUE(ep);
  EXPECT_EQ(ep.value().port(), 7204);
}

struct listen_failure {
  std::string call;
  strings expected;
};

class endpoint_listen_failure : public endpoint_test,
                                public ::testing::WithParamInterface<listen_failure> {};

TEST_P(endpoint_listen_failure, unwinds_in_reverse_and_reports_the_errno) {
  fake.fail(GetParam().call, EADDRINUSE);
  auto ep = arpma::endpoint::listen(io->get_executor(), *peer, "127.0.0.1", "7204");
  ASSERT_FALSE(ep);
  EXPECT_EQ(ep.error(), arpma::errc::provider);
  EXPECT_EQ(ep.error().value(), EADDRINUSE);
  EXPECT_THAT(fake.take_calls(), ElementsAreArray(GetParam().expected));
  EXPECT_EQ(fake.live_objects(), pd_only());
}

INSTANTIATE_TEST_SUITE_P(
    each_step, endpoint_listen_failure,
    ::testing::Values(
        listen_failure{"create_event_channel", {"create_event_channel"}},
        listen_failure{"create_id", {"create_event_channel", "create_id", "destroy_event_channel"}},
        listen_failure{"bind_addr",
                       {"create_event_channel", "create_id", "bind_addr", "destroy_id",
                        "destroy_event_channel"}},
        listen_failure{"listen",
                       {"create_event_channel", "create_id", "bind_addr", "listen", "destroy_id",
                        "destroy_event_channel"}}),
    [](const auto& param_info) { return param_info.param.call; });

TEST_F(endpoint_test, listen_with_invalid_arguments_creates_nothing) {
  EXPECT_EQ(arpma::endpoint::listen(io->get_executor(), *peer, "", "7204").error(),
            arpma::errc::invalid_argument);
  EXPECT_EQ(arpma::endpoint::listen(io->get_executor(), *peer, "127.0.0.1", "").error(),
            arpma::errc::invalid_argument);
  asio::any_io_executor none;
  EXPECT_EQ(arpma::endpoint::listen(none, *peer, "127.0.0.1", "1").error(),
            arpma::errc::invalid_argument);
  EXPECT_TRUE(fake.take_calls().empty());
}

// ---- incoming requests -----------------------------------------------------------

TEST_F(endpoint_test, an_incoming_request_gets_its_own_token_and_its_queues) {
  auto ep = listen();
  (void)fake.take_calls();
  const std::vector<std::uint8_t> hello{1, 2, 3};
  auto* id = fake.incoming(listener(), hello);
  next_outcome out;
  arpma::conn_cfg cfg;
  cfg.rcq_size = 5;
  next(ep, out, cfg);
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  ASSERT_FALSE(out.ec) << out.ec.message();
  ASSERT_TRUE(out.req);
  EXPECT_TRUE(out.req.incoming());
  EXPECT_TRUE(out.req.has_rcq());
  EXPECT_THAT(
      std::vector<std::uint8_t>(out.req.private_data().begin(), out.req.private_data().end()),
      ElementsAre(1, 2, 3));
  EXPECT_NE(fake.context_of(id), fake.context_of(listener()));
  EXPECT_EQ(fake.channel_of(id), fake.channel_of(listener())) << "C++: the shared channel";
  EXPECT_THAT(fake.take_calls(),
              ElementsAre("set_context", "create_comp_channel", "create_cq", "req_notify_cq",
                          "create_comp_channel", "create_cq", "req_notify_cq", "create_qp"));
  // Destroying the request refuses it and destroys its id.
  out.req = {};
  EXPECT_THAT(fake.take_calls(),
              ElementsAre("destroy_qp", "destroy_cq", "destroy_comp_channel", "destroy_cq",
                          "destroy_comp_channel", "reject", "destroy_id"));
  ASSERT_EQ(fake.sent_data().size(), 1u);
  EXPECT_EQ(fake.sent_data()[0].call, "reject");
  EXPECT_EQ(fake.ids().size(), 1u) << "only the listener is left";
}

struct queue_failure {
  std::string call;
  strings expected;  // after set_context
};

class endpoint_queue_failure : public endpoint_test,
                               public ::testing::WithParamInterface<queue_failure> {};

TEST_P(endpoint_queue_failure, rejects_and_destroys_the_request_and_reports_the_errno) {
  auto ep = listen();
  fake.fail(GetParam().call, EIO);
  fake.incoming(listener());
  (void)fake.take_calls();
  next_outcome out;
  next(ep, out);
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  EXPECT_EQ(out.ec, arpma::errc::provider);
  EXPECT_EQ(out.ec.value(), EIO);
  EXPECT_FALSE(out.req);
  strings expected{"set_context"};
  expected.insert(expected.end(), GetParam().expected.begin(), GetParam().expected.end());
  EXPECT_THAT(fake.take_calls(), ElementsAreArray(expected));
  EXPECT_EQ(fake.ids().size(), 1u) << "the request's id is destroyed";
  // The endpoint goes on.
  auto req = take_request(ep);
  EXPECT_TRUE(req);
}

INSTANTIATE_TEST_SUITE_P(
    each_step, endpoint_queue_failure,
    ::testing::Values(
        queue_failure{"create_comp_channel", {"create_comp_channel", "reject", "destroy_id"}},
        queue_failure{
            "create_cq",
            {"create_comp_channel", "create_cq", "destroy_comp_channel", "reject", "destroy_id"}},
        queue_failure{"req_notify_cq",
                      {"create_comp_channel", "create_cq", "req_notify_cq", "destroy_cq",
                       "destroy_comp_channel", "reject", "destroy_id"}},
        queue_failure{"create_qp",
                      {"create_comp_channel", "create_cq", "req_notify_cq", "create_qp",
                       "destroy_cq", "destroy_comp_channel", "reject", "destroy_id"}}),
    [](const auto& param_info) { return param_info.param.call; });

TEST_F(endpoint_test, requests_wait_in_order_for_the_next_call) {
  auto ep = listen();
  auto* first = fake.incoming(listener(), {1});
  auto* second = fake.incoming(listener(), {2});
  settle();  // both taken by the endpoint, none asked for yet
  next_outcome a;
  next_outcome b;
  next(ep, a);
  next(ep, b);
  ASSERT_TRUE(run_until([&] { return a.calls == 1 && b.calls == 1; })) << "timed out";
  ASSERT_TRUE(a.req && b.req);
  EXPECT_EQ(a.req.private_data()[0], 1);
  EXPECT_EQ(b.req.private_data()[0], 2);
  EXPECT_NE(fake.context_of(first), fake.context_of(second));
}

TEST_F(endpoint_test, reject_sends_the_private_data_and_destroys_the_id) {
  auto ep = listen();
  auto req = take_request(ep);
  (void)fake.take_calls();
  const std::vector<std::uint8_t> why{9, 8, 7, 6};
  EXPECT_EQ(req.reject(why), std::error_code());
  EXPECT_FALSE(req);
  const auto sent = fake.sent_data();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].call, "reject");
  EXPECT_THAT(sent[0].private_data, ElementsAre(9, 8, 7, 6));
  EXPECT_THAT(fake.take_calls(), ElementsAre("reject", "destroy_qp", "destroy_cq",
                                             "destroy_comp_channel", "destroy_id"))
      << "rejected once, then torn down without a second reject";
  EXPECT_EQ(fake.ids().size(), 1u);
}

TEST_F(endpoint_test, reject_refuses_bad_uses_and_leaves_the_request) {
  auto ep = listen();
  auto req = take_request(ep);
  (void)fake.take_calls();
  const std::vector<std::uint8_t> too_long(149, 0);
  EXPECT_EQ(req.reject(too_long), arpma::errc::invalid_argument);
  EXPECT_TRUE(req);
  EXPECT_TRUE(fake.take_calls().empty());
  arpma::conn_req empty;
  EXPECT_EQ(empty.reject(), arpma::errc::invalid_argument);
}

TEST_F(endpoint_test, a_failed_reject_still_destroys_the_request) {
  auto ep = listen();
  auto req = take_request(ep);
  (void)fake.take_calls();
  fake.fail("reject", EIO);
  const auto ec = req.reject();
  EXPECT_EQ(ec, arpma::errc::provider);
  EXPECT_EQ(ec.value(), EIO);
  EXPECT_FALSE(req);
  EXPECT_THAT(fake.take_calls(), ElementsAre("reject", "destroy_qp", "destroy_cq",
                                             "destroy_comp_channel", "destroy_id"));
}

TEST_F(endpoint_test, accepting_a_request_connects_it_with_the_private_data) {
  auto ep = listen();
  auto req = take_request(ep, {5, 5});
  (void)fake.take_calls();
  const std::vector<std::uint8_t> reply{4, 2};
  connect_outcome out;
  accept(req, out, reply);
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  ASSERT_FALSE(out.ec) << out.ec.message();
  ASSERT_TRUE(out.conn);
  EXPECT_THAT(fake.take_calls(), ElementsAre("accept"));
  ASSERT_EQ(fake.sent_data().size(), 1u);
  EXPECT_EQ(fake.sent_data()[0].call, "accept");
  EXPECT_THAT(fake.sent_data()[0].private_data, ElementsAre(4, 2));
  EXPECT_THAT(
      std::vector<std::uint8_t>(out.conn.private_data().begin(), out.conn.private_data().end()),
      ElementsAre(5, 5))
      << "the server keeps the client's data";
  // The connection outlives the endpoint.
  EXPECT_EQ(ep.shutdown(), std::error_code());
  EXPECT_TRUE(out.conn);
  EXPECT_EQ(out.conn.close(), std::error_code());
}

// The client's RTU lost or overtaken: rdma_cm gives the passive side the
// peer's DISCONNECTED (its DREQ) without ESTABLISHED. A DREQ comes only from
// a connected peer, so the accept succeeds, the DREQ is answered, and the
// connection's first event is CLOSED (librpma's server would read CLOSED too).
TEST_F(endpoint_test, an_accept_that_hears_the_peers_disconnect_first_connects_then_closes) {
  auto ep = listen();
  auto req = take_request(ep);
  fake.on_accept({{event::disconnected}});
  (void)fake.take_calls();
  connect_outcome out;
  accept(req, out);
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  ASSERT_FALSE(out.ec) << out.ec.message();
  ASSERT_TRUE(out.conn);
  EXPECT_THAT(fake.take_calls(), ElementsAre("accept", "disconnect"))
      << "the peer's DREQ is answered at once, as on a connected connection";
  std::optional<arpma::conn_event> first;
  out.conn.async_next_event([&](arpma::error_code ec, arpma::conn_event ev) {
    EXPECT_FALSE(ec) << ec.message();
    first = ev;
  });
  ASSERT_TRUE(run_until([&] { return first.has_value(); })) << "timed out";
  EXPECT_EQ(*first, arpma::conn_event::closed);
  EXPECT_EQ(ep.shutdown(), std::error_code());
  EXPECT_EQ(out.conn.close(), std::error_code());
}

TEST_F(endpoint_test, a_failed_accept_rejects_and_destroys_the_request) {
  auto ep = listen();
  auto req = take_request(ep);
  (void)fake.take_calls();
  fake.fail("accept", EIO);
  connect_outcome out;
  accept(req, out);
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  EXPECT_EQ(out.ec, arpma::errc::provider);
  EXPECT_EQ(out.ec.value(), EIO);
  EXPECT_FALSE(out.conn);
  EXPECT_THAT(fake.take_calls(), ElementsAre("accept", "destroy_qp", "destroy_cq",
                                             "destroy_comp_channel", "reject", "destroy_id"));
  EXPECT_EQ(fake.ids().size(), 1u);
}

TEST_F(endpoint_test, accepting_on_another_loop_moves_the_id_to_that_loops_channel) {
  auto ep = listen();
  auto req = take_request(ep);
  auto* id = fake.ids().back();
  (void)fake.take_calls();
  asio::io_context other;
  connect_outcome out;
  req.async_connect(
      {}, asio::bind_executor(other, [&out](arpma::error_code ec, arpma::connection conn) {
        out.ec = ec;
        out.conn = std::move(conn);
        ++out.calls;
      }));
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (out.calls == 0 && std::chrono::steady_clock::now() < deadline) {
    other.restart();
    (void)other.run_one_for(50ms);
  }
  ASSERT_EQ(out.calls, 1);
  ASSERT_FALSE(out.ec) << out.ec.message();
  EXPECT_NE(fake.channel_of(id), fake.channel_of(listener()));
  EXPECT_THAT(fake.take_calls(), ElementsAre("create_event_channel", "migrate_id", "accept"));
  EXPECT_EQ(out.conn.close(), std::error_code());
  for (int i = 0; i < 5; ++i) {
    other.restart();
    (void)other.poll();
  }
  EXPECT_THAT(fake.take_calls(), ElementsAre("destroy_qp", "destroy_cq", "destroy_comp_channel",
                                             "destroy_id", "destroy_event_channel"));
}

// Events of a pending request reach the request, never the endpoint, whether
// the provider reads contexts as the event is read (rdma-core) or stamps them
// when it queues the event.
class endpoint_pending_events : public endpoint_test, public ::testing::WithParamInterface<bool> {};

TEST_P(endpoint_pending_events, go_to_the_request_not_the_endpoint) {
  fake.context_at_read(GetParam());
  auto ep = listen();
  auto* id = fake.incoming(listener());
  fake.deliver(id, event::connect_error);  // queued before the endpoint reads either
  fake.on_accept({});
  settle();
  // The endpoint still hands out requests: the event was not taken as its own.
  next_outcome out;
  next(ep, out);
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  ASSERT_FALSE(out.ec) << out.ec.message();
  connect_outcome conn;
  accept(out.req, conn);
  ASSERT_TRUE(run_until([&] { return conn.calls == 1; })) << "timed out";
  EXPECT_EQ(conn.ec, std::errc::connection_aborted) << "the request saw its CONNECT_ERROR";
  // And the endpoint serves the next one.
  auto again = take_request(ep);
  EXPECT_TRUE(again);
}

INSTANTIATE_TEST_SUITE_P(context, endpoint_pending_events, ::testing::Values(true, false),
                         [](const auto& param_info) {
                           return param_info.param ? std::string("read_when_read")
                                                   : std::string("stamped_at_queue");
                         });

TEST_F(endpoint_test, an_event_for_the_listener_itself_is_ignored) {
  auto ep = listen();
  fake.deliver(listener(), event::addr_change);
  settle();
  auto req = take_request(ep);
  EXPECT_TRUE(req);
}

// ---- cancellation, shutdown, a destroyed loop ----------------------------------------

TEST_F(endpoint_test, cancelling_next_conn_req_aborts_and_loses_no_request) {
  auto ep = listen();
  for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial,
                    asio::cancellation_type::total}) {
    asio::cancellation_signal signal;
    next_outcome out;
    ep.async_next_conn_req(arpma::conn_cfg{},
                           asio::bind_cancellation_slot(
                               signal.slot(), [&out](arpma::error_code ec, arpma::conn_req req) {
                                 out.ec = ec;
                                 out.async_ec = ec;
                                 out.req = std::move(req);
                                 ++out.calls;
                               }));
    settle();
    EXPECT_EQ(out.calls, 0);
    signal.emit(type);
    ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
    EXPECT_EQ(out.async_ec, asio::error::operation_aborted);
    EXPECT_FALSE(out.req);
  }
  // A request arriving afterwards is not lost.
  auto req = take_request(ep);
  EXPECT_TRUE(req);
}

TEST_F(endpoint_test, shutdown_rejects_pending_requests_and_destroys_their_ids) {
  auto ep = listen();
  fake.incoming(listener(), {1});
  fake.incoming(listener(), {2});
  fake.incoming(listener(), {3});
  next_outcome first;
  next(ep, first);  // the wait reads all three: one handed out, two pending in the endpoint
  ASSERT_TRUE(run_until([&] { return first.calls == 1; })) << "timed out";
  ASSERT_TRUE(first.req);
  first.req = arpma::conn_req();  // refused too (its own teardown)
  ASSERT_EQ(fake.ids().size(), 3u);
  (void)fake.take_calls();
  EXPECT_EQ(ep.shutdown(), std::error_code());
  settle();
  EXPECT_THAT(fake.take_calls(), ElementsAre("reject", "destroy_id", "reject", "destroy_id",
                                             "destroy_id", "destroy_event_channel"));
  EXPECT_EQ(fake.live_objects(), pd_only());
}

TEST_F(endpoint_test, shutdown_drops_requests_not_read_yet) {
  auto ep = listen();
  fake.incoming(listener());
  (void)fake.take_calls();
  ep = arpma::endpoint();  // destroying it is shutdown; the event was never read
  settle();
  EXPECT_THAT(fake.take_calls(), ElementsAre("destroy_id", "destroy_event_channel"));
  EXPECT_EQ(fake.live_objects(), pd_only());
}

TEST_F(endpoint_test, shutdown_aborts_a_waiter) {
  auto ep = listen();
  next_outcome out;
  next(ep, out);
  settle();
  EXPECT_EQ(ep.shutdown(), std::error_code());
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  EXPECT_EQ(out.async_ec, asio::error::operation_aborted);
  EXPECT_FALSE(out.req);
}

TEST_F(endpoint_test, next_conn_req_on_an_empty_endpoint_is_invalid) {
  arpma::endpoint ep;
  next_outcome out;
  next(ep, out);
  for (int i = 0; i < 100 && out.calls == 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(out.calls, 1);
  EXPECT_EQ(out.ec, arpma::errc::invalid_argument);
}

TEST_F(endpoint_test, requests_handed_out_outlive_the_endpoint) {
  auto ep = listen();
  auto req = take_request(ep);
  EXPECT_EQ(ep.shutdown(), std::error_code());
  EXPECT_TRUE(req);
  EXPECT_NE(req.qp_num(), 0u);
  (void)fake.take_calls();
  EXPECT_EQ(req.close(), std::error_code());
  settle();
  EXPECT_THAT(fake.take_calls(), ElementsAre("destroy_qp", "destroy_cq", "destroy_comp_channel",
                                             "reject", "destroy_id", "destroy_event_channel"))
      << "the last user of the shared channel releases it";
}

TEST_F(endpoint_test, destroying_the_io_context_with_a_waiter_calls_nothing) {
  auto ep = listen();
  next_outcome out;
  next(ep, out);
  settle();
  io.reset();
  EXPECT_EQ(out.calls, 0) << "a destroyed loop calls no handler";
  ep = arpma::endpoint();
  EXPECT_EQ(fake.live_objects(), pd_only());
}

TEST_F(endpoint_test, destroying_the_io_context_while_accepting_releases_the_request) {
  auto ep = listen();
  auto req = take_request(ep);
  fake.on_accept({});  // ESTABLISHED never comes
  connect_outcome out;
  accept(req, out);
  settle();
  ASSERT_THAT(fake.calls(), ::testing::Contains("accept"));
  io.reset();
  EXPECT_EQ(out.calls, 0);
  EXPECT_EQ(fake.ids().size(), 1u) << "the request went with its operation";
  ep = arpma::endpoint();
  EXPECT_EQ(fake.live_objects(), pd_only());
}

}  // namespace

}  // namespace endpoint_test

// arpma::connection (and conn_req::async_connect, which makes one) against the
// scripted provider: connect outcomes, events, disconnect from either side,
// cancellation and a destroyed io_context.
#include "arpma/connection.hpp"

#include "arpma/conn_req.hpp"
#include "arpma/endpoint.hpp"
#include "arpma/error.hpp"
#include "fake/fake_provider.hpp"
#include "support/wait.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace connection_test {

namespace asio = boost::asio;
using arpma::test::fake_provider;
using event = arpma::provider::cm_event_type;
using ::testing::ElementsAre;
using namespace std::chrono_literals;

namespace {

struct connect_outcome {
  std::error_code ec;
  arpma::error_code async_ec;
  arpma::connection conn;
  // Atomic: an empty object completes on the system executor's thread
  // while the test thread waits for it.
  std::atomic<int> calls{0};
};

struct event_outcome {
  std::error_code ec;
  arpma::error_code async_ec;
  arpma::conn_event ev = arpma::conn_event::undefined;
  // Atomic: an empty object completes on the system executor's thread
  // while the test thread waits for it.
  std::atomic<int> calls{0};
};

struct done_outcome {
  std::error_code ec;
  arpma::error_code async_ec;
  // Atomic: an empty object completes on the system executor's thread
  // while the test thread waits for it.
  std::atomic<int> calls{0};
};

class connection_test : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = arpma::peer::create(fake.device());
    ASSERT_TRUE(p) << p.error().message();
    peer.emplace(std::move(p).value());
  }

  void TearDown() override {
    EXPECT_THAT(fake.violations(), ::testing::IsEmpty());
    peer.reset();
    io.reset();
    EXPECT_EQ(fake.live_objects(), 0u) << "provider objects leaked";
  }

  /// Runs the loop until `done()` (at most 5s); whether it holds.
  template <class Done>
  [[nodiscard]] bool run_until(Done done, std::chrono::milliseconds limit = 5s) {
    return arpma::test::run_until(*io, done, limit);
  }
  void settle() {
    for (int i = 0; i < 5; ++i) {
      io->restart();
      (void)io->poll();
    }
  }

  // An outgoing request, resolved, on the loop's shared channel.
  arpma::conn_req request(const arpma::conn_cfg& cfg = {}) {
    std::optional<arpma::conn_req> out;
    arpma::async_conn_req_new(io->get_executor(), *peer, "192.0.2.1", "7204", cfg,
                              [&out](std::error_code ec, arpma::conn_req req) {
                                EXPECT_FALSE(ec) << ec.message();
                                out.emplace(std::move(req));
                              });
    EXPECT_TRUE(run_until([&] { return out.has_value(); })) << "timed out";
    (void)fake.take_calls();
    return out ? std::move(*out) : arpma::conn_req();
  }

  void connect(arpma::conn_req& req, connect_outcome& out, std::vector<std::uint8_t> pdata = {}) {
    req.async_connect(pdata, [&out](arpma::error_code ec, arpma::connection conn) {
      out.ec = ec;
      out.async_ec = ec;
      out.conn = std::move(conn);
      ++out.calls;
    });
  }

  arpma::connection connected() {
    auto req = request();
    connect_outcome out;
    connect(req, out);
    EXPECT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
    EXPECT_FALSE(out.ec) << out.ec.message();
    (void)fake.take_calls();
    return std::move(out.conn);
  }

  void next_event(arpma::connection& conn, event_outcome& out) {
    conn.async_next_event([&out](arpma::error_code ec, arpma::conn_event ev) {
      out.ec = ec;
      out.async_ec = ec;
      out.ev = ev;
      ++out.calls;
    });
  }

  void disconnect(arpma::connection& conn, done_outcome& out) {
    conn.async_disconnect([&out](arpma::error_code ec) {
      out.ec = ec;
      out.async_ec = ec;
      ++out.calls;
    });
  }

  // The id of the (only) connection.
  arpma::provider::cm_id* id() const { return fake.ids().front(); }

  fake_provider fake;
  arpma::provider::scoped_override use_fake{fake};
  std::unique_ptr<asio::io_context> io = std::make_unique<asio::io_context>();
  std::optional<arpma::peer> peer;
};

const std::vector<std::string> active_teardown = {"destroy_qp", "destroy_cq",
                                                  "destroy_comp_channel", "destroy_id"};
// ... when nothing else uses the loop's shared event channel any more.
const std::vector<std::string> last_teardown = {"destroy_qp", "destroy_cq", "destroy_comp_channel",
                                                "destroy_id", "destroy_event_channel"};

// ---- async_connect -----------------------------------------------------------------

TEST_F(connection_test, connect_sends_the_private_data_and_keeps_the_servers) {
  fake.on_connect({{event::established, 0, 0ms, {7, 7, 7}}});
  auto req = request();
  connect_outcome out;
  connect(req, out, {1, 2});
  EXPECT_FALSE(req) << "consumed";
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  ASSERT_FALSE(out.ec) << out.ec.message();
  ASSERT_TRUE(out.conn);
  EXPECT_THAT(fake.take_calls(), ElementsAre("connect"));
  ASSERT_EQ(fake.sent_data().size(), 1u);
  EXPECT_EQ(fake.sent_data()[0].call, "connect");
  EXPECT_THAT(fake.sent_data()[0].private_data, ElementsAre(1, 2));
  EXPECT_EQ(fake.sent_data()[0].param.responder_resources, 0xff);
  EXPECT_EQ(fake.sent_data()[0].param.retry_count, 7);
  EXPECT_THAT(
      std::vector<std::uint8_t>(out.conn.private_data().begin(), out.conn.private_data().end()),
      ElementsAre(7, 7, 7));
  EXPECT_NE(out.conn.qp_num(), 0u);
  EXPECT_EQ(out.conn.close(), std::error_code());
  EXPECT_FALSE(out.conn);
  settle();
  EXPECT_EQ(fake.take_calls(), last_teardown);
}

TEST_F(connection_test, connect_waits_for_a_delayed_established) {
  fake.on_connect({{event::established, 0, 30ms}});
  auto req = request();
  connect_outcome out;
  connect(req, out);
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  EXPECT_FALSE(out.ec) << out.ec.message();
  EXPECT_TRUE(out.conn.private_data().empty());
}

struct refusal {
  event type;
  std::errc expected;
};

class connection_refused_test : public connection_test,
                                public ::testing::WithParamInterface<refusal> {};

TEST_P(connection_refused_test, fails_with_the_mapped_error_and_releases_everything) {
  fake.on_connect({{GetParam().type, 0}});
  auto req = request();
  connect_outcome out;
  connect(req, out);
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  EXPECT_EQ(out.ec, GetParam().expected) << out.ec.message();
  EXPECT_EQ(out.ec, arpma::errc::provider);
  EXPECT_FALSE(out.conn);
  std::vector<std::string> expected{"connect"};
  expected.insert(expected.end(), last_teardown.begin(), last_teardown.end());
  settle();
  EXPECT_EQ(fake.take_calls(), expected);
  EXPECT_EQ(fake.live_objects(), 1u) << "only the PD (the shared channel went with its last user)";
}

INSTANTIATE_TEST_SUITE_P(
    outcomes, connection_refused_test,
    ::testing::Values(refusal{event::rejected, std::errc::connection_refused},
                      refusal{event::unreachable, std::errc::host_unreachable},
                      refusal{event::connect_error, std::errc::connection_aborted},
                      refusal{event::disconnected, std::errc::connection_reset}),
    [](const auto& param_info) { return std::string(to_string(param_info.param.type)); });

TEST_F(connection_test, unrelated_events_while_connecting_are_skipped) {
  fake.on_connect({{event::addr_change}, {event::established}});
  auto req = request();
  connect_outcome out;
  connect(req, out);
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  EXPECT_FALSE(out.ec) << out.ec.message();
}

TEST_F(connection_test, a_failed_connect_releases_everything) {
  fake.fail("connect", ECONNREFUSED);
  auto req = request();
  connect_outcome out;
  connect(req, out);
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  EXPECT_EQ(out.ec.value(), ECONNREFUSED);
  EXPECT_EQ(out.ec, arpma::errc::provider);
  std::vector<std::string> expected{"connect"};
  expected.insert(expected.end(), last_teardown.begin(), last_teardown.end());
  settle();
  EXPECT_EQ(fake.take_calls(), expected);
}

TEST_F(connection_test, private_data_beyond_the_limit_is_the_providers_einval) {
  auto req = request();
  connect_outcome out;
  connect(req, out, std::vector<std::uint8_t>(57, 1));
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  EXPECT_EQ(out.ec.value(), EINVAL);
  EXPECT_FALSE(out.conn);
}

TEST_F(connection_test, connecting_an_empty_request_is_invalid) {
  arpma::conn_req empty;
  connect_outcome out;
  connect(empty, out);
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (out.calls == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(out.ec, arpma::errc::invalid_argument);
}

TEST_F(connection_test, cancelling_connect_aborts_and_releases_everything) {
  for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial}) {
    fake.on_connect({});  // ESTABLISHED never comes
    auto req = request();
    asio::cancellation_signal signal;
    connect_outcome out;
    req.async_connect({}, asio::bind_cancellation_slot(
                              signal.slot(), [&out](arpma::error_code ec, arpma::connection c) {
                                out.ec = ec;
                                out.async_ec = ec;
                                out.conn = std::move(c);
                                ++out.calls;
                              }));
    settle();
    ASSERT_THAT(fake.calls(), ::testing::Contains("connect"));
    EXPECT_EQ(out.calls, 0);
    (void)fake.take_calls();
    signal.emit(type);
    ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
    EXPECT_EQ(out.async_ec, asio::error::operation_aborted);
    EXPECT_FALSE(out.conn);
    settle();
    EXPECT_EQ(fake.take_calls(), last_teardown);
    EXPECT_EQ(fake.live_objects(), 1u);
  }
}

TEST_F(connection_test, destroying_the_io_context_while_connecting_calls_nothing) {
  fake.on_connect({{event::established, 0, 10s}});
  auto req = request();
  connect_outcome out;
  connect(req, out);
  settle();
  io.reset();
  EXPECT_EQ(out.calls, 0);
  EXPECT_EQ(fake.live_objects(), 1u);
}

// A request the blocking call made (the C flavour until connected) takes the
// C++ flavour when async_connect connects it: its events then queue for the
// connection's operations, whose handlers run on the connecting loop.
TEST_F(connection_test, a_request_made_by_the_blocking_call_connects_in_the_cxx_flavour) {
  auto made = arpma::conn_req_new(*peer, "192.0.2.1", "7204");
  ASSERT_TRUE(made) << made.error().message();
  auto req = std::move(made).value();
  EXPECT_FALSE(req.get_executor());
  connect_outcome connected_out;
  req.async_connect({}, asio::bind_executor(*io, [&](arpma::error_code ec, arpma::connection c) {
                      connected_out.ec = ec;
                      connected_out.conn = std::move(c);
                      ++connected_out.calls;
                    }));
  ASSERT_TRUE(run_until([&] { return connected_out.calls == 1; })) << "timed out";
  ASSERT_FALSE(connected_out.ec) << connected_out.ec.message();
  fake.deliver(id(), event::disconnected);
  event_outcome out;
  std::thread::id ran_on;
  connected_out.conn.async_next_event([&](arpma::error_code ec, arpma::conn_event ev) {
    out.ec = ec;
    out.ev = ev;
    ran_on = std::this_thread::get_id();
    ++out.calls;
  });
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  EXPECT_FALSE(out.ec) << out.ec.message();
  EXPECT_EQ(out.ev, arpma::conn_event::closed);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

// Its blocking call's private loop runs only inside blocking calls: a handler
// that brings no loop of its own has nowhere to run the connect, which fails
// at once instead of waiting there for ever, the request released.
TEST_F(connection_test, a_blocking_request_connected_with_no_loop_is_an_invalid_argument) {
  auto made = arpma::conn_req_new(*peer, "192.0.2.1", "7204");
  ASSERT_TRUE(made) << made.error().message();
  (void)fake.take_calls();
  connect_outcome out;
  connect(made.value(), out);
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  EXPECT_EQ(out.ec, arpma::errc::invalid_argument);
  EXPECT_FALSE(out.conn);
  EXPECT_FALSE(made.value());
  const auto calls = fake.take_calls();
  EXPECT_THAT(calls, ::testing::Not(::testing::Contains("connect")));
  EXPECT_THAT(calls, ::testing::IsSupersetOf({"destroy_qp", "destroy_id"}));
  EXPECT_EQ(fake.live_objects(), 1u) << "only the peer's protection domain is left";
}

// ---- events ----------------------------------------------------------------------

TEST_F(connection_test, next_event_maps_every_event_type) {
  auto conn = connected();
  const std::vector<std::pair<event, arpma::conn_event>> mapping = {
      {event::established, arpma::conn_event::established},
      {event::connect_error, arpma::conn_event::lost},
      {event::device_removal, arpma::conn_event::lost},
      {event::disconnected, arpma::conn_event::closed},
      {event::timewait_exit, arpma::conn_event::closed},
      {event::rejected, arpma::conn_event::rejected},
      {event::unreachable, arpma::conn_event::unreachable}};
  for (const auto& [type, expected] : mapping) {
    fake.deliver(id(), type);
    event_outcome out;
    next_event(conn, out);
    ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
    EXPECT_FALSE(out.ec) << out.ec.message();
    EXPECT_EQ(out.ev, expected) << to_string(type);
  }
}

TEST_F(connection_test, next_event_skips_events_without_a_mapping) {
  auto conn = connected();
  for (auto type : {event::addr_change, event::connect_response, event::addr_error,
                    event::route_error, event::other})
    fake.deliver(id(), type);
  fake.deliver(id(), event::disconnected);
  event_outcome out;
  next_event(conn, out);
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  EXPECT_EQ(out.ev, arpma::conn_event::closed);
}

TEST_F(connection_test, events_queue_until_asked_for) {
  auto conn = connected();
  fake.deliver(id(), event::device_removal);
  fake.deliver(id(), event::disconnected);
  settle();
  event_outcome first;
  event_outcome second;
  next_event(conn, first);
  ASSERT_TRUE(run_until([&] { return first.calls == 1; })) << "timed out";
  next_event(conn, second);
  ASSERT_TRUE(run_until([&] { return second.calls == 1; })) << "timed out";
  EXPECT_EQ(first.ev, arpma::conn_event::lost);
  EXPECT_EQ(second.ev, arpma::conn_event::closed);
}

TEST_F(connection_test, cancelling_next_event_aborts_and_keeps_the_event) {
  auto conn = connected();
  for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial,
                    asio::cancellation_type::total}) {
    asio::cancellation_signal signal;
    event_outcome out;
    conn.async_next_event(asio::bind_cancellation_slot(
        signal.slot(), [&out](arpma::error_code ec, arpma::conn_event ev) {
          out.async_ec = ec;
          out.ev = ev;
          ++out.calls;
        }));
    settle();
    signal.emit(type);
    ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
    EXPECT_EQ(out.async_ec, asio::error::operation_aborted);
  }
  fake.deliver(id(), event::disconnected);
  event_outcome out;
  next_event(conn, out);
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  EXPECT_EQ(out.ev, arpma::conn_event::closed);
}

TEST_F(connection_test, closing_the_connection_aborts_a_waiter) {
  auto conn = connected();
  event_outcome out;
  next_event(conn, out);
  settle();
  EXPECT_EQ(conn.close(), std::error_code());
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  EXPECT_EQ(out.async_ec, asio::error::operation_aborted);
  settle();
  EXPECT_EQ(fake.take_calls(), last_teardown);
}

TEST_F(connection_test, destroying_the_io_context_with_a_waiter_calls_nothing) {
  auto conn = connected();
  event_outcome out;
  next_event(conn, out);
  done_outcome disconnecting;
  fake.on_disconnect({});
  disconnect(conn, disconnecting);
  settle();
  io.reset();
  EXPECT_EQ(out.calls, 0);
  EXPECT_EQ(disconnecting.calls, 0);
  conn = arpma::connection();
  EXPECT_EQ(fake.live_objects(), 1u);
}

TEST_F(connection_test, operations_on_an_empty_connection_are_invalid) {
  arpma::connection empty;
  EXPECT_EQ(empty.disconnect(), arpma::errc::invalid_argument);
  EXPECT_EQ(empty.close(), std::error_code());
  EXPECT_EQ(empty.qp_num(), 0u);
  EXPECT_TRUE(empty.private_data().empty());
  event_outcome out;
  next_event(empty, out);
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (out.calls == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(out.ec, arpma::errc::invalid_argument);
}

// An empty object has no loop: its failure goes straight to the handler's
// executor. Were it carried there by another thread, that thread could still
// be waking the loop when the handler has run and the loop is destroyed
// (TSan saw it in one run of twenty); many rounds, one operation each, make
// the race likely.
template <class Initiate>
void fails_on_the_handlers_loop_and_leaves_it(Initiate initiate) {
  for (int round = 0; round < 100; ++round) {
    asio::io_context loop;  // destroyed as soon as the handler has run
    std::optional<std::error_code> got;
    initiate(loop, got);
    ASSERT_FALSE(got) << "never inside the initiating call";
    ASSERT_TRUE(arpma::test::run_until(loop, [&] { return got.has_value(); }));
    EXPECT_EQ(*got, arpma::errc::invalid_argument);
  }
}

TEST_F(connection_test, an_empty_connections_failures_leave_nothing_behind_the_handler) {
  using result = std::optional<std::error_code>;
  fails_on_the_handlers_loop_and_leaves_it([](asio::io_context& loop, result& got) {
    arpma::connection().async_recv(
        arpma::local_buffer(),
        asio::bind_executor(loop, [&got](std::error_code ec, arpma::completion) { got = ec; }));
  });
  fails_on_the_handlers_loop_and_leaves_it([](asio::io_context& loop, result& got) {
    arpma::connection().async_next_event(
        asio::bind_executor(loop, [&got](std::error_code ec, arpma::conn_event) { got = ec; }));
  });
}

// ---- disconnect --------------------------------------------------------------------

TEST_F(connection_test, disconnect_completes_on_disconnected_when_we_ask) {
  auto conn = connected();
  done_outcome out;
  disconnect(conn, out);
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  EXPECT_FALSE(out.ec) << out.ec.message();
  EXPECT_THAT(fake.take_calls(), ElementsAre("disconnect"));
  // The event stays queued for next_event.
  event_outcome ev;
  next_event(conn, ev);
  ASSERT_TRUE(run_until([&] { return ev.calls == 1; })) << "timed out";
  EXPECT_EQ(ev.ev, arpma::conn_event::closed);
}

TEST_F(connection_test, disconnect_waits_for_a_late_disconnected) {
  auto conn = connected();
  fake.on_disconnect({{event::disconnected, 0, 30ms}});
  done_outcome out;
  disconnect(conn, out);
  settle();
  EXPECT_EQ(out.calls, 0);
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  EXPECT_FALSE(out.ec);
}

TEST_F(connection_test, disconnect_completes_when_the_peer_disconnected_first) {
  auto conn = connected();
  fake.deliver(id(), event::disconnected);
  settle();
  EXPECT_TRUE(fake.take_calls().empty()) << "nobody waits: the loop reads nothing";
  done_outcome out;
  disconnect(conn, out);
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  EXPECT_FALSE(out.ec) << out.ec.message();
  EXPECT_EQ(fake.take_calls(), std::vector<std::string>{"disconnect"}) << "one, not two";
}

TEST_F(connection_test, a_peer_disconnect_read_by_a_waiting_operation_is_answered_at_once) {
  auto conn = connected();
  event_outcome waiting;
  next_event(conn, waiting);
  settle();
  fake.deliver(id(), event::disconnected);
  ASSERT_TRUE(run_until([&] { return waiting.calls == 1; })) << "timed out";
  EXPECT_EQ(waiting.ev, arpma::conn_event::closed);
  EXPECT_EQ(fake.take_calls(), std::vector<std::string>{"disconnect"})
      << "the peer's DREQ is answered as soon as it is read";
  done_outcome out;
  disconnect(conn, out);
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  EXPECT_FALSE(out.ec) << out.ec.message();
  EXPECT_TRUE(fake.take_calls().empty()) << "no second rdma_disconnect";
}

TEST_F(connection_test, disconnect_completes_when_the_peer_disconnects_meanwhile) {
  auto conn = connected();
  fake.on_disconnect({});  // our request goes unanswered...
  done_outcome out;
  disconnect(conn, out);
  settle();
  EXPECT_EQ(out.calls, 0);
  fake.deliver(id(), event::disconnected);  // ...the peer's arrives
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  EXPECT_FALSE(out.ec);
}

TEST_F(connection_test, a_failed_disconnect_is_reported_at_once) {
  auto conn = connected();
  fake.fail("disconnect", EIO);
  done_outcome out;
  std::thread::id ran_on;
  conn.async_disconnect([&](arpma::error_code ec) {
    ran_on = std::this_thread::get_id();
    out.ec = ec;
    ++out.calls;
  });
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  EXPECT_EQ(out.ec.value(), EIO);
  // On the connection's loop (this thread), not on the system executor's thread.
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_EQ(conn.disconnect(), std::error_code()) << "a later request goes through";
  EXPECT_EQ(conn.disconnect(), std::error_code()) << "once";
  EXPECT_THAT(fake.take_calls(), ElementsAre("disconnect", "disconnect"));
}

TEST_F(connection_test, cancelling_disconnect_aborts_the_wait_only) {
  auto conn = connected();
  fake.on_disconnect({});
  asio::cancellation_signal signal;
  done_outcome out;
  conn.async_disconnect(asio::bind_cancellation_slot(signal.slot(), [&out](arpma::error_code ec) {
    out.async_ec = ec;
    ++out.calls;
  }));
  settle();
  signal.emit(asio::cancellation_type::terminal);
  ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
  EXPECT_EQ(out.async_ec, asio::error::operation_aborted);
  EXPECT_THAT(fake.take_calls(), ElementsAre("disconnect"));
}

TEST_F(connection_test, the_server_side_disconnects_either_way) {
  auto ep = arpma::endpoint::listen(io->get_executor(), *peer, "127.0.0.1", "0");
  ASSERT_TRUE(ep);
  auto* listener = fake.ids().front();
  for (bool we_start : {true, false}) {
    auto* client = fake.incoming(listener, {3});
    std::optional<arpma::conn_req> req;
    ep.value().async_next_conn_req(arpma::conn_cfg{},
                                   [&req](std::error_code ec, arpma::conn_req r) {
                                     EXPECT_FALSE(ec);
                                     req.emplace(std::move(r));
                                   });
    ASSERT_TRUE(run_until([&] { return req.has_value(); })) << "timed out";
    connect_outcome accepted;
    connect(*req, accepted);
    ASSERT_TRUE(run_until([&] { return accepted.calls == 1; })) << "timed out";
    ASSERT_FALSE(accepted.ec) << accepted.ec.message();
    EXPECT_EQ(accepted.conn.private_data()[0], 3);
    if (!we_start) fake.deliver(client, event::disconnected);
    done_outcome out;
    disconnect(accepted.conn, out);
    ASSERT_TRUE(run_until([&] { return out.calls == 1; })) << "timed out";
    EXPECT_FALSE(out.ec);
    EXPECT_EQ(accepted.conn.close(), std::error_code());
  }
}

}  // namespace

}  // namespace connection_test

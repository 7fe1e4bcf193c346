// arpma::async_conn_req_new / conn_req_new against the scripted provider:
// every flavour, every failure point, events in any order, timeouts,
// cancellation at each stage, a destroyed io_context, 1000 in flight.
#include "arpma/conn_req.hpp"

#include "arpma/buffer.hpp"
#include "arpma/error.hpp"
#include "arpma/mr.hpp"
#include "arpma/srq.hpp"
#include "fake/fake_provider.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace conn_req_test {

namespace asio = boost::asio;
using arpma::test::fake_provider;
using event = arpma::provider::cm_event_type;
using namespace std::chrono_literals;

namespace {

struct outcome {
  std::error_code ec;
  arpma::error_code async_ec;  // as the handler received it
  arpma::conn_req req;
  int calls = 0;
};

class conn_req_new_test : public ::testing::Test {
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
    EXPECT_EQ(fake.live_objects(), 0u) << "provider objects leaked";
  }

  // Starts the callback flavour; the handler records into `out`. With
  // `blocking`, makes the request with the blocking call instead (done on
  // return; the loop then has nothing to run).
  void start(outcome& out, const arpma::conn_cfg& cfg = {}, std::string addr = "192.0.2.1",
             std::string port = "7204") {
    if (blocking) {
      auto req = arpma::conn_req_new(*peer, addr, port, cfg);
      out.ec = req ? std::error_code() : req.error();
      if (req) out.req = std::move(req).value();
      ++out.calls;
      return;
    }
    arpma::async_conn_req_new(io.get_executor(), *peer, addr, port, cfg,
                              [&out](std::error_code ec, arpma::conn_req req) {
                                out.ec = ec;
                                out.req = std::move(req);
                                ++out.calls;
                              });
  }

  // Runs the loop until `call` has been made (or the loop runs dry).
  void run_until_call(const std::string& call) {
    for (int i = 0; i < 10000; ++i) {
      const auto calls = fake.calls();
      if (std::find(calls.begin(), calls.end(), call) != calls.end()) return;
      if (io.run_one_for(1s) == 0) break;
    }
    FAIL() << "never saw " << call;
  }

  fake_provider fake;
  arpma::provider::scoped_override use_fake{fake};
  asio::io_context io;
  std::optional<arpma::peer> peer;
  bool blocking = false;
};

// The same steps, events and deadlines through both paths: the asynchronous
// operation on a loop, and the blocking call waiting on its own channel.
class conn_req_flavour_test : public conn_req_new_test, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    conn_req_new_test::SetUp();
    blocking = GetParam();
  }
};

std::string flavour_name(bool is_blocking) { return is_blocking ? "blocking" : "async"; }

const std::vector<std::string> creation_sequence = {
    "create_event_channel", "create_id", "resolve_addr",  "resolve_route",
    "create_comp_channel",  "create_cq", "req_notify_cq", "create_qp"};

const std::vector<std::string> teardown_sequence = {
    "destroy_qp", "destroy_cq", "destroy_comp_channel", "destroy_id", "destroy_event_channel"};

// ---- the three flavours ------------------------------------------------------

TEST_F(conn_req_new_test, callback_flavour_builds_a_request) {
  outcome out;
  start(out);
  io.run();
  ASSERT_EQ(out.calls, 1);
  ASSERT_FALSE(out.ec) << out.ec.message();
  ASSERT_TRUE(out.req);
  EXPECT_NE(out.req.qp_num(), 0u);
  EXPECT_FALSE(out.req.has_rcq());
  EXPECT_EQ(fake.take_calls(), creation_sequence);
  auto qp = fake.qp_of(fake.ids().front());
  ASSERT_TRUE(qp);
  EXPECT_EQ(qp->send_cqe, 10);
  EXPECT_TRUE(qp->same_cq);
  EXPECT_TRUE(qp->cqs_armed);
  EXPECT_EQ(qp->config.max_send_wr, 10u);
  EXPECT_EQ(qp->config.max_recv_wr, 10u);
  EXPECT_EQ(qp->config.max_sge, 1u);
  EXPECT_EQ(qp->config.max_inline_data, 8u);
  out.req = {};
  io.run();
  EXPECT_EQ(fake.take_calls(), teardown_sequence);
}

TEST_F(conn_req_new_test, a_receive_posted_before_connecting_goes_to_the_requests_qp) {
  outcome out;
  start(out);
  io.run();
  ASSERT_TRUE(out.req) << out.ec.message();
  std::array<char, 256> memory{};
  auto reg = arpma::local_mr::reg(*peer, memory.data(), memory.size(), arpma::mr_usage::recv);
  ASSERT_TRUE(reg) << reg.error().message();
  const arpma::local_mr mr = std::move(reg).value();
  (void)fake.take_calls();
  EXPECT_FALSE(out.req.post_recv(arpma::buffer(mr, 64, 128).value(), 42));
  EXPECT_EQ(fake.take_calls(), std::vector<std::string>{"post_recv"});
  const auto posted = fake.outstanding(fake.ids().front());
  ASSERT_EQ(posted.size(), 1u);
  EXPECT_TRUE(posted.front().receive);
  EXPECT_EQ(posted.front().wr_id(), 42u);
  EXPECT_EQ(posted.front().recv.local.length, 128u);

  fake.fail("post_recv", ENOMEM);
  EXPECT_EQ(out.req.post_recv(arpma::buffer(mr, 0, 64).value(), 43), std::errc::not_enough_memory);
  EXPECT_TRUE(out.req) << "a failed post leaves the request as it was";
  EXPECT_EQ(fake.outstanding(fake.ids().front()).size(), 1u);
  EXPECT_EQ(arpma::conn_req().post_recv(arpma::buffer(mr, 0, 64).value(), 44),
            arpma::errc::invalid_argument);
  fake.flush(fake.ids().front());
  out.req = {};
  io.run();
}

TEST_F(conn_req_new_test, coroutine_flavour_uses_the_coroutine_executor) {
  arpma::error_code seen;
  std::uint32_t qp_num = 0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto req = co_await arpma::async_conn_req_new(*peer, "192.0.2.1", "7204", arpma::conn_cfg{},
                                                      asio::use_awaitable);
        qp_num = req.qp_num();
        auto [ec, failed] = co_await arpma::async_conn_req_new(*peer, "", "7204", arpma::conn_cfg{},
                                                               asio::as_tuple(asio::use_awaitable));
        seen = ec;
      },
      asio::detached);
  io.run();
  EXPECT_NE(qp_num, 0u);
  EXPECT_EQ(seen, arpma::errc::invalid_argument);
}

TEST_F(conn_req_new_test, coroutine_flavour_throws_on_failure) {
  fake.fail("create_qp", EINVAL);
  std::optional<std::error_code> thrown;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        try {
          co_await arpma::async_conn_req_new(*peer, "192.0.2.1", "7204", arpma::conn_cfg{},
                                             asio::use_awaitable);
        } catch (const boost::system::system_error& e) {
          thrown = e.code();  // converts back to the provider's std::error_code
        }
      },
      asio::detached);
  io.run();
  ASSERT_TRUE(thrown);
  EXPECT_EQ(*thrown, arpma::errc::provider);
  EXPECT_EQ(thrown->value(), EINVAL);
}

TEST_F(conn_req_new_test, deferred_and_future_tokens_work) {
  auto op = arpma::async_conn_req_new(io.get_executor(), *peer, "192.0.2.1", "7204",
                                      arpma::conn_cfg{}, asio::deferred);
  EXPECT_TRUE(fake.take_calls().empty()) << "deferred must not start before it is launched";
  outcome out;
  std::move(op)([&](std::error_code ec, arpma::conn_req req) {
    out.ec = ec;
    out.req = std::move(req);
    ++out.calls;
  });
  std::future<arpma::conn_req> fut = arpma::async_conn_req_new(
      io.get_executor(), *peer, "192.0.2.2", "7204", arpma::conn_cfg{}, asio::use_future);
  io.run();
  EXPECT_EQ(out.calls, 1);
  EXPECT_FALSE(out.ec);
  EXPECT_NE(fut.get().qp_num(), 0u);
}

// Each request is of the flavour it was made in: the async call's runs on the
// loop it was made on; the blocking call's has none until async_connect's
// handler brings one.
TEST_F(conn_req_new_test, a_request_reports_the_loop_it_was_made_on) {
  outcome out;
  start(out);
  io.run();
  ASSERT_EQ(out.calls, 1);
  ASSERT_FALSE(out.ec) << out.ec.message();
  EXPECT_EQ(out.req.get_executor(), asio::any_io_executor(io.get_executor()));
  auto sync_req = arpma::conn_req_new(*peer, "192.0.2.1", "7204");
  ASSERT_TRUE(sync_req) << sync_req.error().message();
  EXPECT_FALSE(sync_req.value().get_executor());
}

TEST_F(conn_req_new_test, blocking_flavour_returns_a_result) {
  auto req = arpma::conn_req_new(*peer, "192.0.2.1", "7204");
  ASSERT_TRUE(req) << req.error().message();
  EXPECT_NE(req.value().qp_num(), 0u);
  fake.fail("resolve_route", EHOSTUNREACH);
  auto failed = arpma::conn_req_new(*peer, "192.0.2.1", "7204");
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error(), arpma::errc::provider);
  EXPECT_EQ(failed.error().value(), EHOSTUNREACH);
}

TEST_F(conn_req_new_test, receive_cq_and_shared_channel_follow_the_cfg) {
  arpma::conn_cfg cfg;
  cfg.cq_size = 32;
  cfg.rcq_size = 16;
  cfg.sq_size = 7;
  cfg.rq_size = 9;
  cfg.shared_completion_channel = true;
  outcome out;
  start(out, cfg);
  io.run();
  ASSERT_FALSE(out.ec) << out.ec.message();
  EXPECT_TRUE(out.req.has_rcq());
  auto qp = fake.qp_of(fake.ids().front());
  ASSERT_TRUE(qp);
  EXPECT_EQ(qp->send_cqe, 32);
  EXPECT_EQ(qp->recv_cqe, 16);
  EXPECT_FALSE(qp->same_cq);
  EXPECT_TRUE(qp->shared_comp_channel);
  EXPECT_EQ(qp->config.max_send_wr, 7u);
  EXPECT_EQ(qp->config.max_recv_wr, 9u);
  const std::vector<std::string> expected = {
      "create_event_channel", "create_id", "resolve_addr",  "resolve_route",
      "create_comp_channel",  "create_cq", "req_notify_cq", "create_cq",
      "req_notify_cq",        "create_qp"};
  EXPECT_EQ(fake.take_calls(), expected);
  EXPECT_FALSE(out.req.close());
  io.run();
  const std::vector<std::string> teardown = {"destroy_qp", "destroy_cq",
                                             "destroy_cq", "destroy_comp_channel",
                                             "destroy_id", "destroy_event_channel"};
  EXPECT_EQ(fake.take_calls(), teardown);
}

// ---- failure points ----------------------------------------------------------

struct failure_point {
  const char* call;
  int nth;
  bool rcq;
  bool shared;
};

std::string destroy_of(const std::string& create) {
  static const std::map<std::string, std::string> pairs = {
      {"create_event_channel", "destroy_event_channel"},
      {"create_id", "destroy_id"},
      {"create_comp_channel", "destroy_comp_channel"},
      {"create_cq", "destroy_cq"},
      {"create_qp", "destroy_qp"}};
  const auto it = pairs.find(create);
  return it == pairs.end() ? std::string() : it->second;
}

class conn_req_failure_test
    : public conn_req_new_test,
      public ::testing::WithParamInterface<std::tuple<failure_point, bool>> {};

TEST_P(conn_req_failure_test, unwinds_in_reverse_and_reports_the_errno) {
  const auto& point = std::get<0>(GetParam());
  blocking = std::get<1>(GetParam());
  arpma::conn_cfg cfg;
  cfg.rcq_size = point.rcq ? 5 : 0;
  cfg.shared_completion_channel = point.shared;
  fake.fail(point.call, ENOSPC, point.nth);
  outcome out;
  start(out, cfg);
  io.run();
  ASSERT_EQ(out.calls, 1);
  EXPECT_EQ(out.ec, arpma::errc::provider);
  EXPECT_EQ(out.ec, std::error_code(ENOSPC, std::system_category()));
  EXPECT_EQ(arpma::to_rpma_error(out.ec), static_cast<int>(arpma::errc::provider));
  EXPECT_FALSE(out.req);

  // Everything created before the failure is destroyed, in reverse order
  // (a CQ whose arming failed included: its own step destroys it first).
  const auto calls = fake.take_calls();
  int seen = 0;
  std::size_t failed_at = calls.size();
  for (std::size_t i = 0; i < calls.size(); ++i)
    if (calls[i] == point.call && ++seen == point.nth) failed_at = i;
  ASSERT_LT(failed_at, calls.size());
  std::vector<std::string> expected;
  for (std::size_t i = failed_at; i-- > 0;)
    if (auto d = destroy_of(calls[i]); !d.empty()) expected.push_back(d);
  const std::vector<std::string> after(calls.begin() + static_cast<std::ptrdiff_t>(failed_at) + 1,
                                       calls.end());
  EXPECT_EQ(after, expected);
  EXPECT_EQ(fake.live_objects(), 1u) << "only the peer's PD may remain";
}

INSTANTIATE_TEST_SUITE_P(
    each_step, conn_req_failure_test,
    ::testing::Combine(::testing::Values(failure_point{"create_event_channel", 1, false, false},
                                         failure_point{"create_id", 1, false, false},
                                         failure_point{"resolve_addr", 1, false, false},
                                         failure_point{"resolve_route", 1, false, false},
                                         failure_point{"create_comp_channel", 1, false, false},
                                         failure_point{"create_cq", 1, false, false},
                                         failure_point{"req_notify_cq", 1, false, false},
                                         failure_point{"create_qp", 1, false, false},
                                         failure_point{"create_comp_channel", 2, true, false},
                                         failure_point{"create_cq", 2, true, false},
                                         failure_point{"req_notify_cq", 2, true, false},
                                         failure_point{"create_qp", 1, true, false},
                                         failure_point{"create_comp_channel", 1, true, true},
                                         failure_point{"create_cq", 1, true, true},
                                         failure_point{"create_cq", 2, true, true},
                                         failure_point{"req_notify_cq", 2, true, true},
                                         failure_point{"create_qp", 1, true, true}),
                       ::testing::Bool()),
    [](const auto& param_info) {
      const auto& p = std::get<0>(param_info.param);
      return std::string(p.call) + "_" + std::to_string(p.nth) + (p.rcq ? "_rcq" : "") +
             (p.shared ? "_shared" : "") + "_" + flavour_name(std::get<1>(param_info.param));
    });

// ---- events ------------------------------------------------------------------

TEST_P(conn_req_flavour_test, addr_error_event_fails_with_its_status) {
  fake.on_resolve_addr({{event::addr_error, -ENETUNREACH}});
  outcome out;
  start(out);
  io.run();
  EXPECT_EQ(out.ec, std::error_code(ENETUNREACH, std::system_category()));
  EXPECT_EQ(out.ec, arpma::errc::provider);
  EXPECT_EQ(fake.live_objects(), 1u);
}

TEST_P(conn_req_flavour_test, route_error_event_fails_with_its_status) {
  fake.on_resolve_route({{event::route_error, -ETIMEDOUT}});
  outcome out;
  start(out);
  io.run();
  EXPECT_EQ(out.ec, std::error_code(ETIMEDOUT, std::system_category()));
  EXPECT_EQ(fake.live_objects(), 1u);
}

TEST_P(conn_req_flavour_test, an_event_out_of_order_is_a_protocol_error) {
  fake.on_resolve_addr({{event::route_resolved}});
  outcome out;
  start(out);
  io.run();
  EXPECT_EQ(out.ec, std::errc::protocol_error);
  EXPECT_EQ(out.ec, arpma::errc::provider);
  EXPECT_EQ(fake.live_objects(), 1u);
}

TEST_F(conn_req_new_test, events_for_other_ids_are_dropped_not_misrouted) {
  // The first request's late duplicate arrives after it completed.
  fake.on_resolve_addr({{event::addr_resolved}, {event::addr_resolved, 0, 30ms}});
  outcome first;
  outcome second;
  start(first);
  start(second);
  io.run();
  EXPECT_FALSE(first.ec) << first.ec.message();
  EXPECT_FALSE(second.ec) << second.ec.message();
}

TEST_P(conn_req_flavour_test, delayed_events_complete_within_the_timeout) {
  fake.on_resolve_addr({{event::addr_resolved, 0, 20ms}});
  fake.on_resolve_route({{event::route_resolved, 0, 20ms}});
  arpma::conn_cfg cfg;
  cfg.timeout = 2s;
  outcome out;
  start(out, cfg);
  io.run();
  EXPECT_FALSE(out.ec) << out.ec.message();
}

TEST_P(conn_req_flavour_test, address_resolution_past_the_timeout_times_out) {
  fake.on_resolve_addr({});  // never answers
  arpma::conn_cfg cfg;
  cfg.timeout = 50ms;
  outcome out;
  start(out, cfg);
  io.run();
  EXPECT_EQ(out.ec, std::errc::timed_out);
  EXPECT_EQ(arpma::to_rpma_error(out.ec), static_cast<int>(arpma::errc::provider));
  EXPECT_EQ(fake.live_objects(), 1u);
}

TEST_P(conn_req_flavour_test, route_resolution_past_the_timeout_times_out) {
  fake.on_resolve_route({{event::route_resolved, 0, 500ms}});
  arpma::conn_cfg cfg;
  cfg.timeout = 50ms;
  outcome out;
  start(out, cfg);
  io.run();
  EXPECT_EQ(out.ec, std::errc::timed_out);
  EXPECT_EQ(fake.live_objects(), 1u);
}

// A late loop (CI's Soft-iWARP guest, frozen by its host past the 1 s
// default): the deadline fires while a handler holds the request's strand,
// then the address event arrives; both wait on the strand, the deadline
// first. What has arrived when the deadline is handled counts, as librpma
// (no deadline but the kernel's) would have it.
TEST_F(conn_req_new_test, an_event_waiting_behind_the_deadline_completes_the_phase) {
  fake.on_resolve_addr({{event::addr_resolved, 0, 150ms}});
  arpma::conn_cfg cfg;
  cfg.timeout = 100ms;
  auto strand = asio::make_strand(io);
  outcome out;
  arpma::async_conn_req_new(strand, *peer, "192.0.2.1", "7204", cfg,
                            [&out](std::error_code ec, arpma::conn_req req) {
                              out.ec = ec;
                              out.req = std::move(req);
                              ++out.calls;
                            });
  // After the operation's first step (posted first): the strand stays busy
  // past the deadline (100 ms) and the event (150 ms), while the other
  // thread's reactor queues both on it in that order.
  asio::post(strand, [] { std::this_thread::sleep_for(650ms); });
  std::thread other([this] { io.run(); });
  io.run();
  other.join();
  EXPECT_EQ(out.calls, 1);
  EXPECT_FALSE(out.ec) << out.ec.message();
  EXPECT_TRUE(out.req);
  out.req = {};
  io.restart();
  io.run();
}

// The blocking path: its thread is away past the deadline (a provider call
// that takes 150 ms, its event queued at once); the event waiting in the
// channel then counts, where the thread only looks once more.
TEST_F(conn_req_new_test, blocking_an_event_that_came_while_the_thread_was_away_counts) {
  blocking = true;
  fake.stall("resolve_route", 150ms);
  arpma::conn_cfg cfg;
  cfg.timeout = 100ms;
  outcome out;
  start(out, cfg);
  EXPECT_FALSE(out.ec) << out.ec.message();
  EXPECT_TRUE(out.req);
}

TEST_P(conn_req_flavour_test, invalid_arguments_touch_nothing) {
  arpma::conn_cfg negative;
  negative.timeout = -1ms;
  outcome empty_addr;
  outcome empty_port;
  outcome bad_timeout;
  start(empty_addr, {}, "", "7204");
  start(empty_port, {}, "192.0.2.1", "");
  start(bad_timeout, negative);
  io.run();
  EXPECT_EQ(empty_addr.ec, arpma::errc::invalid_argument);
  EXPECT_EQ(empty_port.ec, arpma::errc::invalid_argument);
  EXPECT_EQ(bad_timeout.ec, arpma::errc::invalid_argument);
  EXPECT_TRUE(fake.take_calls().empty());
}

TEST_P(conn_req_flavour_test, host_names_are_resolved_before_the_cm) {
  outcome out;
  start(out, {}, "localhost", "7204");
  io.run();
  EXPECT_FALSE(out.ec) << out.ec.message();
  EXPECT_EQ(fake.take_calls(), creation_sequence);
}

INSTANTIATE_TEST_SUITE_P(both, conn_req_flavour_test, ::testing::Bool(),
                         [](const auto& param_info) { return flavour_name(param_info.param); });

// ---- cancellation and teardown -------------------------------------------------

class conn_req_cancel_test : public conn_req_new_test,
                             public ::testing::WithParamInterface<const char*> {};

TEST_P(conn_req_cancel_test, terminal_cancellation_releases_everything) {
  const std::string stage = GetParam();
  if (stage == "resolve_addr") fake.on_resolve_addr({});
  if (stage == "resolve_route") fake.on_resolve_route({});
  asio::cancellation_signal signal;
  outcome out;
  arpma::async_conn_req_new(io.get_executor(), *peer, "192.0.2.1", "7204", arpma::conn_cfg{},
                            asio::bind_cancellation_slot(
                                signal.slot(), [&out](arpma::error_code ec, arpma::conn_req req) {
                                  out.ec = ec;
                                  out.async_ec = ec;
                                  out.req = std::move(req);
                                  ++out.calls;
                                }));
  if (stage != "initiation") run_until_call(stage);
  signal.emit(asio::cancellation_type::terminal);
  io.run();
  EXPECT_EQ(out.calls, 1);
  EXPECT_EQ(out.ec, std::errc::operation_canceled);
  EXPECT_NE(out.ec, arpma::errc::provider);
  EXPECT_EQ(out.async_ec, boost::asio::error::operation_aborted) << "Asio's own code";
  EXPECT_FALSE(out.req);
  EXPECT_EQ(fake.live_objects(), 1u);
}

INSTANTIATE_TEST_SUITE_P(each_stage, conn_req_cancel_test,
                         ::testing::Values("initiation", "create_id", "resolve_addr",
                                           "resolve_route"));

TEST_F(conn_req_new_test, total_cancellation_is_not_honoured) {
  asio::cancellation_signal signal;
  outcome out;
  arpma::async_conn_req_new(
      io.get_executor(), *peer, "192.0.2.1", "7204", arpma::conn_cfg{},
      asio::bind_cancellation_slot(signal.slot(), [&out](std::error_code ec, auto) {
        out.ec = ec;
        ++out.calls;
      }));
  signal.emit(asio::cancellation_type::total);
  io.run();
  EXPECT_EQ(out.calls, 1);
  EXPECT_FALSE(out.ec) << "a total cancellation must not abort a request with side effects";
}

TEST_F(conn_req_new_test, destroying_the_io_context_mid_flight_calls_nothing) {
  fake.on_resolve_route({});
  outcome out;
  {
    asio::io_context local;
    arpma::async_conn_req_new(local.get_executor(), *peer, "192.0.2.1", "7204", arpma::conn_cfg{},
                              [&out](std::error_code ec, auto) {
                                out.ec = ec;
                                ++out.calls;
                              });
    for (int i = 0; i < 100 && fake.calls().back() != "resolve_route"; ++i)
      local.run_one_for(100ms);
    EXPECT_EQ(fake.calls().back(), "resolve_route");
  }
  EXPECT_EQ(out.calls, 0);
  EXPECT_EQ(fake.live_objects(), 1u);
}

// A cfg does not own the SRQ it names: once the SRQ is closed, a request made
// with that cfg is refused (it never reaches a dangling SRQ), and the creation
// undoes what it had built.
TEST_F(conn_req_new_test, a_cfg_whose_srq_is_closed_is_an_invalid_argument) {
  auto s = arpma::srq::create(*peer);
  ASSERT_TRUE(s) << s.error().message();
  arpma::conn_cfg cfg;
  s.value().attach_to(cfg);
  EXPECT_FALSE(s.value().close());
  outcome out;
  start(out, cfg);
  io.run();
  ASSERT_EQ(out.calls, 1);
  EXPECT_EQ(out.ec, arpma::errc::invalid_argument) << out.ec.message();
  EXPECT_FALSE(out.req);
  const auto calls = fake.take_calls();
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "create_qp"), 0);
}

TEST_F(conn_req_new_test, a_request_outlives_its_peer_handle) {
  outcome out;
  start(out);
  io.run();
  ASSERT_TRUE(out.req);
  EXPECT_FALSE(peer->close());         // the PD stays while the request uses it
  EXPECT_EQ(fake.live_objects(), 6u);  // PD, event channel, id, completion channel, CQ, QP
  out.req = {};
  io.run();
  EXPECT_EQ(fake.live_objects(), 0u);
}

// ---- many in flight ------------------------------------------------------------

TEST_F(conn_req_new_test, a_thousand_requests_share_one_event_fd) {
  std::mt19937 random(7);
  std::uniform_int_distribution<int> jitter(0, 20);
  // Answers arrive in an order unrelated to the order of the requests.
  fake.on_resolve_addr({{event::addr_resolved, 0, std::chrono::milliseconds(jitter(random))}});
  fake.on_resolve_route({{event::route_resolved, 0, 1ms}});
  constexpr int count = 1000;
  std::vector<outcome> outs(count);
  for (auto& out : outs) start(out);
  io.run();
  int ok = 0;
  for (const auto& out : outs) ok += (out.calls == 1 && !out.ec && out.req) ? 1 : 0;
  EXPECT_EQ(ok, count);
  EXPECT_EQ(fake.event_channels_created(), 1);
  std::set<std::uint32_t> qps;
  for (const auto& out : outs) qps.insert(out.req.qp_num());
  EXPECT_EQ(qps.size(), static_cast<std::size_t>(count));
  outs.clear();
  io.run();
  EXPECT_EQ(fake.live_objects(), 1u);
}

}  // namespace

}  // namespace conn_req_test

// arpma::completion_channel on the scripted provider: creation and its
// failures, argument checks, shared ownership with the connections made on
// it, and what a request built on it creates and destroys (no channel of its
// own), in which order.
#include "arpma/completion_channel.hpp"

#include "arpma/conn_req.hpp"
#include "arpma/error.hpp"
#include "core/comp_channel_state.hpp"
#include "fake/fake_provider.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>

#include <cerrno>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace completion_channel_test {

namespace asio = boost::asio;
using arpma::test::fake_provider;
using ::testing::ElementsAre;

namespace {

using strings = std::vector<std::string>;

static_assert(!std::is_copy_constructible_v<arpma::completion_channel>);
static_assert(std::is_nothrow_move_constructible_v<arpma::completion_channel>);

class completion_channel_test : public ::testing::Test {
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

  // A request on `ex` with `cfg`, the loop run to its end.
  arpma::result<arpma::conn_req> request(const arpma::conn_cfg& cfg, asio::io_context& on) {
    std::optional<arpma::result<arpma::conn_req>> out;
    arpma::async_conn_req_new(on.get_executor(), *peer, "192.0.2.1", "7204", cfg,
                              [&](std::error_code ec, arpma::conn_req req) {
                                if (ec)
                                  out.emplace(ec);
                                else
                                  out.emplace(std::move(req));
                              });
    on.run();
    on.restart();
    if (!out) return make_error_code(arpma::errc::unknown);
    return std::move(*out);
  }

  fake_provider fake;
  arpma::provider::scoped_override use_fake{fake};
  asio::io_context io;
  std::optional<arpma::peer> peer;
};

TEST_F(completion_channel_test, create_makes_one_channel_and_close_destroys_it) {
  auto ch = arpma::completion_channel::create(io.get_executor(), *peer);
  ASSERT_TRUE(ch) << ch.error().message();
  EXPECT_THAT(fake.take_calls(), ElementsAre("create_comp_channel"));
  EXPECT_TRUE(ch.value());
  EXPECT_GE(ch.value().native_handle(), 0);
  EXPECT_EQ(ch.value().cq_count(), 0u);
  EXPECT_TRUE(ch.value().get_executor() == io.get_executor());
  EXPECT_FALSE(ch.value().close());
  EXPECT_FALSE(ch.value());
  EXPECT_EQ(ch.value().native_handle(), -1);
  EXPECT_THAT(fake.take_calls(), ElementsAre("destroy_comp_channel"));
}

TEST_F(completion_channel_test, a_failed_creation_leaves_nothing) {
  fake.fail("create_comp_channel", EIO);
  auto ch = arpma::completion_channel::create(io.get_executor(), *peer);
  ASSERT_FALSE(ch);
  EXPECT_EQ(ch.error(), arpma::errc::provider);
  EXPECT_EQ(ch.error(), std::error_code(EIO, std::system_category()));
  EXPECT_EQ(fake.live_objects(), 1u) << "only the peer's PD";
}

TEST_F(completion_channel_test, no_executor_or_an_empty_peer_is_an_invalid_argument) {
  auto no_ex = arpma::completion_channel::create({}, *peer);
  ASSERT_FALSE(no_ex);
  EXPECT_EQ(no_ex.error(), arpma::errc::invalid_argument);

  arpma::peer moved = std::move(*peer);
  auto no_peer = arpma::completion_channel::create(io.get_executor(),
                                                   *peer);  // NOLINT(bugprone-use-after-move)
  ASSERT_FALSE(no_peer);
  EXPECT_EQ(no_peer.error(), arpma::errc::invalid_argument);
  *peer = std::move(moved);
  EXPECT_THAT(fake.take_calls(), ::testing::IsEmpty());

  arpma::completion_channel empty;
  EXPECT_FALSE(empty);
  EXPECT_EQ(empty.native_handle(), -1);
  EXPECT_EQ(empty.cq_count(), 0u);
  EXPECT_FALSE(empty.get_executor());
  EXPECT_FALSE(empty.close());
  arpma::conn_cfg cfg;
  EXPECT_EQ(&empty.attach_to(cfg), &cfg);
  EXPECT_EQ(cfg, arpma::conn_cfg{}) << "an empty handle attaches nothing";
}

TEST_F(completion_channel_test, a_request_puts_both_cqs_on_it_and_the_last_user_destroys_it) {
  auto ch = arpma::completion_channel::create(io.get_executor(), *peer);
  ASSERT_TRUE(ch);
  arpma::conn_cfg cfg;
  cfg.rcq_size = 4;
  cfg.shared_completion_channel = true;  // overridden: both CQs are on the common channel
  EXPECT_EQ(ch.value().attach_to(cfg).completion_channel.lock(),
            arpma::detail::access::state(ch.value()));
  (void)fake.take_calls();

  auto req = request(cfg, io);
  ASSERT_TRUE(req) << req.error().message();
  EXPECT_EQ(fake.take_calls(),
            (strings{"create_event_channel", "create_id", "resolve_addr", "resolve_route",
                     "create_cq", "req_notify_cq", "create_cq", "req_notify_cq", "create_qp"}));
  EXPECT_EQ(ch.value().cq_count(), 2u);
  auto qp = fake.qp_of(fake.ids().front());
  ASSERT_TRUE(qp);
  EXPECT_FALSE(qp->same_cq);
  EXPECT_TRUE(qp->shared_comp_channel);

  EXPECT_FALSE(ch.value().close()) << "the request still uses it: nothing to report";
  EXPECT_THAT(fake.take_calls(), ::testing::IsEmpty());
  EXPECT_FALSE(req.value().close());
  io.run();
  EXPECT_EQ(fake.take_calls(),
            (strings{"destroy_qp", "destroy_cq", "destroy_cq", "destroy_comp_channel", "destroy_id",
                     "destroy_event_channel"}));
}

TEST_F(completion_channel_test, a_request_on_another_io_context_is_an_invalid_argument) {
  asio::io_context other;
  auto ch = arpma::completion_channel::create(other.get_executor(), *peer);
  ASSERT_TRUE(ch);
  arpma::conn_cfg cfg;
  ch.value().attach_to(cfg);
  (void)fake.take_calls();
  auto req = request(cfg, io);
  ASSERT_FALSE(req);
  EXPECT_EQ(req.error(), arpma::errc::invalid_argument);
  EXPECT_EQ(ch.value().cq_count(), 0u);
  const auto calls = fake.take_calls();
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "create_cq"), 0) << "nothing was built";
}

TEST_F(completion_channel_test, a_strand_of_the_same_io_context_is_the_same_loop) {
  auto ch = arpma::completion_channel::create(asio::make_strand(io), *peer);
  ASSERT_TRUE(ch);
  arpma::conn_cfg cfg;
  ch.value().attach_to(cfg);
  auto req = request(cfg, io);
  ASSERT_TRUE(req) << req.error().message();
  EXPECT_EQ(ch.value().cq_count(), 1u);
}

TEST_F(completion_channel_test, a_failed_cq_leaves_the_channel_as_it_was) {
  auto ch = arpma::completion_channel::create(io.get_executor(), *peer);
  ASSERT_TRUE(ch);
  arpma::conn_cfg cfg;
  cfg.rcq_size = 4;
  ch.value().attach_to(cfg);
  for (const auto* call : {"create_cq", "req_notify_cq", "create_qp"}) {
    for (int nth : {1, 2}) {
      if (std::string(call) == "create_qp" && nth == 2) continue;
      SCOPED_TRACE(std::string(call) + " #" + std::to_string(nth));
      fake.fail(call, EIO, nth);
      auto req = request(cfg, io);
      ASSERT_FALSE(req);
      EXPECT_EQ(req.error(), std::error_code(EIO, std::system_category()));
      EXPECT_EQ(ch.value().cq_count(), 0u);
      EXPECT_EQ(fake.live_objects(), 2u) << "the PD and the channel";
      EXPECT_TRUE(ch.value());
    }
  }
  // Still usable afterwards.
  auto req = request(cfg, io);
  ASSERT_TRUE(req) << req.error().message();
  EXPECT_EQ(ch.value().cq_count(), 2u);
}

TEST_F(completion_channel_test, a_cfg_points_at_it_and_a_holder_keeps_it) {
  auto ch = arpma::completion_channel::create(io.get_executor(), *peer);
  ASSERT_TRUE(ch);
  (void)fake.take_calls();
  arpma::conn_cfg cfg;
  ch.value().attach_to(cfg);
  EXPECT_NE(cfg, arpma::conn_cfg{});
  auto user = cfg.completion_channel.lock();  // what a connection holds
  EXPECT_FALSE(ch.value().close());
  EXPECT_THAT(fake.take_calls(), ::testing::IsEmpty());
  user.reset();
  EXPECT_THAT(fake.take_calls(), ElementsAre("destroy_comp_channel"));
}

}  // namespace

}  // namespace completion_channel_test

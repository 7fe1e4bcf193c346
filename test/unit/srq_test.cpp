// arpma::srq: creation order and failures, teardown, shared ownership with a
// conn_cfg, and the argument checks of post_recv — on the scripted provider,
// and posting for real on the soft provider.
#include "arpma/srq.hpp"

#include "arpma/error.hpp"
#include "core/srq_state.hpp"
#include "fake/fake_provider.hpp"
#include "provider/soft/soft_provider.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace srq_test {

using arpma::test::fake_provider;
using ::testing::ElementsAre;

namespace {

using strings = std::vector<std::string>;

static_assert(!std::is_copy_constructible_v<arpma::srq>);
static_assert(std::is_nothrow_move_constructible_v<arpma::srq>);

class srq_test : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = arpma::get_ibv_context("192.0.2.1", arpma::ibv_context_type::remote);
    ASSERT_TRUE(dev);
    auto p = arpma::peer::create(dev.value());
    ASSERT_TRUE(p);
    peer.emplace(std::move(p).value());
    (void)fake.take_calls();
    baseline = fake.live_objects();
  }
  void TearDown() override {
    EXPECT_FALSE(peer->close());
    EXPECT_THAT(fake.violations(), ::testing::IsEmpty());
    EXPECT_EQ(fake.live_objects(), 0u);
  }

  fake_provider fake;
  arpma::provider::scoped_override use_fake{fake};
  std::optional<arpma::peer> peer;  // peer has no empty state of its own
  std::size_t baseline = 0;
};

TEST_F(srq_test, defaults_are_librpmas) {
  const arpma::srq_config cfg;
  EXPECT_EQ(cfg.rq_size, 20u);
  EXPECT_EQ(cfg.rcq_size, 20u);
}

TEST_F(srq_test, create_makes_the_srq_then_its_rcq_and_close_undoes_them) {
  auto s = arpma::srq::create(*peer);
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_THAT(fake.take_calls(),
              ElementsAre("create_srq", "create_comp_channel", "create_cq", "req_notify_cq"));
  EXPECT_TRUE(s.value());
  EXPECT_TRUE(s.value().has_rcq());
  EXPECT_GE(s.value().rcq_fd(), 0);
  EXPECT_FALSE(s.value().close());
  EXPECT_FALSE(s.value());
  EXPECT_THAT(fake.take_calls(), ElementsAre("destroy_cq", "destroy_comp_channel", "destroy_srq"));
  EXPECT_EQ(fake.live_objects(), baseline);
}

TEST_F(srq_test, without_rcq) {
  auto s = arpma::srq::create(*peer, {.rq_size = 4, .rcq_size = 0});
  ASSERT_TRUE(s);
  EXPECT_THAT(fake.take_calls(), ElementsAre("create_srq"));
  EXPECT_FALSE(s.value().has_rcq());
  EXPECT_EQ(s.value().rcq_fd(), -1);
}

TEST_F(srq_test, a_failed_creation_leaves_nothing) {
  for (const char* call : {"create_srq", "create_comp_channel", "create_cq", "req_notify_cq"}) {
    SCOPED_TRACE(call);
    fake.fail(call, EIO);
    auto s = arpma::srq::create(*peer);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error(), arpma::errc::provider);
    EXPECT_EQ(fake.live_objects(), baseline);
  }
}

TEST_F(srq_test, an_empty_peer_or_srq_is_an_invalid_argument) {
  arpma::peer moved = std::move(*peer);
  auto s = arpma::srq::create(*peer);  // NOLINT(bugprone-use-after-move): on purpose
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error(), arpma::errc::invalid_argument);
  *peer = std::move(moved);

  arpma::srq empty;
  EXPECT_FALSE(empty);
  EXPECT_FALSE(empty.has_rcq());
  EXPECT_EQ(empty.post_recv(arpma::local_buffer{}, 1), arpma::errc::invalid_argument);
  EXPECT_FALSE(empty.close());

  auto made = arpma::srq::create(*peer);
  ASSERT_TRUE(made);
  EXPECT_EQ(made.value().post_recv(arpma::local_buffer{}, 1), arpma::errc::invalid_argument)
      << "an empty region";
  arpma::srq other = std::move(made).value();
  EXPECT_TRUE(other);
  EXPECT_TRUE(other.has_rcq());
}

TEST_F(srq_test, a_conn_cfg_points_at_it_and_another_holder_keeps_it) {
  auto s = arpma::srq::create(*peer);
  ASSERT_TRUE(s);
  (void)fake.take_calls();
  arpma::conn_cfg cfg;
  EXPECT_EQ(&s.value().attach_to(cfg), &cfg);
  EXPECT_EQ(cfg.srq.lock(), arpma::detail::access::state(s.value()));
  EXPECT_NE(cfg, arpma::conn_cfg{});
  auto user = cfg.srq.lock();  // what a connection made with cfg holds
  EXPECT_FALSE(s.value().close()) << "not the last holder: nothing to report";
  EXPECT_THAT(fake.take_calls(), ::testing::IsEmpty());
  user.reset();
  EXPECT_THAT(fake.take_calls(), ElementsAre("destroy_cq", "destroy_comp_channel", "destroy_srq"));
}

TEST_F(srq_test, close_reports_the_first_error_and_goes_on) {
  auto s = arpma::srq::create(*peer);
  ASSERT_TRUE(s);
  (void)fake.take_calls();
  fake.fail("destroy_comp_channel", EIO);
  fake.fail("destroy_srq", EBUSY);
  const auto ec = s.value().close();
  EXPECT_EQ(ec, arpma::errc::provider);
  EXPECT_EQ(ec, std::error_code(EIO, std::system_category()));
  EXPECT_THAT(fake.take_calls(), ElementsAre("destroy_cq", "destroy_comp_channel", "destroy_srq"));
}

// Posting for real: the soft provider checks the region and fills the queue.
TEST(srq_soft, post_recv_checks_ranges_and_fills_the_queue) {
  arpma::provider::soft_provider soft;
  arpma::provider::scoped_override use_soft{soft};
  auto dev = arpma::get_ibv_context("127.0.0.1", arpma::ibv_context_type::local);
  ASSERT_TRUE(dev) << dev.error().message();
  auto p = arpma::peer::create(dev.value());
  ASSERT_TRUE(p);
  std::vector<char> buf(128);
  auto mr = arpma::local_mr::reg(p.value(), buf.data(), buf.size(), arpma::mr_usage::recv);
  ASSERT_TRUE(mr);
  auto s = arpma::srq::create(p.value(), {.rq_size = 2, .rcq_size = 4});
  ASSERT_TRUE(s) << s.error().message();
  auto& q = s.value();
  EXPECT_TRUE(q.has_rcq());
  // A range leaving the region has no slice to post.
  EXPECT_EQ(arpma::buffer(mr.value(), 120, 16).error(), arpma::errc::invalid_argument);
  EXPECT_EQ(arpma::buffer(mr.value(), 129, 0).error(), arpma::errc::invalid_argument);
  EXPECT_EQ(arpma::buffer(mr.value(), SIZE_MAX, 2).error(), arpma::errc::invalid_argument);
  EXPECT_EQ(q.post_recv(arpma::local_buffer{}, 1), arpma::errc::invalid_argument);
  EXPECT_FALSE(q.post_recv(arpma::buffer(mr.value(), 0, 64).value(), 1));
  EXPECT_FALSE(q.post_recv(arpma::buffer(mr.value(), 64, 64).value(), 2));
  EXPECT_EQ(q.post_recv(arpma::buffer(mr.value(), 0, 8).value(), 3), std::errc::not_enough_memory)
      << "full";
  EXPECT_FALSE(q.close());
  EXPECT_FALSE(mr.value().dereg());
  EXPECT_FALSE(p.value().close());
}

}  // namespace

}  // namespace srq_test

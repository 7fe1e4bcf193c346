// arpma::peer and the device lookups of arpma/peer.hpp on the fake provider:
// argument checks, the PD's lifetime (it outlives the handle while anything
// made from it lives), and what a failed allocation leaves (nothing).
#include "arpma/peer.hpp"

#include "arpma/error.hpp"
#include "arpma/mr.hpp"
#include "fake/fake_provider.hpp"
#include "provider/provider.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

namespace peer_test {

using arpma::test::fake_provider;

namespace {

class peer_test : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = arpma::get_ibv_context("192.0.2.1", arpma::ibv_context_type::remote);
    ASSERT_TRUE(dev) << dev.error().message();
    context = dev.value();
  }
  void TearDown() override {
    EXPECT_THAT(fake.violations(), ::testing::IsEmpty());
    EXPECT_EQ(fake.live_objects(), 0U);
  }
  [[nodiscard]] long count(const std::string& call) const {
    const auto calls = fake.calls();
    return std::count(calls.begin(), calls.end(), call);
  }

  fake_provider fake;
  arpma::provider::scoped_override use_fake{fake};
  ibv_context* context = nullptr;
};

TEST_F(peer_test, a_lookup_checks_its_arguments) {
  EXPECT_EQ(arpma::get_ibv_context("", arpma::ibv_context_type::local).error(),
            arpma::errc::invalid_argument);
  EXPECT_EQ(arpma::get_ibv_context("192.0.2.1", static_cast<arpma::ibv_context_type>(2)).error(),
            arpma::errc::invalid_argument);
  EXPECT_EQ(arpma::is_odp_capable(nullptr).error(), arpma::errc::invalid_argument);
}

TEST_F(peer_test, create_checks_its_context) {
  EXPECT_EQ(arpma::peer::create(nullptr).error(), arpma::errc::invalid_argument);
  int not_a_device = 0;
  EXPECT_EQ(arpma::peer::create(reinterpret_cast<ibv_context*>(&not_a_device)).error(),
            arpma::errc::invalid_argument)
      << "a context no provider knows";
  EXPECT_EQ(count("alloc_pd"), 0);
}

TEST_F(peer_test, a_failed_pd_allocation_leaves_nothing) {
  fake.fail("alloc_pd", ENOMEM);
  auto p = arpma::peer::create(context);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error(), arpma::errc::no_memory) << "librpma: ENOMEM is RPMA_E_NOMEM";
  fake.fail("alloc_pd", EPERM);
  p = arpma::peer::create(context);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error(), std::errc::operation_not_permitted) << "anything else is the provider's";
  EXPECT_EQ(p.error(), arpma::errc::provider);
}

TEST_F(peer_test, close_frees_the_pd_once) {
  auto created = arpma::peer::create(context);
  ASSERT_TRUE(created);
  arpma::peer& p = created.value();
  EXPECT_EQ(p.context(), context);
  EXPECT_FALSE(p.close());
  EXPECT_EQ(count("dealloc_pd"), 1);
  EXPECT_EQ(p.context(), nullptr) << "a closed handle is empty";
  EXPECT_FALSE(p.close()) << "closing again does nothing";
  EXPECT_EQ(count("dealloc_pd"), 1);
}

TEST_F(peer_test, the_pd_lives_while_a_region_registered_on_it_does) {
  auto created = arpma::peer::create(context);
  ASSERT_TRUE(created);
  arpma::peer& p = created.value();
  std::vector<char> memory(4096);
  auto mr = arpma::local_mr::reg(p, memory.data(), memory.size(), arpma::mr_usage::read_src);
  ASSERT_TRUE(mr) << mr.error().message();
  EXPECT_FALSE(p.close());
  EXPECT_EQ(count("dealloc_pd"), 0) << "the region still uses it";
  EXPECT_FALSE(mr.value().dereg());
  EXPECT_EQ(count("dealloc_pd"), 1) << "the last user frees it";
}

TEST_F(peer_test, a_failed_dealloc_is_reported_by_the_close_that_freed_it) {
  auto created = arpma::peer::create(context);
  ASSERT_TRUE(created);
  arpma::peer& p = created.value();
  fake.fail("dealloc_pd", EBUSY);
  EXPECT_EQ(p.close(), std::errc::device_or_resource_busy);
}

TEST_F(peer_test, a_moved_from_peer_is_empty_and_closes_to_nothing) {
  auto created = arpma::peer::create(context);
  ASSERT_TRUE(created);
  arpma::peer& p = created.value();
  arpma::peer moved = std::move(p);
  EXPECT_EQ(moved.context(), context);
  EXPECT_FALSE(moved.close());
  EXPECT_EQ(count("dealloc_pd"), 1);
}

}  // namespace

}  // namespace peer_test

// arpma::local_mr on the fake provider: the On-Demand Paging fallback of a
// registration (librpma's: only on EOPNOTSUPP, only where the device has
// ODP), is_odp_capable, and advise's checks and what it hands the provider.
#include "arpma/mr.hpp"

#include "arpma/error.hpp"
#include "arpma/peer.hpp"
#include "fake/fake_provider.hpp"
#include "provider/provider.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <optional>
#include <vector>

namespace mr_test {

using arpma::test::fake_provider;
using ::testing::ElementsAre;

namespace {

namespace access = arpma::provider::access;

class mr_test : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = arpma::get_ibv_context("192.0.2.1", arpma::ibv_context_type::remote);
    ASSERT_TRUE(dev);
    context = dev.value();
    auto p = arpma::peer::create(context);
    ASSERT_TRUE(p);
    peer.emplace(std::move(p).value());
  }
  void TearDown() override {
    EXPECT_FALSE(peer->close());
    EXPECT_THAT(fake.violations(), ::testing::IsEmpty());
    EXPECT_EQ(fake.live_objects(), 0U);
  }

  void with_odp(bool odp) {
    arpma::provider::device_caps caps;
    caps.odp = odp;
    fake.set_caps(caps);
  }
  arpma::result<arpma::local_mr> reg() {
    return arpma::local_mr::reg(*peer, memory.data(), memory.size(), arpma::mr_usage::write_dst);
  }

  fake_provider fake;
  arpma::provider::scoped_override use_fake{fake};
  ibv_context* context = nullptr;
  std::optional<arpma::peer> peer;
  std::vector<char> memory = std::vector<char>(4096);
};

constexpr int write_dst_access = access::local_write | access::remote_write;

TEST_F(mr_test, is_odp_capable_reports_the_devices_capability) {
  EXPECT_EQ(arpma::is_odp_capable(context).value(), false);
  with_odp(true);
  EXPECT_EQ(arpma::is_odp_capable(context).value(), true);
  EXPECT_EQ(arpma::is_odp_capable(nullptr).error(), arpma::errc::invalid_argument);
}

TEST_F(mr_test, a_refused_registration_is_retried_on_demand_where_the_device_pages) {
  with_odp(true);
  fake.fail("reg_mr", EOPNOTSUPP);  // memory the device cannot pin (FS-DAX)
  auto mr = reg();
  ASSERT_TRUE(mr) << mr.error().message();
  EXPECT_THAT(fake.reg_accesses(),
              ElementsAre(write_dst_access, write_dst_access | access::on_demand));
}

TEST_F(mr_test, without_odp_the_refusal_is_the_result) {
  fake.fail("reg_mr", EOPNOTSUPP);
  auto mr = reg();
  ASSERT_FALSE(mr);
  EXPECT_EQ(mr.error(), std::errc::operation_not_supported);
  EXPECT_EQ(mr.error(), arpma::errc::provider);
  EXPECT_THAT(fake.reg_accesses(), ElementsAre(write_dst_access));
}

TEST_F(mr_test, other_refusals_are_not_retried) {
  with_odp(true);
  fake.fail("reg_mr", EFAULT);
  auto mr = reg();
  ASSERT_FALSE(mr);
  EXPECT_EQ(mr.error(), std::errc::bad_address);
  EXPECT_THAT(fake.reg_accesses(), ElementsAre(write_dst_access));
}

TEST_F(mr_test, a_registered_region_is_not_on_demand) {
  with_odp(true);
  auto mr = reg();
  ASSERT_TRUE(mr);
  EXPECT_THAT(fake.reg_accesses(), ElementsAre(write_dst_access));
}

TEST_F(mr_test, advise_hands_its_range_and_values_to_the_provider) {
  auto mr = reg().value();
  EXPECT_FALSE(mr.advise(64, 128, arpma::mr_advice::prefetch_write, arpma::mr_advise_flush));
  EXPECT_FALSE(mr.advise(0, memory.size(), arpma::mr_advice::prefetch_no_fault));
  const auto calls = fake.advice_calls();
  ASSERT_EQ(calls.size(), 2U);
  EXPECT_EQ(calls[0].offset, 64U);
  EXPECT_EQ(calls[0].length, 128U);
  EXPECT_EQ(calls[0].advice, 1);
  EXPECT_EQ(calls[0].flags, 1U);
  EXPECT_EQ(calls[1].length, memory.size());
  EXPECT_EQ(calls[1].advice, 2);
  EXPECT_EQ(calls[1].flags, 0U);
}

TEST_F(mr_test, advise_refuses_a_range_outside_the_region_before_the_provider) {
  auto mr = reg().value();
  using arpma::mr_advice;
  EXPECT_EQ(mr.advise(0, memory.size() + 1, mr_advice::prefetch), arpma::errc::invalid_argument);
  EXPECT_EQ(mr.advise(memory.size(), 1, mr_advice::prefetch), arpma::errc::invalid_argument);
  EXPECT_EQ(mr.advise(SIZE_MAX, 2, mr_advice::prefetch), arpma::errc::invalid_argument);
  EXPECT_EQ(arpma::local_mr().advise(0, 1, mr_advice::prefetch), arpma::errc::invalid_argument);
  EXPECT_TRUE(fake.advice_calls().empty());
}

TEST_F(mr_test, advise_reports_the_providers_errno) {
  auto mr = reg().value();
  fake.fail("advise_mr", EOPNOTSUPP);
  const auto ec = mr.advise(0, 8, arpma::mr_advice::prefetch);
  EXPECT_EQ(ec, std::errc::operation_not_supported);
  EXPECT_EQ(ec, arpma::errc::provider);
}

}  // namespace

}  // namespace mr_test

// arpma::local_buffer / remote_buffer and arpma::buffer: a slice's range is
// checked when it is made (overflow-safe), slices of slices stay inside
// their parent, a whole region converts implicitly, and a local slice keeps
// naming its registration when the local_mr handle moves. On the fake
// provider (a registration needs a peer).
#include "arpma/buffer.hpp"

#include "arpma/detail/access.hpp"
#include "arpma/error.hpp"
#include "arpma/mr.hpp"
#include "arpma/peer.hpp"
#include "fake/fake_provider.hpp"
#include "provider/provider.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

namespace buffer_test {

namespace {

// Values to pass by copy, as Asio's buffers are.
static_assert(std::is_trivially_copyable_v<arpma::local_buffer>);
static_assert(std::is_trivially_copyable_v<arpma::remote_buffer>);
static_assert(std::is_convertible_v<const arpma::local_mr&, arpma::local_buffer>);
static_assert(std::is_convertible_v<const arpma::remote_mr&, arpma::remote_buffer>);

constexpr std::size_t size_max = std::numeric_limits<std::size_t>::max();
constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();

class buffer_test : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = arpma::get_ibv_context("192.0.2.1", arpma::ibv_context_type::remote);
    ASSERT_TRUE(dev);
    auto p = arpma::peer::create(dev.value());
    ASSERT_TRUE(p);
    peer.emplace(std::move(p).value());
    auto m = arpma::local_mr::reg(*peer, memory.data(), memory.size(), arpma::mr_usage::all);
    ASSERT_TRUE(m);
    mr = std::move(m).value();
  }
  void TearDown() override {
    EXPECT_FALSE(mr.dereg());
    EXPECT_FALSE(peer->close());
    EXPECT_THAT(fake.violations(), ::testing::IsEmpty());
    EXPECT_EQ(fake.live_objects(), 0U);
  }

  /// A region of the other side: 64 KiB at 0x10000, rkey 7, read and write.
  static arpma::remote_mr remote() {
    arpma::mr_descriptor d{};
    d[2] = 0x01;   // addr 0x10000, little-endian
    d[10] = 0x01;  // length 0x10000
    d[16] = 7;
    d[20] = arpma::mr_usage::read_src | arpma::mr_usage::write_dst;
    return arpma::remote_mr::from_descriptor(d).value();
  }

  arpma::test::fake_provider fake;
  arpma::provider::scoped_override use_fake{fake};
  std::optional<arpma::peer> peer;
  std::vector<char> memory = std::vector<char>(4096);
  arpma::local_mr mr;
};

TEST_F(buffer_test, a_local_mr_is_the_whole_region) {
  const arpma::local_buffer whole = mr;
  EXPECT_TRUE(whole);
  EXPECT_EQ(whole.data(), memory.data());
  EXPECT_EQ(whole.size(), memory.size());
  EXPECT_EQ(whole.offset(), 0U);
}

TEST_F(buffer_test, a_local_slice_inside_the_region_is_made) {
  auto s = arpma::buffer(mr, 100, 64);
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s.value().data(), memory.data() + 100);
  EXPECT_EQ(s.value().size(), 64U);
  EXPECT_EQ(s.value().offset(), 100U);
  auto end = arpma::buffer(mr, memory.size(), 0);
  ASSERT_TRUE(end) << "an empty slice at the end is inside";
  EXPECT_EQ(end.value().size(), 0U);
  EXPECT_TRUE(arpma::buffer(mr, 0, memory.size()));
}

TEST_F(buffer_test, a_local_range_leaving_the_region_is_an_invalid_argument) {
  const auto invalid = make_error_code(arpma::errc::invalid_argument);
  EXPECT_EQ(arpma::buffer(mr, 4090, 8).error(), invalid);
  EXPECT_EQ(arpma::buffer(mr, 4097, 0).error(), invalid);
  EXPECT_EQ(arpma::buffer(mr, 0, 4097).error(), invalid);
  EXPECT_EQ(arpma::buffer(mr, size_max, 2).error(), invalid) << "offset + length wraps";
  EXPECT_EQ(arpma::buffer(mr, 2, size_max).error(), invalid) << "offset + length wraps";
  EXPECT_EQ(arpma::buffer(arpma::local_mr{}, 0, 0).error(), invalid) << "no region";
}

TEST_F(buffer_test, a_slice_of_a_slice_stays_inside_its_parent) {
  const auto parent = arpma::buffer(mr, 1000, 100).value();
  auto child = parent.slice(10, 20);
  ASSERT_TRUE(child);
  EXPECT_EQ(child.value().data(), memory.data() + 1010);
  EXPECT_EQ(child.value().offset(), 1010U) << "offsets are the region's";
  EXPECT_EQ(child.value().size(), 20U);
  EXPECT_EQ(parent.slice(90, 11).error(), arpma::errc::invalid_argument)
      << "inside the region, outside the parent";
  EXPECT_EQ(parent.slice(size_max, 1).error(), arpma::errc::invalid_argument);
}

TEST_F(buffer_test, an_empty_local_buffer_names_nothing_and_has_no_slices) {
  const arpma::local_buffer none;
  EXPECT_FALSE(none);
  EXPECT_EQ(none.size(), 0U);
  EXPECT_EQ(none.data(), nullptr);
  EXPECT_EQ(none.slice(0, 0).error(), arpma::errc::invalid_argument);
  EXPECT_FALSE(arpma::local_buffer(arpma::local_mr{})) << "an empty local_mr's whole is empty";
}

TEST_F(buffer_test, a_local_slice_names_its_registration_after_the_handle_moves) {
  const auto s = arpma::buffer(mr, 0, 16).value();
  const auto* state = arpma::detail::access::state(mr);
  arpma::local_mr moved = std::move(mr);
  EXPECT_EQ(arpma::detail::access::state(s), state);
  EXPECT_EQ(arpma::detail::access::state(moved), state);
  mr = std::move(moved);  // TearDown deregisters it
}

TEST_F(buffer_test, a_remote_slice_is_checked_against_the_descriptors_length) {
  const arpma::remote_mr r = remote();
  const arpma::remote_buffer whole = r;
  EXPECT_EQ(whole.addr(), 0x10000U);
  EXPECT_EQ(whole.size(), 0x10000U);
  auto s = arpma::buffer(r, 0x100, 0x40);
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s.value().addr(), 0x10100U);
  EXPECT_EQ(s.value().offset(), 0x100U);
  EXPECT_EQ(s.value().size(), 0x40U);
  EXPECT_EQ(s.value().region().rkey(), 7U);
  EXPECT_EQ(s.value().slice(0x3f, 2).error(), arpma::errc::invalid_argument);
  EXPECT_EQ(arpma::buffer(r, 0xfff8, 16).error(), arpma::errc::invalid_argument);
  EXPECT_EQ(arpma::buffer(r, u64_max, 2).error(), arpma::errc::invalid_argument);
  EXPECT_TRUE(arpma::buffer(r, 0x10000, 0)) << "an empty slice at the end";
}

TEST_F(buffer_test, a_remote_region_never_decoded_has_no_slices) {
  EXPECT_EQ(arpma::buffer(arpma::remote_mr{}, 0, 0).error(), arpma::errc::invalid_argument);
  EXPECT_EQ(arpma::remote_buffer{}.slice(0, 0).error(), arpma::errc::invalid_argument);
}

}  // namespace

}  // namespace buffer_test

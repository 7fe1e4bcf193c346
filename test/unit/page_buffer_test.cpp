// page_buffer: the soft provider's receive buffer (small on the heap, large in a mapping).
#include "support/page_buffer.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace page_buffer_test {

namespace {

using arpma::detail::page_buffer;

void fill(page_buffer& b, std::size_t from, std::size_t to) {
  for (std::size_t i = from; i < to; ++i) b.data()[i] = static_cast<std::uint8_t>(i * 7 + 3);
}

bool holds(const page_buffer& b, std::size_t to) {
  for (std::size_t i = 0; i < to; ++i)
    if (b.data()[i] != static_cast<std::uint8_t>(i * 7 + 3)) return false;
  return true;
}

const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));

/// How many of the pages of bytes [from, to) are resident (mincore).
std::size_t resident(const page_buffer& b, std::size_t from, std::size_t to) {
  std::vector<unsigned char> v((to - from + page - 1) / page);
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): mincore only reads the range
  EXPECT_EQ(::mincore(const_cast<std::uint8_t*>(b.data() + from), to - from, v.data()), 0);
  std::size_t n = 0;
  for (unsigned char c : v) n += c & 1U;
  return n;
}

TEST(page_buffer, starts_empty_and_small_sizes_stay_on_the_heap) {
  page_buffer b;
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.data(), nullptr);
  b.resize(512);
  EXPECT_EQ(b.size(), 512u);
  EXPECT_FALSE(b.mapped());
  fill(b, 0, 512);
  b.resize(page_buffer::heap_max);
  EXPECT_FALSE(b.mapped());
  EXPECT_TRUE(holds(b, 512)) << "growing on the heap keeps the bytes";
}

TEST(page_buffer, growing_past_the_heap_limit_maps_and_keeps_the_bytes) {
  page_buffer b;
  b.resize(4096);
  fill(b, 0, 4096);
  b.resize(std::size_t{256} << 10);
  EXPECT_TRUE(b.mapped());
  EXPECT_EQ(b.size(), std::size_t{256} << 10);
  EXPECT_TRUE(holds(b, 4096));
  fill(b, 0, b.size());
  b.resize(std::size_t{3} << 20);  // mremap: may move, keeps everything
  EXPECT_TRUE(holds(b, std::size_t{256} << 10));
  fill(b, 0, b.size());
  EXPECT_TRUE(holds(b, b.size()));
}

TEST(page_buffer, resize_never_shrinks) {
  page_buffer b;
  b.resize(std::size_t{1} << 20);
  b.resize(100);
  EXPECT_EQ(b.size(), std::size_t{1} << 20);
}

TEST(page_buffer, reset_drops_the_contents_and_returns_the_mapping) {
  page_buffer b;
  b.resize(std::size_t{8} << 20);
  fill(b, 0, b.size());
  b.reset(std::size_t{256} << 10);
  EXPECT_EQ(b.size(), std::size_t{256} << 10);
  EXPECT_TRUE(b.mapped());
  b.reset(512);
  EXPECT_FALSE(b.mapped());
  EXPECT_EQ(b.size(), 512u);
  b.reset(0);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.data(), nullptr);
}

TEST(page_buffer, a_mapping_reset_to_a_smaller_one_keeps_its_first_pages_in_place) {
  constexpr std::size_t small = std::size_t{256} << 10;
  page_buffer b;
  b.resize(std::size_t{2} << 20);
  fill(b, 0, b.size());
  const std::uint8_t* before = b.data();
  b.reset(small);
  // The next large frame does not fault the first pages in again (a trap
  // each, tens of microseconds on a hypervisor; 1 MiB READ responses took
  // 3.6 ms where 1 MiB less 76 B took 0.14 ms).
  EXPECT_EQ(b.data(), before);
  EXPECT_EQ(resident(b, 0, small), small / page);
  b.resize(std::size_t{2} << 20);  // the rest was returned: it starts out absent again
  EXPECT_EQ(resident(b, small, b.size()), 0U);
}

TEST(page_buffer, populate_makes_the_pages_of_a_range_resident_in_one_call) {
  page_buffer b;
  b.resize(std::size_t{1} << 20);
  ASSERT_EQ(resident(b, 0, b.size()), 0U);
  b.populate(page + 1, 5 * page - 1);  // partial pages count whole
  EXPECT_EQ(resident(b, page, 5 * page), 4U);
  EXPECT_EQ(resident(b, 5 * page, b.size()), 0U);
  EXPECT_EQ(resident(b, 0, page), 0U);
  b.populate(0, b.size() + page);  // past the mapping: nothing
  EXPECT_EQ(resident(b, 5 * page, b.size()), 0U);
  page_buffer heap;
  heap.resize(512);
  heap.populate(0, 512);  // on the heap: nothing to do, no crash
  EXPECT_FALSE(heap.mapped());
}

TEST(page_buffer, moves_take_the_bytes_along) {
  page_buffer a;
  a.resize(std::size_t{300} << 10);
  fill(a, 0, a.size());
  const std::uint8_t* bytes = a.data();
  page_buffer b(std::move(a));
  EXPECT_EQ(b.data(), bytes);
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): a moved-from buffer is empty
  page_buffer c;
  c.resize(64);
  c = std::move(b);
  EXPECT_EQ(c.data(), bytes);
  EXPECT_TRUE(holds(c, c.size()));
}

TEST(page_buffer, a_refused_mapping_throws_bad_alloc_and_leaves_the_buffer_as_it_was) {
  page_buffer b;
  b.resize(1000);
  fill(b, 0, 1000);
  EXPECT_THROW(b.resize(~std::size_t{0} >> 1), std::bad_alloc);
  EXPECT_EQ(b.size(), 1000u);
  EXPECT_FALSE(b.mapped());
  EXPECT_TRUE(holds(b, 1000));
}

}  // namespace

}  // namespace page_buffer_test

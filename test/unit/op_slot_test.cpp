// core/op_slot.hpp: one block for an object's one queued operation, the heap
// for anything that does not fit or comes while the block is taken, and a post
// on an io_context's executor that takes its storage from the block.
#include "core/op_slot.hpp"

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>

#include <array>
#include <cstddef>
#include <cstdint>

namespace op_slot_test {

namespace asio = boost::asio;
using arpma::detail::op_slot;
using arpma::detail::op_slot_allocator;

bool inside(const op_slot& slot, const void* p) {
  const auto* base = reinterpret_cast<const std::byte*>(&slot);
  const auto* at = static_cast<const std::byte*>(p);
  return at >= base && at < base + sizeof slot;
}

TEST(op_slot, one_block_at_a_time_then_the_heap) {
  op_slot slot;
  op_slot_allocator<std::uint64_t> alloc(slot);
  std::uint64_t* first = alloc.allocate(4);
  EXPECT_TRUE(inside(slot, first));
  std::uint64_t* second = alloc.allocate(4);  // the block is taken
  EXPECT_FALSE(inside(slot, second));
  alloc.deallocate(second, 4);
  alloc.deallocate(first, 4);
  EXPECT_EQ(alloc.allocate(4), first) << "the block is free again";
  alloc.deallocate(first, 4);
}

TEST(op_slot, what_does_not_fit_goes_to_the_heap) {
  op_slot slot;
  op_slot_allocator<std::byte> alloc(slot);
  std::byte* big = alloc.allocate(op_slot::capacity + 1);
  EXPECT_FALSE(inside(slot, big));
  alloc.deallocate(big, op_slot::capacity + 1);
  std::byte* fits = alloc.allocate(op_slot::capacity);
  EXPECT_TRUE(inside(slot, fits));
  alloc.deallocate(fits, op_slot::capacity);
}

TEST(op_slot, rebound_allocators_share_the_block_and_compare_equal) {
  op_slot slot;
  op_slot other;
  const op_slot_allocator<int> a(slot);
  const op_slot_allocator<double> b(a);
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a != b);
  EXPECT_TRUE(a != op_slot_allocator<int>(other));
  EXPECT_EQ(b.slot(), &slot);
}

// A posted function's operation lives in the block: while it is queued the
// block is taken, and it is free again by the time the function runs.
TEST(op_slot, a_post_on_an_io_context_takes_its_operation_from_the_block) {
  asio::io_context io;
  op_slot slot;
  bool ran = false;
  arpma::detail::post_in_slot(asio::any_io_executor(io.get_executor()), slot, [&] {
    ran = true;
    void* p = slot.take(8, 8);
    EXPECT_NE(p, nullptr) << "freed before the call";
    EXPECT_TRUE(slot.give_back(p));
  });
  EXPECT_EQ(slot.take(8, 8), nullptr) << "the queued operation holds the block";
  io.run();
  EXPECT_TRUE(ran);
}

}  // namespace op_slot_test

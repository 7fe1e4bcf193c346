// provider/ring.hpp: first in, first out across wrap-around and growth.
#include "provider/ring.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace ring_test {

namespace {

using arpma::provider::ring;

std::vector<int> contents(const ring<int>& r) { return {r.begin(), r.end()}; }

TEST(ring, keeps_order_across_wrap_around_and_growth) {
  ring<int> r;
  EXPECT_TRUE(r.empty());
  for (int i = 0; i < 10; ++i) r.push_back(i);
  r.pop_front(7);                                // head moves on: the next pushes wrap around
  for (int i = 10; i < 40; ++i) r.push_back(i);  // grows while wrapped
  std::vector<int> expected;
  for (int i = 7; i < 40; ++i) expected.push_back(i);
  EXPECT_EQ(contents(r), expected);
  EXPECT_EQ(r.front(), 7);
  EXPECT_EQ(r.back(), 39);
  EXPECT_EQ(r.size(), 33U);
  const auto it = std::find_if(r.begin(), r.end(), [](int v) { return v > 30; });
  ASSERT_NE(it, r.end());
  EXPECT_EQ(*it, 31);
  r.pop_front();
  EXPECT_EQ(r.front(), 8);
  r.clear();
  EXPECT_TRUE(r.empty());
  r.push_back(1);
  EXPECT_EQ(contents(r), std::vector<int>{1});
}

}  // namespace

}  // namespace ring_test

#include "stats.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <random>
#include <vector>

namespace {

using arpma_perf::histogram;

TEST(StatsTest, BucketsCoverEveryValueWithinTheirPrecision) {
  for (const std::uint64_t v : std::initializer_list<std::uint64_t>{
           0, 1, 127, 128, 129, 255, 256, 1000, 123456789, std::uint64_t{1} << 40, UINT64_MAX}) {
    const std::uint64_t back = histogram::value_of(histogram::bucket_of(v));
    if (v < 128)
      EXPECT_EQ(back, v);
    else
      EXPECT_LE(std::fabs(static_cast<double>(back) - static_cast<double>(v)),
                static_cast<double>(v) / 128.0)
          << v;
  }
  // Bucket indexes grow with the value, without gaps.
  std::size_t last = 0;
  for (std::uint64_t v = 1; v < 100000; ++v) {
    const std::size_t b = histogram::bucket_of(v);
    EXPECT_TRUE(b == last || b == last + 1) << v;
    last = b;
  }
}

TEST(StatsTest, EmptyHistogram) {
  const histogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), 0u);
  EXPECT_EQ(h.percentile(50), 0u);
  EXPECT_EQ(h.mean(), 0.0);
}

TEST(StatsTest, SmallValuesAreExact) {
  histogram h;
  for (std::uint64_t v = 1; v <= 100; ++v) h.record(v);
  EXPECT_EQ(h.count(), 100u);
  EXPECT_EQ(h.min(), 1u);
  EXPECT_EQ(h.max(), 100u);
  EXPECT_EQ(h.percentile(50), 50u);
  EXPECT_EQ(h.percentile(99), 99u);
  EXPECT_EQ(h.percentile(99.9), 100u);
  EXPECT_EQ(h.percentile(100), 100u);
  EXPECT_EQ(h.percentile(0), 1u);
  EXPECT_DOUBLE_EQ(h.mean(), 50.5);
}

TEST(StatsTest, PercentilesMatchSortedSamplesWithinPrecision) {
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> dist(9.0, 1.0);  // around 8 us, a long tail
  std::vector<std::uint64_t> samples;
  histogram h;
  for (int i = 0; i < 100000; ++i) {
    const auto v = static_cast<std::uint64_t>(dist(rng));
    samples.push_back(v);
    h.record(v);
  }
  std::sort(samples.begin(), samples.end());
  for (double p : {50.0, 90.0, 99.0, 99.9}) {
    const auto rank = static_cast<std::size_t>(std::ceil(p / 100 * samples.size()));
    const double exact = static_cast<double>(samples[rank - 1]);
    EXPECT_NEAR(static_cast<double>(h.percentile(p)), exact, exact / 128 + 1) << p;
  }
  EXPECT_EQ(h.min(), samples.front());
  EXPECT_EQ(h.max(), samples.back());
}

TEST(StatsTest, MergeIsTheSameAsRecordingAll) {
  histogram a, b, all;
  for (std::uint64_t v = 0; v < 5000; v += 7) {
    (v % 2 != 0 ? a : b).record(v * 13);
    all.record(v * 13);
  }
  a.merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.min(), all.min());
  EXPECT_EQ(a.max(), all.max());
  for (double p : {1.0, 50.0, 99.0, 99.9}) EXPECT_EQ(a.percentile(p), all.percentile(p));
}

TEST(StatsTest, SummaryIsOrderedAndConsistent) {
  histogram h;
  h.record(5000);
  h.record(1000000);
  for (int i = 0; i < 998; ++i) h.record(200000 + i);
  const auto s = arpma_perf::summarize(4096, h, 0.5, true);
  EXPECT_EQ(s.ops, 1000u);
  EXPECT_EQ(s.min_ns, 5000u);
  EXPECT_EQ(s.max_ns, 1000000u);
  EXPECT_LE(s.min_ns, s.median_ns);
  EXPECT_LE(s.median_ns, s.p99_ns);
  EXPECT_LE(s.p99_ns, s.p999_ns);
  EXPECT_LE(s.p999_ns, s.max_ns);
  EXPECT_DOUBLE_EQ(s.ops_per_s, 2000.0);
  EXPECT_DOUBLE_EQ(s.gb_per_s, 4096 * 2000.0 / 1e9);
  EXPECT_TRUE(s.complete);
}

}  // namespace

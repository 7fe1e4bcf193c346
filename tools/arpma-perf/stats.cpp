#include "stats.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace arpma_perf {
namespace {

constexpr std::uint64_t exact_below = 128;  // values below: one bucket each
constexpr std::uint64_t sub_buckets = 64;   // per power of two above
constexpr std::size_t bucket_count = exact_below + (64 - 7) * sub_buckets;

}  // namespace

// v >= 128 has its top bit at msb >= 7; shifting it right by msb - 6 leaves 64..127, whose
// low 6 bits pick the sub-bucket of that power of two.
std::size_t histogram::bucket_of(std::uint64_t ns) noexcept {
  if (ns < exact_below) return static_cast<std::size_t>(ns);
  const int shift = static_cast<int>(std::bit_width(ns)) - 7;
  return static_cast<std::size_t>(exact_below + (shift - 1) * sub_buckets +
                                  ((ns >> shift) - sub_buckets));
}

std::uint64_t histogram::value_of(std::size_t bucket) noexcept {
  if (bucket < exact_below) return bucket;
  const std::size_t above = bucket - exact_below;
  const int shift = static_cast<int>(above / sub_buckets) + 1;
  const std::uint64_t low = (sub_buckets + above % sub_buckets) << shift;
  return low + ((std::uint64_t{1} << shift) - 1) / 2;
}

histogram::histogram() : buckets_(bucket_count, 0) {}

void histogram::record(std::uint64_t ns) noexcept {
  ++buckets_[bucket_of(ns)];
  ++count_;
  min_ = std::min(min_, ns);
  max_ = std::max(max_, ns);
  sum_ += ns;
}

void histogram::merge(const histogram& other) noexcept {
  for (std::size_t i = 0; i < bucket_count; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  sum_ += other.sum_;
}

double histogram::mean() const noexcept {
  return count_ != 0 ? static_cast<double>(sum_) / static_cast<double>(count_) : 0.0;
}

std::uint64_t histogram::percentile(double p) const noexcept {
  if (count_ == 0) return 0;
  const double wanted = std::ceil(std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(count_));
  const std::uint64_t rank = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(wanted));
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < bucket_count; ++i) {
    seen += buckets_[i];
    if (seen >= rank) return std::clamp(value_of(i), min_, max_);
  }
  return max_;
}

size_result summarize(std::size_t size, const histogram& h, double elapsed_s, bool complete) {
  size_result r;
  r.size = size;
  r.ops = h.count();
  r.elapsed_s = elapsed_s;
  r.complete = complete;
  r.min_ns = h.min();
  r.median_ns = h.percentile(50);
  r.p99_ns = h.percentile(99);
  r.p999_ns = h.percentile(99.9);
  r.max_ns = h.max();
  r.mean_ns = h.mean();
  r.ops_per_s = elapsed_s > 0 ? static_cast<double>(r.ops) / elapsed_s : 0.0;
  r.gb_per_s = static_cast<double>(size) * r.ops_per_s / 1e9;
  return r;
}

}  // namespace arpma_perf

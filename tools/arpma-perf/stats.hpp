// Latency statistics in fixed memory: a log-linear histogram (exact below 128 ns, then 64
// buckets per power of two, so a percentile is within 0.8 % of the true value) and the
// summary of one message size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace arpma_perf {

class histogram {
 public:
  histogram();
  void record(std::uint64_t ns) noexcept;
  void merge(const histogram& other) noexcept;

  [[nodiscard]] std::uint64_t count() const noexcept { return count_; }
  [[nodiscard]] std::uint64_t min() const noexcept { return count_ != 0 ? min_ : 0; }
  [[nodiscard]] std::uint64_t max() const noexcept { return max_; }
  [[nodiscard]] double mean() const noexcept;
  /// The smallest recorded value v (to the bucket's precision, within [min, max]) such that
  /// at least p percent of the values are <= v; 0 when empty. Monotone in p.
  [[nodiscard]] std::uint64_t percentile(double p) const noexcept;

  // The bucket scheme, public for its tests.
  [[nodiscard]] static std::size_t bucket_of(std::uint64_t ns) noexcept;
  /// The middle of a bucket's range of values.
  [[nodiscard]] static std::uint64_t value_of(std::size_t bucket) noexcept;

 private:
  std::vector<std::uint64_t> buckets_;
  std::uint64_t count_ = 0;
  std::uint64_t min_ = UINT64_MAX;
  std::uint64_t max_ = 0;
  // Integer nanoseconds (584 years before it wraps): long double's x87 arithmetic, per
  // operation, is slow on an emulated CPU, where the round trips are measured.
  std::uint64_t sum_ = 0;
};

/// One message size's figures.
struct size_result {
  std::size_t size = 0;
  std::uint64_t ops = 0;  ///< measured operations, all connections
  double elapsed_s = 0;
  bool complete = true;  ///< false: cut short by a signal or an error
  std::uint64_t min_ns = 0;
  std::uint64_t median_ns = 0;
  std::uint64_t p99_ns = 0;
  std::uint64_t p999_ns = 0;
  std::uint64_t max_ns = 0;
  double mean_ns = 0;
  double ops_per_s = 0;
  double gb_per_s = 0;  ///< size * ops_per_s / 1e9 (decimal GB)
};

[[nodiscard]] size_result summarize(std::size_t size, const histogram& h, double elapsed_s,
                                    bool complete);

}  // namespace arpma_perf

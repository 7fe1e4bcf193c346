// The live progress line: on a terminal a `\r` line on stderr redrawn about 5 times a
// second (rate, elapsed, ETA); otherwise a plain line every 5 s at most, so CI logs of short
// runs stay free of it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace arpma_perf {

struct progress_sample {
  std::size_t size = 0;
  std::size_t size_index = 0;  ///< 0-based
  std::size_t size_count = 1;
  std::uint64_t done = 0;    ///< measured operations so far (all connections)
  std::uint64_t target = 0;  ///< operations this size will take; 0 with a duration
  double duration_s = 0;     ///< with a duration
  double elapsed_s = 0;
  double rate = 0;  ///< operations per second, recently
};

/// "64 B (1/3): 12345 ops, 120.3 kops/s, 1.0 s elapsed, ETA 7.3 s"
[[nodiscard]] std::string progress_line(const progress_sample& s);

class progress_printer {
 public:
  /// Decides from isatty(stderr).
  progress_printer();
  [[nodiscard]] std::chrono::milliseconds interval() const noexcept;
  /// Draws (terminal) or prints (otherwise, when due) the line for `s`.
  void update(const progress_sample& s);
  /// Removes a drawn line before other output.
  void clear();

 private:
  bool tty_ = false;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_plain_;
};

}  // namespace arpma_perf

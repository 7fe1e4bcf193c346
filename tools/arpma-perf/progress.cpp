#include "progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace arpma_perf {
namespace {

constexpr auto tty_interval = std::chrono::milliseconds(200);
constexpr auto plain_interval = std::chrono::seconds(5);

std::string human_rate(double ops_per_s) {
  char buf[32];
  if (ops_per_s >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2f Mops/s", ops_per_s / 1e6);
  else if (ops_per_s >= 1e3)
    std::snprintf(buf, sizeof buf, "%.1f kops/s", ops_per_s / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f ops/s", ops_per_s);
  return buf;
}

}  // namespace

std::string progress_line(const progress_sample& s) {
  double eta = -1;
  if (s.target != 0 && s.rate > 0)
    eta = static_cast<double>(s.target - std::min(s.done, s.target)) / s.rate;
  else if (s.target == 0)
    eta = std::max(0.0, s.duration_s - s.elapsed_s);
  char buf[160];
  std::snprintf(buf, sizeof buf, "%zu B (%zu/%zu): %llu ops, %s, %.1f s elapsed, ETA ", s.size,
                s.size_index + 1, s.size_count, static_cast<unsigned long long>(s.done),
                human_rate(s.rate).c_str(), s.elapsed_s);
  std::string line = buf;
  if (eta < 0) return line + "?";
  std::snprintf(buf, sizeof buf, "%.1f s", eta);
  return line + buf;
}

progress_printer::progress_printer()
    : tty_(::isatty(STDERR_FILENO) == 1), last_plain_(std::chrono::steady_clock::now()) {}

std::chrono::milliseconds progress_printer::interval() const noexcept { return tty_interval; }

void progress_printer::update(const progress_sample& s) {
  if (tty_) {
    std::fprintf(stderr, "\r%s\033[K", progress_line(s).c_str());
    std::fflush(stderr);
    drawn_ = true;
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (now - last_plain_ < plain_interval) return;
  last_plain_ = now;
  std::fprintf(stderr, "%s\n", progress_line(s).c_str());
}

void progress_printer::clear() {
  if (!drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace arpma_perf

// The fault point counter of support/fault.hpp. Only built with ARPMA_FAULT_INJECTION.
#ifdef ARPMA_FAULT_INJECTION

#include "support/fault.hpp"

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace arpma::fault {
namespace {

// The names of the first points reached, for the count file: enough for every program the
// driver runs; later points are counted but not named.
constexpr std::size_t max_named = 8192;

struct state {
  unsigned long long target = 0;  // 0: fail none
  const char* count_file = nullptr;
  bool on = false;
  std::atomic<unsigned long long> reached{0};
  std::atomic<const char*> failed{nullptr};  // the point that failed, if it was reached
  std::array<std::atomic<const char*>, max_named> names{};
  std::array<std::atomic<long>, static_cast<std::size_t>(object::kinds)> live{};
};

constexpr std::array<const char*, static_cast<std::size_t>(object::kinds)> object_names = {
    "event_channel", "id", "qp", "pd", "comp_channel", "cq", "mr", "srq"};

void write_count_file() noexcept;

state& read_environment() noexcept {
  // Environment read once, before any point counts; the process writes no variable later.
  static state* s = [] {
    static state st;
    const char* n = std::getenv("ARPMA_FAULT_INJECTION");   // NOLINT(concurrency-mt-unsafe)
    st.count_file = std::getenv("ARPMA_FAULT_COUNT_FILE");  // NOLINT(concurrency-mt-unsafe)
    if (n != nullptr && *n != '\0') {
      char* end = nullptr;
      st.target = std::strtoull(n, &end, 10);
      if (*end != '\0') st.target = 0;  // "count" or garbage: count only
    }
    st.on = (n != nullptr && *n != '\0') || (st.count_file != nullptr && *st.count_file != '\0');
    if (st.count_file != nullptr && *st.count_file != '\0') (void)std::atexit(write_count_file);
    return &st;
  }();
  return *s;
}

void write_count_file() noexcept {
  state& s = read_environment();
  std::FILE* f = std::fopen(s.count_file, "w");  // NOLINT(cppcoreguidelines-owning-memory)
  if (f == nullptr) return;
  const unsigned long long n = s.reached.load();
  (void)std::fprintf(f, "%llu\n", n);
  // also here, not only on stderr: a program may have its stderr elsewhere at that moment
  if (const char* name = s.failed.load()) (void)std::fprintf(f, "failed %llu %s\n", s.target, name);
  for (std::size_t i = 0; i < n && i < max_named; ++i) {
    const char* name = s.names[i].load();
    (void)std::fprintf(f, "%zu %s\n", i + 1, name != nullptr ? name : "?");
  }
  for (std::size_t k = 0; k < s.live.size(); ++k) {
    const long n_live = s.live[k].load();
    if (n_live != 0) (void)std::fprintf(f, "live %s %ld\n", object_names[k], n_live);
  }
  (void)std::fclose(f);
}

}  // namespace

bool enabled() noexcept { return read_environment().on; }

void note_object(object kind, int delta) noexcept {
  read_environment().live[static_cast<std::size_t>(kind)] += delta;
}

bool fail_here(const char* where) noexcept {
  state& s = read_environment();
  if (!s.on) return false;
  const unsigned long long n = ++s.reached;
  if (n <= max_named) s.names[n - 1].store(where);
  if (n != s.target) return false;
  s.failed.store(where);
  (void)std::fprintf(stderr, "arpma fault injection: failing point %llu (%s)\n", n, where);
  return true;
}

}  // namespace arpma::fault

#endif

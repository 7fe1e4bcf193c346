// rpma_conn_req_new throughput and event fds on the chosen provider (soft on
// loopback by default; ARPMA_PROVIDER=verbs ARPMA_TEST_ADDR=... for rdma-core):
// many requests in flight on one io_context (shared event channel) against
// the baseline of librpma's shape, one blocking request at a time with an
// event channel each. Prints Google Benchmark's table, then the ratios.
#include "arpma/conn_req.hpp"
#include "arpma/peer.hpp"

#include <benchmark/benchmark.h>
#include <boost/asio/io_context.hpp>

#include <dirent.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace {

// ARPMA_TEST_ADDR picks the target (e.g. $RXE_VM_IP in the Soft-RoCE guest).
const std::string& target() {
  static const std::string addr = [] {
    const char* env = std::getenv("ARPMA_TEST_ADDR");  // NOLINT(concurrency-mt-unsafe)
    return std::string(env != nullptr && *env != '\0' ? env : "127.0.0.1");
  }();
  return addr;
}

const arpma::peer& the_peer() {
  static const arpma::peer peer = [] {
    auto dev = arpma::get_ibv_context(target(), arpma::ibv_context_type::remote);
    if (!dev) throw std::system_error(dev.error(), "device");
    return arpma::peer::create(dev.value()).value();
  }();
  return peer;
}

int open_fds() {
  int count = 0;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    while (::readdir(dir) != nullptr) ++count;
    ::closedir(dir);
  }
  return count;
}

// N requests in flight at once on one loop; counts the fds they hold.
void in_flight_on_one_loop(benchmark::State& state) {
  const auto n = static_cast<int>(state.range(0));
  const auto& peer = the_peer();
  double fds = 0;
  for (auto _ : state) {
    boost::asio::io_context io;
    std::vector<arpma::conn_req> held;
    held.reserve(static_cast<std::size_t>(n));
    const int before = open_fds();
    for (int i = 0; i < n; ++i)
      arpma::async_conn_req_new(io.get_executor(), peer, target(), "7204", arpma::conn_cfg{},
                                [&held](std::error_code ec, arpma::conn_req req) {
                                  if (!ec) held.push_back(std::move(req));
                                });
    io.run();
    fds = open_fds() - before;
    if (static_cast<int>(held.size()) != n) state.SkipWithError("a request failed");
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["fds_per_req"] = fds / n;
}

// librpma's shape: one blocking request after another, each on its own channel.
void blocking_one_at_a_time(benchmark::State& state) {
  const auto n = static_cast<int>(state.range(0));
  const auto& peer = the_peer();
  double fds = 0;
  for (auto _ : state) {
    std::vector<arpma::conn_req> held;
    held.reserve(static_cast<std::size_t>(n));
    const int before = open_fds();
    for (int i = 0; i < n; ++i) {
      auto req = arpma::conn_req_new(peer, target(), "7204");
      if (!req) {
        state.SkipWithError(req.error().message().c_str());
        break;
      }
      held.push_back(std::move(req).value());
    }
    fds = open_fds() - before;
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["fds_per_req"] = fds / n;
}

BENCHMARK(in_flight_on_one_loop)->Arg(1)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK(blocking_one_at_a_time)->Arg(1)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);

// Console output as usual, plus the runs kept for the ratios.
class keeping_reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& run : runs) {
      const auto it = run.counters.find("items_per_second");
      if (it != run.counters.end()) rate[run.benchmark_name()] = it->second.value;
    }
  }
  std::map<std::string, double> rate;
};

}  // namespace

int main(int argc, char** argv) {
  // Each held request keeps a completion channel (and, blocking, an event
  // channel) open: 1000 of them need more than the usual 1024 fds.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0) {
    files.rlim_cur = files.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &files);
  }
  benchmark::Initialize(&argc, argv);
  keeping_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("\nrequests/s, in flight on one loop vs blocking one at a time (same run):\n");
  for (const char* n : {"1", "100", "1000"}) {
    const auto a = reporter.rate.find(std::string("in_flight_on_one_loop/") + n);
    const auto b = reporter.rate.find(std::string("blocking_one_at_a_time/") + n);
    if (a == reporter.rate.end() || b == reporter.rate.end() || b->second <= 0) continue;
    std::printf("  N=%-5s %12.0f vs %12.0f  ratio %.2f\n", n, a->second, b->second,
                a->second / b->second);
  }
  benchmark::Shutdown();
  return 0;
}

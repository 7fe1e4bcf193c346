// What arpma itself costs per 64 B RDMA write (post, then its completion),
// against the raw provider calls underneath, in one run (Google Benchmark,
// repetitions interleaved at random, medians):
//
//   raw_post_poll  provider post_send + poll_cq spin (the baseline)
//   c_busy         rpma_write + rpma_cq_get_wc spin
//   c_fd           rpma_write + rpma_cq_wait + rpma_cq_get_wc
//   cxx_post_poll  connection::post_write + cq::poll spin
//   coawait_busy   co_await conn.async_write(..., use_awaitable), busy-poll 1 ms
//   coawait_fd     the same in fd mode
//   callback_busy  a handler that starts the next write, with an associated
//   callback_fd    allocator (one block it reuses), busy-poll / fd mode
//   empty_poll_raw one poll_cq of an empty CQ (the baseline of the next two)
//   empty_poll_c   one rpma_cq_get_wc of it (RPMA_E_NO_COMPLETION)
//   empty_poll_cxx one cq::poll of it
//
// on two providers: `instant` (test/support/instant_provider.hpp: every work
// request completes into its CQ at once, in memory, so only arpma's own cost
// is left) and `soft` over loopback (a C-API server thread accepts). Every
// case reports ns per operation, the ratio to raw_post_poll on the same
// provider, and heap allocations per operation (a replaced global operator
// new with thread-local counters) on the application's thread and on every
// other thread (the soft provider's, the server's) apart. Warm-up operations
// come before the counted ones. Bounded: Google Benchmark's iteration count.
//
//   overhead_bench [--benchmark_min_time=0.2] [--benchmark_repetitions=5]
#include "arpma/conn_req.hpp"
#include "arpma/connection.hpp"
#include "arpma/cq.hpp"
#include "arpma/mr.hpp"
#include "arpma/peer.hpp"
#include "c_server.hpp"
#include "core/conn_state.hpp"
#include "core/mr_state.hpp"
#include "support/block_allocator.hpp"
#include "support/counting_alloc.hpp"
#include "support/instant_provider.hpp"

#include <librpma.h>

#include <benchmark/benchmark.h>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace asio = boost::asio;
constexpr std::size_t message = 64;
constexpr int warmup = 1000;

void check(int rc, const char* what) {
  if (rc != 0) {
    std::fprintf(stderr, "overhead_bench: %s: %s\n", what, rpma_err_2str(rc));
    std::exit(1);  // NOLINT(concurrency-mt-unsafe): a benchmark that cannot run stops
  }
}
void check(const std::error_code& ec, const char* what) {
  if (ec) {
    std::fprintf(stderr, "overhead_bench: %s: %s\n", what, ec.message().c_str());
    std::exit(1);  // NOLINT(concurrency-mt-unsafe)
  }
}

// Counts from here to stop(): allocations per operation, apart per thread.
class allocation_meter {
 public:
  allocation_meter()
      : mine_(arpma::test::thread_allocations()), all_(arpma::test::all_allocations()) {}
  void report(benchmark::State& state) const {
    const auto mine = arpma::test::thread_allocations() - mine_;
    const auto others = arpma::test::all_allocations() - all_ - mine;
    const auto ops = static_cast<double>(state.iterations());
    state.counters["allocs_app"] = static_cast<double>(mine) / ops;
    state.counters["allocs_other"] = static_cast<double>(others) / ops;
  }

 private:
  std::uint64_t mine_;
  std::uint64_t all_;
};

// ---- one provider's connections -------------------------------------------------

struct world {
  std::string name;
  arpma::provider::provider* prov = nullptr;
  asio::io_context io;
  std::optional<arpma::peer> peer;
  std::vector<char> mine = std::vector<char>(4096, 'x');
  std::vector<char> theirs = std::vector<char>(4096, 0);
  std::optional<arpma::local_mr> mr;
  std::optional<arpma::remote_mr> remote;
  arpma::connection conn;
  // The C flavour's connection, region and CQ.
  rpma_peer* cpeer = nullptr;
  rpma_conn* cconn = nullptr;
  rpma_mr_local* cmr = nullptr;
  rpma_mr_remote* cremote = nullptr;
  rpma_cq* ccq = nullptr;
};

void connect_cxx(world& w, const std::string& addr, const std::string& port) {
  asio::co_spawn(
      w.io,
      [&]() -> asio::awaitable<void> {
        auto req = co_await arpma::async_conn_req_new(*w.peer, addr, port, {}, asio::use_awaitable);
        w.conn = co_await req.async_connect({}, asio::use_awaitable);
      },
      [](const std::exception_ptr& e) {
        if (e) std::rethrow_exception(e);
      });
  w.io.run();
  w.io.restart();
}

void connect_c(world& w, ibv_context* dev, const std::string& addr, const std::string& port) {
  check(rpma_peer_new(dev, &w.cpeer), "rpma_peer_new");
  rpma_conn_req* req = nullptr;
  check(rpma_conn_req_new(w.cpeer, addr.c_str(), port.c_str(), nullptr, &req), "conn_req_new");
  check(rpma_conn_req_connect(&req, nullptr, &w.cconn), "connect");
  rpma_conn_event ev = RPMA_CONN_UNDEFINED;
  check(rpma_conn_next_event(w.cconn, &ev), "established");
  check(rpma_mr_reg(w.cpeer, w.mine.data(), w.mine.size(), RPMA_MR_USAGE_WRITE_SRC, &w.cmr),
        "mr_reg");
  check(rpma_conn_get_cq(w.cconn, &w.ccq), "get_cq");
}

void register_regions(world& w, const arpma::mr_descriptor& target) {
  auto mr = arpma::local_mr::reg(*w.peer, w.mine.data(), w.mine.size(),
                                 arpma::mr_usage::write_src | arpma::mr_usage::write_dst);
  if (!mr) check(mr.error(), "local_mr::reg");
  w.mr.emplace(std::move(mr).value());
  w.remote.emplace(arpma::remote_mr::from_descriptor(target).value());
  check(rpma_mr_remote_from_descriptor(target.data(), target.size(), &w.cremote),
        "remote_from_descriptor");
}

std::unique_ptr<world> instant;
std::unique_ptr<world> soft;
std::unique_ptr<arpma::test::instant_provider> instant_prov;
std::unique_ptr<arpma::provider::scoped_override> instant_override;

// The soft provider's server (bench/c_server.hpp) accepts the C and the C++
// connection, then waits until both are closed.
std::thread soft_server;

rpma_peer* server_peer = nullptr;

void make_soft() {
  ::setenv("ARPMA_PROVIDER", "soft", 1);  // NOLINT(concurrency-mt-unsafe): before any thread
  soft = std::make_unique<world>();
  soft->name = "soft";
  soft->prov = &arpma::provider::default_provider();
  const std::string addr = "127.0.0.1";
  std::string port;
  {
    asio::ip::tcp::acceptor probe(soft->io,
                                  asio::ip::tcp::endpoint(asio::ip::make_address(addr), 0));
    port = std::to_string(probe.local_endpoint().port());
  }
  ibv_context* dev = nullptr;
  check(rpma_utils_get_ibv_context(addr.c_str(), RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev), "device");
  check(rpma_peer_new(dev, &server_peer), "server peer");
  std::atomic<bool> listening{false};
  soft_server = std::thread([addr, port, &listening] {
    arpma::bench::serve_connections(server_peer, addr.c_str(), port.c_str(), 2, 4096, listening);
  });
  while (!listening) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  soft->peer.emplace(arpma::peer::create(dev).value());
  connect_cxx(*soft, addr, port);
  const auto pdata = soft->conn.private_data();
  arpma::mr_descriptor desc{};
  std::copy_n(pdata.begin(), desc.size(), desc.begin());
  register_regions(*soft, desc);
  connect_c(*soft, dev, addr, port);
}

void make_instant() {
  instant_prov = std::make_unique<arpma::test::instant_provider>();
  instant_override = std::make_unique<arpma::provider::scoped_override>(*instant_prov);
  instant = std::make_unique<world>();
  instant->name = "instant";
  instant->prov = instant_prov.get();
  ibv_context* dev = nullptr;
  check(rpma_utils_get_ibv_context("192.0.2.1", RPMA_UTIL_IBV_CONTEXT_REMOTE, &dev), "device");
  instant->peer.emplace(arpma::peer::create(dev).value());
  connect_cxx(*instant, "192.0.2.1", "7204");
  arpma::local_mr target_mr =
      arpma::local_mr::reg(*instant->peer, instant->theirs.data(), instant->theirs.size(),
                           arpma::mr_usage::write_dst)
          .value();
  register_regions(*instant, target_mr.descriptor());
  connect_c(*instant, dev, "192.0.2.1", "7204");
}

void close_world(world& w) {
  (void)rpma_mr_dereg(&w.cmr);
  (void)rpma_mr_remote_delete(&w.cremote);
  (void)rpma_conn_disconnect(w.cconn);
  rpma_conn_event ev = RPMA_CONN_UNDEFINED;
  (void)rpma_conn_next_event(w.cconn, &ev);
  (void)rpma_conn_delete(&w.cconn);
  (void)rpma_peer_delete(&w.cpeer);
  (void)w.conn.disconnect();
  (void)w.conn.close();
  w.mr.reset();
  w.peer.reset();
}

world* current = nullptr;  // the provider the running case is on
world& world_of(const benchmark::State&) { return *current; }

// ---- the cases ------------------------------------------------------------------

// The raw provider calls underneath one write: post_send, then spin on
// poll_cq until its completion is there.
class raw_write {
 public:
  explicit raw_write(world& w) : w_(w), st_(arpma::detail::access::state(w.conn)) {
    wr_.opcode = arpma::provider::wr_opcode::rdma_write;
    wr_.local = arpma::detail::access::state(*w.mr)->slice(0, message);
    wr_.remote_addr = w.remote->addr();
    wr_.rkey = w.remote->rkey();
  }
  void operator()() {
    check(w_.prov->post_send(st_->id, wr_), "post_send");
    while (w_.prov->poll_cq(st_->cq.cq, wc_).value() == 0) {
    }
  }

 private:
  world& w_;
  arpma::detail::conn_state* st_;
  arpma::provider::send_wr wr_;
  std::array<arpma::provider::work_completion, 1> wc_{};
};

void raw_post_poll(benchmark::State& state) {
  raw_write one(world_of(state));
  for (int i = 0; i < warmup; ++i) one();
  const allocation_meter meter;
  for (auto _ : state) one();
  meter.report(state);
}

void c_path(benchmark::State& state, bool busy) {
  auto& w = world_of(state);
  auto one = [&] {
    check(rpma_write(w.cconn, w.cremote, 0, w.cmr, 0, message, RPMA_F_COMPLETION_ALWAYS, nullptr),
          "rpma_write");
    ibv_wc wc{};
    for (;;) {
      const int rc = rpma_cq_get_wc(w.ccq, 1, &wc, nullptr);
      if (rc == 0) break;
      if (rc != RPMA_E_NO_COMPLETION) check(rc, "get_wc");
      if (!busy) check(rpma_cq_wait(w.ccq), "cq_wait");
    }
  };
  for (int i = 0; i < warmup; ++i) one();
  const allocation_meter meter;
  for (auto _ : state) one();
  meter.report(state);
}
void c_busy(benchmark::State& state) { c_path(state, true); }
void c_fd(benchmark::State& state) { c_path(state, false); }

void cxx_post_poll(benchmark::State& state) {
  auto& w = world_of(state);
  auto cq = w.conn.completion_queue();
  std::array<arpma::completion, 1> wc{};
  auto one = [&] {
    check(w.conn.post_write(arpma::buffer(*w.remote, 0, message).value(),
                            arpma::buffer(*w.mr, 0, message).value(), 1),
          "post_write");
    while (cq.poll(wc).value() == 0) {
    }
  };
  for (int i = 0; i < warmup; ++i) one();
  const allocation_meter meter;
  for (auto _ : state) one();
  meter.report(state);
}

void coawait(benchmark::State& state, bool busy) {
  auto& w = world_of(state);
  w.conn.set_busy_poll(std::chrono::microseconds(busy ? 1000 : 0));
  asio::co_spawn(
      w.io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < warmup; ++i)
          co_await w.conn.async_write(arpma::buffer(*w.remote, 0, message).value(),
                                      arpma::buffer(*w.mr, 0, message).value(),
                                      asio::use_awaitable);
        const allocation_meter meter;
        while (state.KeepRunning())
          co_await w.conn.async_write(arpma::buffer(*w.remote, 0, message).value(),
                                      arpma::buffer(*w.mr, 0, message).value(),
                                      asio::use_awaitable);
        meter.report(state);
      },
      [](const std::exception_ptr& e) {
        if (e) std::rethrow_exception(e);
      });
  w.io.run();
  w.io.restart();
}
void coawait_busy(benchmark::State& state) { coawait(state, true); }

// What Asio's own simplest co_await operation costs, for reference: raw post
// + poll, then one coroutine suspend and resume through the io_context
// (co_await asio::post). (co_await asio::dispatch on the loop's own thread
// resumes inside its initiation, nesting a frame per iteration: no loop.)
void asio_post_reference(benchmark::State& state) {
  auto& w = world_of(state);
  raw_write post_poll(w);
  asio::co_spawn(
      w.io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < warmup; ++i) {
          post_poll();
          co_await asio::post(w.io, asio::use_awaitable);
        }
        const allocation_meter meter;
        while (state.KeepRunning()) {
          post_poll();
          co_await asio::post(w.io, asio::use_awaitable);
        }
        meter.report(state);
      },
      [](const std::exception_ptr& e) {
        if (e) std::rethrow_exception(e);
      });
  w.io.run();
  w.io.restart();
}
void coawait_fd(benchmark::State& state) { coawait(state, false); }

using arpma::test::block_allocator;
using arpma::test::one_block;

struct callback_loop {
  callback_loop(world& on, benchmark::State& s) : w(on), state(s) {}
  world& w;
  benchmark::State& state;
  one_block storage{};
  int left_warm = warmup;
  std::optional<allocation_meter> meter;

  void start() {
    w.conn.async_write(arpma::buffer(*w.remote, 0, message).value(),
                       arpma::buffer(*w.mr, 0, message).value(),
                       asio::bind_allocator(block_allocator<void>(&storage),
                                            [this](arpma::error_code ec, arpma::completion) {
                                              check(ec, "async_write");
                                              next();
                                            }));
  }
  void next() {
    if (left_warm > 0 && --left_warm == 0) meter.emplace();
    if (left_warm > 0 || state.KeepRunning()) return start();
    meter->report(state);
  }
};

void callback(benchmark::State& state, bool busy) {
  auto& w = world_of(state);
  w.conn.set_busy_poll(std::chrono::microseconds(busy ? 1000 : 0));
  callback_loop loop(w, state);
  loop.start();
  w.io.run();
  w.io.restart();
}
void callback_busy(benchmark::State& state) { callback(state, true); }
void callback_fd(benchmark::State& state) { callback(state, false); }

// An empty CQ polled: what a spin pays for each turn while it waits. The C
// API logs at debug level at every empty rpma_cq_get_wc, as librpma does; a
// message below the threshold has to cost nothing.
void empty_poll_raw(benchmark::State& state) {
  auto& w = world_of(state);
  auto* st = arpma::detail::access::state(w.conn);
  std::array<arpma::provider::work_completion, 1> wc{};
  const allocation_meter meter;
  for (auto _ : state)
    if (w.prov->poll_cq(st->cq.cq, wc).value() != 0) check(RPMA_E_PROVIDER, "empty poll_cq");
  meter.report(state);
}

void empty_poll_c(benchmark::State& state) {
  auto& w = world_of(state);
  ibv_wc wc{};
  const allocation_meter meter;
  for (auto _ : state)
    if (const int rc = rpma_cq_get_wc(w.ccq, 1, &wc, nullptr); rc != RPMA_E_NO_COMPLETION)
      check(rc == 0 ? RPMA_E_PROVIDER : rc, "empty get_wc");
  meter.report(state);
}

void empty_poll_cxx(benchmark::State& state) {
  auto cq = world_of(state).conn.completion_queue();
  std::array<arpma::completion, 1> wc{};
  const allocation_meter meter;
  for (auto _ : state)
    if (cq.poll(wc).value() != 0) check(RPMA_E_PROVIDER, "empty cq::poll");
  meter.report(state);
}

// ---- the table ------------------------------------------------------------------

// Prints, after Google Benchmark's own lines, every case's median with its
// ratio to raw_post_poll (empty polls: to empty_poll_raw) on the same provider.
class ratio_reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& r : runs) {
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "median") continue;
      auto name = r.run_name.str();
      if (const auto at = name.find("/real_time"); at != std::string::npos) name.erase(at);
      auto& fig = rows_[name];
      fig.ns = r.GetAdjustedRealTime();
      const auto get = [&](const char* c) {
        const auto it = r.counters.find(c);
        return it == r.counters.end() ? 0.0 : it->second.value;
      };
      fig.app = get("allocs_app");
      fig.other = get("allocs_other");
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\n%-28s %10s %8s %12s %14s\n", "case (median)", "ns/op", "ratio", "allocs/op app",
                "allocs/op other");
    for (const auto& [name, fig] : rows_) {
      const auto slash = name.find('/');
      const auto provider = name.substr(slash + 1);
      const bool empty = name.starts_with("empty_poll_");
      const auto base = rows_.find((empty ? "empty_poll_raw/" : "raw_post_poll/") + provider);
      const double ratio = base != rows_.end() ? fig.ns / base->second.ns : 0.0;
      std::printf("%-28s %10.1f %8.2f %12.2f %14.2f\n", name.c_str(), fig.ns, ratio, fig.app,
                  fig.other);
    }
  }

 private:
  struct figures {
    double ns = 0;
    double app = 0;
    double other = 0;
  };
  std::map<std::string, figures> rows_;
};

void register_all() {
  using fn = void (*)(benchmark::State&);
  const std::pair<const char*, fn> cases[] = {
      {"raw_post_poll", raw_post_poll},
      {"asio_post", asio_post_reference},
      {"c_busy", c_busy},
      {"c_fd", c_fd},
      {"cxx_post_poll", cxx_post_poll},
      {"coawait_busy", coawait_busy},
      {"coawait_fd", coawait_fd},
      {"callback_busy", callback_busy},
      {"callback_fd", callback_fd},
      {"empty_poll_raw", empty_poll_raw},
      {"empty_poll_c", empty_poll_c},
      {"empty_poll_cxx", empty_poll_cxx},
  };
  for (world* w : {instant.get(), soft.get()})
    for (const auto& [name, f] : cases)
      benchmark::RegisterBenchmark((std::string(name) + "/" + w->name).c_str(),
                                   [w, f = f](benchmark::State& state) {
                                     current = w;
                                     f(state);
                                   })
          ->UseRealTime();
}

}  // namespace

int main(int argc, char** argv) {
  // Defaults an engineer would pick: 5 repetitions, interleaved, medians.
  std::vector<char*> args(argv, argv + argc);
  std::string reps = "--benchmark_repetitions=5";
  std::string interleave = "--benchmark_enable_random_interleaving=true";
  std::string aggregates = "--benchmark_report_aggregates_only=true";
  args.insert(args.begin() + 1, {reps.data(), interleave.data(), aggregates.data()});
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  make_soft();
  make_instant();
  register_all();
  ratio_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  close_world(*instant);
  close_world(*soft);
  soft_server.join();
  (void)rpma_peer_delete(&server_peer);
  instant.reset();
  soft.reset();
  instant_override.reset();
  benchmark::Shutdown();
  return 0;
}

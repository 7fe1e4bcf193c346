// Micro-benchmarks of the hot paths (Google Benchmark), each on one thread:
//
// post_write/*        posting one 64 B RDMA write on a soft-provider connection
//                     (loopback), through the C path (rpma_write), the C++
//                     non-waiting call (connection::post_write) and the core
//                     post path both share (detail::post_write). Each
//                     iteration posts a batch of 8 and only the posts are
//                     timed (manual time); the 8 completions are reaped
//                     outside the timed region, so the queue never fills.
//                     "per_post_ns" is the mean per work request. What is
//                     measured: argument and range checks, the work request,
//                     and the soft provider's post, which writes the frame to
//                     its TCP socket from the caller's thread (sendmsg(2) on
//                     loopback: the "doorbell", and most of the figure). The
//                     C / C++ / core differences are the wrappers' cost.
// dispatch_completion 8 async_write operations (callbacks) are started and
//                     left to complete in the CQ (untimed: the completion
//                     channel fires, then 300 us more so all 8 are there);
//                     the timed part is io_context::run until the 8 handlers
//                     have run: the reactor's wake-up, the cq_dispatcher's
//                     drain (read and acknowledge the channel event, re-arm,
//                     poll the CQ) and one completion → its operation's
//                     handler, per completion ("per_completion_ns").
// cm_event_demux/N    N cm ids on one shared cm_channel (the fake provider:
//                     real eventfds, events queued in memory, every call
//                     logged in a vector, which it costs), 8 events queued
//                     for 8 of them (untimed); timed: the loop's wake-up and
//                     the channel's drain handing each event to the sink of
//                     its id's token ("per_event_ns"). Routing is checked:
//                     an event at the wrong sink stops the benchmark.
// fake_get_cm_event/N the baseline, same run: the same events read straight
//                     from the fake provider (no loop, no channel). The fake
//                     finds an event's id by a linear search of its live ids,
//                     so its cost grows with N; core's share is the
//                     difference (core routes by a hash map: flat in N).
//
//   hotpath_bench [--benchmark_out=FILE --benchmark_out_format=json]
#include "arpma/conn_req.hpp"
#include "arpma/connection.hpp"
#include "arpma/cq.hpp"
#include "arpma/mr.hpp"
#include "arpma/peer.hpp"
#include "c_server.hpp"
#include "core/cm_channel.hpp"
#include "core/conn_state.hpp"
#include "core/post.hpp"
#include "fake/fake_provider.hpp"

#include <librpma.h>

#include <benchmark/benchmark.h>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <poll.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;

namespace {

// Below librpma's default queue sizes (sq_size = cq_size = 10), which the connections use.
constexpr int batch = 8;
constexpr std::size_t message = 64;
constexpr int server_connections = 3;

void check(int rc, const char* what) {
  if (rc != 0) {
    std::fprintf(stderr, "hotpath_bench: %s: %s\n", what, rpma_err_2str(rc));
    std::exit(1);  // NOLINT(concurrency-mt-unsafe): a benchmark that cannot run stops
  }
}

/// A server thread (C API) that accepts `server_connections` connections
/// with its region's descriptor as private data and keeps them until the
/// clients disconnect; three client connections to it: one C, two C++.
class soft_setup {
 public:
  soft_setup() {
    check(rpma_utils_get_ibv_context(addr_, RPMA_UTIL_IBV_CONTEXT_REMOTE, &dev_), "device");
    check(rpma_peer_new(dev_, &cpeer_), "peer");
    peer_.emplace(arpma::peer::create(dev_).value());
    {
      asio::io_context probe_io;
      asio::ip::tcp::acceptor probe(probe_io,
                                    asio::ip::tcp::endpoint(asio::ip::make_address(addr_), 0));
      port_ = std::to_string(probe.local_endpoint().port());
    }
    server_ = std::thread([this] { serve(); });
    while (!listening_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    connect_c();
    post_conn_ = connect_cxx(post_io_);
    async_conn_ = connect_cxx(io_);
    local_.assign(batch * message, 'x');
    cxx_mr_ = arpma::local_mr::reg(*peer_, local_.data(), local_.size(), arpma::mr_usage::write_src)
                  .value();
    check(rpma_mr_reg(cpeer_, local_.data(), local_.size(), RPMA_MR_USAGE_WRITE_SRC, &c_mr_),
          "mr_reg");
    remote_ = arpma::remote_mr::from_descriptor(post_conn_.private_data()).value();
  }
  soft_setup(const soft_setup&) = delete;
  soft_setup& operator=(const soft_setup&) = delete;
  ~soft_setup() {
    (void)rpma_mr_dereg(&c_mr_);
    (void)rpma_mr_remote_delete(&c_remote_);
    rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    (void)rpma_conn_disconnect(c_conn_);
    (void)rpma_conn_next_event(c_conn_, &ev);
    (void)rpma_conn_delete(&c_conn_);
    for (auto* c : {&post_conn_, &async_conn_}) {
      asio::io_context& io = c == &post_conn_ ? post_io_ : io_;
      c->async_disconnect([](std::error_code) {});
      io.restart();
      io.run_for(std::chrono::seconds(5));
      (void)c->close();
    }
    server_.join();
    (void)cxx_mr_.dereg();
    (void)peer_->close();
    (void)rpma_peer_delete(&cpeer_);
  }

  /// Reaps `n` completions of the C connection.
  void reap_c(int n) {
    rpma_cq* cq = nullptr;
    check(rpma_conn_get_cq(c_conn_, &cq), "get_cq");
    for (int got = 0; got < n;) {
      ibv_wc wc[batch];
      int count = 0;
      const int rc = rpma_cq_get_wc(cq, batch, wc, &count);
      if (rc == RPMA_E_NO_COMPLETION) continue;
      check(rc, "get_wc");
      got += count;
    }
  }
  /// Reaps `n` completions of the C++ post connection.
  void reap_cxx(int n) {
    auto cq = post_conn_.completion_queue();
    for (int got = 0; got < n;) {
      std::array<arpma::completion, batch> wc{};
      auto r = cq.poll(wc);
      if (!r) check(RPMA_E_PROVIDER, "poll");
      got += static_cast<int>(r.value());
    }
  }

  rpma_conn* c_conn_ = nullptr;
  rpma_mr_local* c_mr_ = nullptr;
  rpma_mr_remote* c_remote_ = nullptr;
  asio::io_context post_io_;
  asio::io_context io_;
  arpma::connection post_conn_;
  arpma::connection async_conn_;
  arpma::local_mr cxx_mr_;
  arpma::remote_mr remote_;
  std::vector<char> local_;

 private:
  void serve() {
    arpma::bench::serve_connections(cpeer_, addr_, port_.c_str(), server_connections,
                                    batch * message, listening_);
  }

  void connect_c() {
    rpma_conn_req* req = nullptr;
    check(rpma_conn_req_new(cpeer_, addr_, port_.c_str(), nullptr, &req), "conn_req_new");
    check(rpma_conn_req_connect(&req, nullptr, &c_conn_), "connect");
    rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    check(rpma_conn_next_event(c_conn_, &ev), "established");
    rpma_conn_private_data pdata{};
    check(rpma_conn_get_private_data(c_conn_, &pdata), "private data");
    check(rpma_mr_remote_from_descriptor(pdata.ptr, pdata.len, &c_remote_), "remote");
  }

  /// A C++ connection that lives on `io`.
  arpma::connection connect_cxx(asio::io_context& io) {
    arpma::connection conn;
    arpma::async_conn_req_new(
        io.get_executor(), *peer_, addr_, port_, {},
        [&io, &conn](std::error_code ec, arpma::conn_req req) {
          if (ec) check(RPMA_E_PROVIDER, "conn_req_new (C++)");
          req.async_connect(
              {}, asio::bind_executor(io, [&conn](std::error_code ec2, arpma::connection c) {
                if (ec2) check(RPMA_E_PROVIDER, "connect (C++)");
                conn = std::move(c);
              }));
        });
    io.run();
    io.restart();
    return conn;
  }

  const char* addr_ = "127.0.0.1";
  ibv_context* dev_ = nullptr;
  rpma_peer* cpeer_ = nullptr;
  std::optional<arpma::peer> peer_;
  std::string port_;
  std::atomic<bool> listening_{false};
  std::thread server_;
};

// Made on first use, destroyed by main() before exit (static destruction
// would run after arpma's own statics may be gone).
std::unique_ptr<soft_setup> soft_instance;

soft_setup& soft() {
  if (!soft_instance) soft_instance = std::make_unique<soft_setup>();
  return *soft_instance;
}

/// Runs `post(i)` for a batch, timing only the posts; `reap` outside.
template <class Post, class Reap>
void post_batches(benchmark::State& state, Post post, Reap reap) {
  double total_ns = 0;
  std::int64_t posts = 0;
  for (auto _ : state) {
    const auto t0 = clock_type::now();
    for (int i = 0; i < batch; ++i) post(i);
    const auto t1 = clock_type::now();
    reap(batch);
    const double s = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(s);
    total_ns += s * 1e9;
    posts += batch;
  }
  state.SetItemsProcessed(posts);
  state.counters["per_post_ns"] = posts > 0 ? total_ns / static_cast<double>(posts) : 0;
}

void post_write_c(benchmark::State& state) {
  auto& s = soft();
  post_batches(
      state,
      [&s](int i) {
        check(rpma_write(s.c_conn_, s.c_remote_, static_cast<std::size_t>(i) * message, s.c_mr_,
                         static_cast<std::size_t>(i) * message, message, RPMA_F_COMPLETION_ALWAYS,
                         nullptr),
              "rpma_write");
      },
      [&s](int n) { s.reap_c(n); });
}

void post_write_cxx(benchmark::State& state) {
  auto& s = soft();
  post_batches(
      state,
      [&s](int i) {
        const auto off = static_cast<std::size_t>(i) * message;
        if (s.post_conn_.post_write(arpma::buffer(s.remote_, off, message).value(),
                                    arpma::buffer(s.cxx_mr_, off, message).value(),
                                    static_cast<std::uint64_t>(i)))
          check(RPMA_E_PROVIDER, "post_write");
      },
      [&s](int n) { s.reap_cxx(n); });
}

void post_write_core(benchmark::State& state) {
  auto& s = soft();
  auto& conn = *arpma::detail::access::state(s.post_conn_);
  const auto* mr = arpma::detail::access::state(s.cxx_mr_);
  post_batches(
      state,
      [&](int i) {
        const auto off = static_cast<std::size_t>(i) * message;
        if (arpma::detail::post_write(conn, &s.remote_, off, mr, off, message, std::nullopt,
                                      {true, static_cast<std::uint64_t>(i)}))
          check(RPMA_E_PROVIDER, "detail::post_write");
      },
      [&s](int n) { s.reap_cxx(n); });
}

void dispatch_completion(benchmark::State& state) {
  auto& s = soft();
  auto& io = s.io_;
  const auto& st = *arpma::detail::access::state(s.async_conn_);
  const int fd = st.prov().comp_channel_fd(st.cq.own_channel);
  double total_ns = 0;
  std::int64_t completions = 0;
  int done = 0;
  int failed = 0;
  for (auto _ : state) {
    done = 0;
    for (int i = 0; i < batch; ++i) {
      const auto off = static_cast<std::size_t>(i) * message;
      s.async_conn_.async_write(arpma::buffer(s.remote_, off, message).value(),
                                arpma::buffer(s.cxx_mr_, off, message).value(),
                                [&](std::error_code ec, arpma::completion) {
                                  ++done;
                                  if (ec) ++failed;
                                });
    }
    pollfd ready{fd, POLLIN, 0};
    (void)::poll(&ready, 1, 1000);
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    const auto t0 = clock_type::now();
    while (done < batch) {
      io.restart();
      io.run_one();
    }
    const double sec = std::chrono::duration<double>(clock_type::now() - t0).count();
    state.SetIterationTime(sec);
    total_ns += sec * 1e9;
    completions += batch;
  }
  if (failed > 0) state.SkipWithError("a write failed");
  state.SetItemsProcessed(completions);
  state.counters["per_completion_ns"] =
      completions > 0 ? total_ns / static_cast<double>(completions) : 0;
}

/// Counts the events it gets; an event for another id is a routing error.
class counting_sink final : public arpma::detail::cm_event_sink {
 public:
  counting_sink(arpma::provider::cm_id* id, int& count, int& misrouted)
      : id_(id), count_(count), misrouted_(misrouted) {}
  void on_cm_event(const arpma::provider::cm_event& event) override {
    ++count_;
    if (event.id != id_) ++misrouted_;
  }

 private:
  arpma::provider::cm_id* id_;
  int& count_;
  int& misrouted_;
};

/// `through_channel`: the loop and core's cm_channel read and route the
/// events; otherwise they are read from the provider directly (baseline).
void cm_events(benchmark::State& state, bool through_channel) {
  const auto ids = static_cast<std::size_t>(state.range(0));
  arpma::test::fake_provider fake;
  asio::io_context io;
  auto channel = arpma::detail::cm_channel::create(fake, io.get_executor()).value();
  int received = 0;
  int misrouted = 0;
  std::vector<arpma::provider::cm_id*> native;
  std::vector<std::unique_ptr<counting_sink>> sinks;
  for (std::size_t i = 0; i < ids; ++i) {
    const auto token = channel->reserve_token();
    auto* id = fake.create_id(channel->native(), token).value();
    native.push_back(id);
    sinks.push_back(std::make_unique<counting_sink>(id, received, misrouted));
    channel->attach(token, sinks.back().get());
  }
  if (through_channel) channel->hold();
  double total_ns = 0;
  std::int64_t events = 0;
  std::size_t next = 0;
  for (auto _ : state) {
    received = 0;
    for (int i = 0; i < batch; ++i) {
      next = (next * 7 + 13) % ids;  // spread over the ids, not one after another
      fake.deliver(native[next], arpma::provider::cm_event_type::established);
    }
    (void)fake.take_calls();  // keeps the call log from growing without bound
    const auto t0 = clock_type::now();
    if (through_channel) {
      while (received < batch) io.run_one();
    } else {
      for (arpma::provider::cm_event e; received < batch; ++received)
        if (fake.get_cm_event(channel->native(), e)) state.SkipWithError("get_cm_event");
    }
    const double sec = std::chrono::duration<double>(clock_type::now() - t0).count();
    state.SetIterationTime(sec);
    total_ns += sec * 1e9;
    events += batch;
  }
  if (misrouted > 0) state.SkipWithError("an event reached the wrong sink");
  state.SetItemsProcessed(events);
  state.counters["per_event_ns"] = events > 0 ? total_ns / static_cast<double>(events) : 0;
  if (through_channel) channel->release();
  io.restart();
  io.run_for(std::chrono::milliseconds(10));
  for (std::size_t i = 0; i < ids; ++i) {
    channel->detach(static_cast<std::uint64_t>(i + 1));
    (void)fake.destroy_id(native[i]);
  }
  channel.reset();
}

void cm_event_demux(benchmark::State& state) { cm_events(state, true); }
void fake_get_cm_event(benchmark::State& state) { cm_events(state, false); }

}  // namespace

BENCHMARK(post_write_c)->Name("post_write/c_rpma_write")->UseManualTime();
BENCHMARK(post_write_cxx)->Name("post_write/cxx_post_write")->UseManualTime();
BENCHMARK(post_write_core)->Name("post_write/core_post_write")->UseManualTime();
BENCHMARK(dispatch_completion)->UseManualTime()->Iterations(2000);
BENCHMARK(cm_event_demux)->Arg(1)->Arg(1000)->Arg(10000)->UseManualTime();
BENCHMARK(fake_get_cm_event)->Arg(1)->Arg(1000)->Arg(10000)->UseManualTime();

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  soft_instance.reset();
  return 0;
}

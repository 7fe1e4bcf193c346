#include "client.hpp"

#include "ops.hpp"
#include "progress.hpp"
#include "protocol.hpp"
#include "report.hpp"
#include "setup.hpp"
#include "stats.hpp"

#include <arpma/conn_req.hpp>
#include <arpma/connection.hpp>
#include <arpma/mr.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/this_coro.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <random>

#ifndef ARPMA_PERF_VERSION
#define ARPMA_PERF_VERSION "unknown"
#endif

namespace arpma_perf {
namespace {

using clock_type = std::chrono::steady_clock;

// One size's warm-up or measured operations on every connection.
struct phase {
  std::size_t size = 0;
  std::size_t index = 0;       ///< of the size in the sweep
  std::uint64_t per_conn = 0;  ///< operations per connection; 0: until `end`
  clock_type::time_point end;  ///< with a duration
  bool measured = false;
  histogram hist;
  std::uint64_t done = 0;
  clock_type::time_point last_done;
  double elapsed_s = 0;
  std::error_code error;
  // progress
  std::uint64_t tick_done = 0;
  clock_type::time_point tick_at;
};

class client {
 public:
  client(asio::io_context& io, const arpma::peer& peer, run_report& report)
      : io_(io), peer_(peer), report_(report), opts_(report.opts), signals_(io, SIGINT, SIGTERM) {}

  asio::awaitable<void> run();
  [[nodiscard]] int signal() const { return signal_; }
  /// Stops waiting for signals, so the loop can end also when run() threw.
  void end() { signals_.cancel(); }

 private:
  void wait_signal();
  asio::awaitable<bool> connect_all();
  asio::awaitable<bool> connect_one(link& l, const hello& h);
  asio::awaitable<void> run_size(std::size_t index);
  asio::awaitable<void> run_phase(phase& ph);
  asio::awaitable<void> lane(link& l, phase& ph, std::uint32_t slot);
  void tick(phase& ph, clock_type::time_point start, std::size_t in_flight);
  asio::awaitable<void> disconnect_all();
  [[nodiscard]] bool more(const link& l, const phase& ph) const;

  asio::io_context& io_;
  const arpma::peer& peer_;
  run_report& report_;
  const options& opts_;
  asio::signal_set signals_;
  std::deque<link> links_;  // a deque: lanes hold references while it is filled
  progress_printer progress_;
  bool stop_ = false;
  int signal_ = 0;
};

void client::wait_signal() {
  signals_.async_wait([this](std::error_code ec, int n) {
    if (ec) return;  // the run ended
    if (signal_ != 0) {
      std::fprintf(stderr, "\narpma-perf: second signal, exiting without a summary\n");
      std::_Exit(n == SIGINT ? exit_sigint : exit_sigterm);
    }
    signal_ = n;
    stop_ = true;
    progress_.clear();
    std::fprintf(stderr, "arpma-perf: %s: stopping, draining the operations in flight\n",
                 n == SIGINT ? "SIGINT" : "SIGTERM");
    wait_signal();
  });
}

asio::awaitable<void> client::run() {
  wait_signal();
  if (co_await connect_all()) {
    std::printf("%s", table_header(report_).c_str());
    for (std::size_t i = 0; i < opts_.sizes.size() && !stop_ && report_.error.empty(); ++i)
      co_await run_size(i);
  }
  report_.interrupted = signal_ != 0;
  co_await disconnect_all();
  signals_.cancel();
}

asio::awaitable<bool> client::connect_all() {
  hello h;
  h.op = opts_.op;
  h.test = opts_.test;
  h.mode = opts_.mode;
  h.max_size =
      static_cast<std::uint32_t>(*std::max_element(opts_.sizes.begin(), opts_.sizes.end()));
  h.qd = opts_.qd;
  h.conns = opts_.conns;
  h.run_id = std::random_device{}() ^
             static_cast<std::uint64_t>(clock_type::now().time_since_epoch().count());
  for (std::uint32_t i = 0; i < opts_.conns && !stop_; ++i) {
    link& l = links_.emplace_back();
    if (!co_await connect_one(l, h)) co_return false;
  }
  co_return !stop_;
}

asio::awaitable<bool> client::connect_one(link& l, const hello& h) {
  const auto ex = co_await asio::this_coro::executor;
  deadline dl(ex);
  asio::steady_timer pause(ex);
  const auto give_up = clock_type::now() + connect_retry_limit;
  const auto pdata = encode(h);
  const arpma::conn_cfg cfg = client_cfg(opts_);
  for (;;) {
    auto [ec, req] =
        co_await arpma::async_conn_req_new(peer_, opts_.addr, opts_.port, cfg, dl.arm(quiet_limit));
    dl.disarm();
    std::error_code cec = ec;
    if (!ec) {
      auto [e, conn] = co_await req.async_connect(pdata, dl.arm(quiet_limit));
      dl.disarm();
      cec = e;
      if (!e) l.conn = std::move(conn);
    }
    if (!cec) break;
    const bool refused = cec == std::errc::connection_refused || cec == std::errc::host_unreachable;
    if (!refused || clock_type::now() > give_up || stop_) {
      report_.error = "connecting to " + opts_.addr + ":" + opts_.port + ": " +
                      (dl.expired() ? std::string("nothing heard for 10 s") : cec.message());
      co_return false;
    }
    pause.expires_after(std::chrono::milliseconds(200));
    co_await pause.async_wait(awaitable_tuple);
  }
  report_.error = prepare_link(l, peer_, opts_, h.max_size);
  co_return report_.error.empty();
}

asio::awaitable<void> client::run_size(std::size_t index) {
  const std::size_t size = opts_.sizes[index];
  if (opts_.warmup > 0) {
    phase warm;
    warm.size = size;
    warm.index = index;
    warm.per_conn = opts_.warmup;
    co_await run_phase(warm);
    if (warm.error) {
      report_.error = std::string(to_string(opts_.op)) + " failed in the warm-up of size " +
                      std::to_string(size) + ": " + warm.error.message();
      co_return;
    }
    if (stop_) co_return;
  }
  phase ph;
  ph.size = size;
  ph.index = index;
  ph.per_conn = opts_.iters;
  ph.measured = true;
  co_await run_phase(ph);
  progress_.clear();
  if (ph.error)
    report_.error = std::string(to_string(opts_.op)) + " failed at size " + std::to_string(size) +
                    ": " + ph.error.message();
  if (ph.hist.count() == 0) co_return;
  report_.results.push_back(summarize(size, ph.hist, ph.elapsed_s, !stop_ && !ph.error));
  std::printf("%s", table_row(report_.results.back()).c_str());
  std::fflush(stdout);
}

// Starts qd lanes per connection and waits for all of them, waking every progress interval
// for the progress line and the watchdog. The last lane to finish wakes it at once.
asio::awaitable<void> client::run_phase(phase& ph) {
  for (link& l : links_) l.issued = 0;
  const auto start = clock_type::now();
  ph.last_done = ph.tick_at = start;
  if (ph.per_conn == 0)
    ph.end = start + std::chrono::duration_cast<clock_type::duration>(
                         std::chrono::duration<double>(opts_.duration_s));
  asio::steady_timer wake(io_);
  std::size_t pending = 0;
  for (link& l : links_) {
    for (std::uint32_t slot = 0; slot < opts_.qd; ++slot) {
      ++pending;
      asio::co_spawn(io_, lane(l, ph, slot), [&](const std::exception_ptr& e) {
        if (e && !ph.error)
          ph.error = std::make_error_code(std::errc::io_error);  // bad_alloc and the like
        if (--pending == 0) wake.cancel();
      });
    }
  }
  while (pending > 0) {
    wake.expires_after(progress_.interval());
    co_await wake.async_wait(awaitable_tuple);
    if (pending > 0) tick(ph, start, pending);
  }
  ph.elapsed_s = std::chrono::duration<double>(clock_type::now() - start).count();
}

bool client::more(const link& l, const phase& ph) const {
  if (stop_ || ph.error) return false;
  return ph.per_conn != 0 ? l.issued < ph.per_conn : clock_type::now() < ph.end;
}

asio::awaitable<void> client::lane(link& l, phase& ph, std::uint32_t slot) {
  while (more(l, ph)) {
    ++l.issued;
    const auto t0 = clock_type::now();
    const std::error_code ec = co_await one_op(l, opts_, ph.size, slot);
    const auto t1 = clock_type::now();
    if (ec) {
      if (!ph.error) ph.error = ec;
      co_return;
    }
    if (ph.measured)
      ph.hist.record(static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
    ++ph.done;
    ph.last_done = t1;
  }
}

// The progress line, and the watchdog: operations in flight with no completion for
// quiet_limit mean a dead peer; closing the connections completes them (aborted).
void client::tick(phase& ph, clock_type::time_point start, std::size_t in_flight) {
  const auto now = clock_type::now();
  if (in_flight > 0 && now - ph.last_done > quiet_limit && !ph.error) {
    ph.error = std::make_error_code(std::errc::timed_out);
    for (link& l : links_) (void)l.conn.close();
    return;
  }
  if (!ph.measured) return;
  progress_sample s;
  s.size = ph.size;
  s.size_index = ph.index;
  s.size_count = opts_.sizes.size();
  s.done = ph.done;
  s.target = ph.per_conn * opts_.conns;
  s.duration_s = opts_.duration_s;
  s.elapsed_s = std::chrono::duration<double>(now - start).count();
  const double dt = std::chrono::duration<double>(now - ph.tick_at).count();
  s.rate = dt > 0 ? static_cast<double>(ph.done - ph.tick_done) / dt : 0;
  ph.tick_done = ph.done;
  ph.tick_at = now;
  progress_.update(s);
}

asio::awaitable<void> client::disconnect_all() {
  deadline dl(co_await asio::this_coro::executor);
  for (link& l : links_) {
    if (!l.conn) continue;
    auto [ec] = co_await l.conn.async_disconnect(dl.arm(quiet_limit));
    dl.disarm();
    if (ec)
      std::fprintf(stderr, "arpma-perf: disconnecting: %s\n",
                   dl.expired() ? "nothing heard for 10 s" : ec.message().c_str());
    (void)l.conn.close();
  }
}

bool write_json(const run_report& r) {
  std::FILE* f = std::fopen(r.opts.json_path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "arpma-perf: cannot write %s\n", r.opts.json_path.c_str());
    return false;
  }
  const std::string text = to_json(r, ARPMA_PERF_VERSION);
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace

int run_client(const options& opts, const std::string& provider) {
  auto peer = make_peer(opts.addr, false);
  if (!peer) return exit_failed;
  run_report report;
  report.opts = opts;
  report.provider = provider;
  asio::io_context io;
  client c(io, *peer, report);
  asio::co_spawn(io, c.run(), [&](const std::exception_ptr& e) {
    if (e) report.error = "unexpected exception";
    c.end();
  });
  io.run();
  if (report.interrupted)
    std::printf("interrupted by %s: %zu of %zu sizes reported\n",
                c.signal() == SIGINT ? "SIGINT" : "SIGTERM", report.results.size(),
                opts.sizes.size());
  if (!report.error.empty()) std::fprintf(stderr, "arpma-perf: %s\n", report.error.c_str());
  const bool json_ok = opts.json_path.empty() || write_json(report);
  if (!report.error.empty() || !json_ok) return exit_failed;
  if (report.interrupted) return c.signal() == SIGINT ? exit_sigint : exit_sigterm;
  return exit_ok;
}

}  // namespace arpma_perf

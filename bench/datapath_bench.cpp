// The 64-byte RDMA write round trip (post, then its completion) through
// co_await conn.async_write(...) against the C path (rpma_write +
// rpma_cq_wait + rpma_cq_get_wc), in fd mode and in busy-poll mode, in one
// run, on the chosen provider (soft on loopback by default; ARPMA_PROVIDER=verbs
// ARPMA_TEST_ADDR=... in the Soft-RoCE guest). Prints medians, p99 and the
// co_await / C ratios (target: <= 1.1). Bounded: N round trips per case.
//
//   datapath_bench [--quick] [--json FILE]   (--quick: 1 round of 2,000)
#include "arpma/conn_req.hpp"
#include "arpma/connection.hpp"
#include "arpma/mr.hpp"
#include "arpma/peer.hpp"

#include <librpma.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;

namespace {

int rounds = 3;
constexpr int warmup = 500;
int samples = 5000;
constexpr std::size_t message = 64;

std::string target() {
  const char* env = std::getenv("ARPMA_TEST_ADDR");  // NOLINT(concurrency-mt-unsafe)
  return env != nullptr && *env != '\0' ? env : "127.0.0.1";
}

std::string free_port(const std::string& addr) {
  asio::io_context io;
  asio::ip::tcp::acceptor probe(io, asio::ip::tcp::endpoint(asio::ip::make_address(addr), 0));
  return std::to_string(probe.local_endpoint().port());
}

struct stats {
  double median_us = 0;
  double p99_us = 0;
};

stats summarize(std::vector<double>& us) {
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[us.size() * 99 / 100]};
}

void check(int rc, const char* what) {
  if (rc != 0) {
    std::fprintf(stderr, "%s: %s\n", what, rpma_err_2str(rc));
    std::exit(1);  // NOLINT(concurrency-mt-unsafe): a benchmark that cannot run stops
  }
}

// The server: accepts `connections`, each with its region's descriptor as
// private data, and waits for each to close.
void serve(rpma_peer* peer, const std::string& addr, const std::string& port, int connections,
           std::atomic<bool>& listening, std::vector<char>& memory) {
  rpma_ep* ep = nullptr;
  check(rpma_ep_listen(peer, addr.c_str(), port.c_str(), &ep), "listen");
  rpma_mr_local* mr = nullptr;
  check(rpma_mr_reg(peer, memory.data(), memory.size(), RPMA_MR_USAGE_WRITE_DST, &mr), "mr_reg");
  char desc[21];
  check(rpma_mr_get_descriptor(mr, desc), "descriptor");
  listening = true;
  std::vector<rpma_conn*> conns;
  for (int i = 0; i < connections; ++i) {
    rpma_conn_req* req = nullptr;
    check(rpma_ep_next_conn_req(ep, nullptr, &req), "next_conn_req");
    const rpma_conn_private_data pdata{desc, sizeof desc};
    rpma_conn* conn = nullptr;
    check(rpma_conn_req_connect(&req, &pdata, &conn), "accept");
    rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    check(rpma_conn_next_event(conn, &ev), "established");
    // Wait for this one to close before taking the next: the client runs
    // its cases one after the other.
    check(rpma_conn_next_event(conn, &ev), "closed");
    (void)rpma_conn_disconnect(conn);
    (void)rpma_conn_delete(&conn);
  }
  (void)rpma_mr_dereg(&mr);
  (void)rpma_ep_shutdown(&ep);
}

std::vector<double> c_path(rpma_peer* peer, const std::string& addr, const std::string& port,
                           bool busy) {
  rpma_conn_req* req = nullptr;
  check(rpma_conn_req_new(peer, addr.c_str(), port.c_str(), nullptr, &req), "conn_req_new");
  rpma_conn* conn = nullptr;
  check(rpma_conn_req_connect(&req, nullptr, &conn), "connect");
  rpma_conn_event ev = RPMA_CONN_UNDEFINED;
  check(rpma_conn_next_event(conn, &ev), "established");
  rpma_conn_private_data pdata{};
  check(rpma_conn_get_private_data(conn, &pdata), "private data");
  rpma_mr_remote* remote = nullptr;
  check(rpma_mr_remote_from_descriptor(pdata.ptr, pdata.len, &remote), "remote");
  std::vector<char> mine(message, 'c');
  rpma_mr_local* mr = nullptr;
  check(rpma_mr_reg(peer, mine.data(), mine.size(), RPMA_MR_USAGE_WRITE_SRC, &mr), "mr_reg");
  rpma_cq* cq = nullptr;
  check(rpma_conn_get_cq(conn, &cq), "cq");
  std::vector<double> us;
  for (int i = 0; i < warmup + samples; ++i) {
    const auto t0 = clock_type::now();
    check(rpma_write(conn, remote, 0, mr, 0, message, RPMA_F_COMPLETION_ALWAYS, nullptr), "write");
    ibv_wc wc{};
    for (;;) {
      const int rc = rpma_cq_get_wc(cq, 1, &wc, nullptr);
      if (rc == 0) break;
      if (rc != RPMA_E_NO_COMPLETION) check(rc, "get_wc");
      if (!busy) check(rpma_cq_wait(cq), "cq_wait");
    }
    if (wc.status != IBV_WC_SUCCESS) check(RPMA_E_PROVIDER, "completion");
    if (i >= warmup)
      us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  (void)rpma_mr_dereg(&mr);
  (void)rpma_mr_remote_delete(&remote);
  (void)rpma_conn_disconnect(conn);
  (void)rpma_conn_next_event(conn, &ev);
  (void)rpma_conn_delete(&conn);
  return us;
}

std::vector<double> coawait_path(const arpma::peer& peer, const std::string& addr,
                                 const std::string& port, bool busy) {
  asio::io_context io;
  std::vector<double> us;
  std::vector<char> mine(message, 'x');
  auto mr = arpma::local_mr::reg(peer, mine.data(), mine.size(), arpma::mr_usage::write_src);
  if (!mr) std::exit(1);  // NOLINT(concurrency-mt-unsafe)
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto req = co_await arpma::async_conn_req_new(peer, addr, port, {}, asio::use_awaitable);
        auto conn = co_await req.async_connect({}, asio::use_awaitable);
        const auto remote = arpma::remote_mr::from_descriptor(conn.private_data()).value();
        if (busy) conn.set_busy_poll(std::chrono::microseconds(1000));
        for (int i = 0; i < warmup + samples; ++i) {
          const auto t0 = clock_type::now();
          co_await conn.async_write(arpma::buffer(remote, 0, message).value(),
                                    arpma::buffer(mr.value(), 0, message).value(),
                                    asio::use_awaitable);
          if (i >= warmup)
            us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
        }
        co_await conn.async_disconnect(asio::use_awaitable);
      },
      asio::detached);
  io.run();
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      rounds = 1;
      samples = 2000;
    } else if (a == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--json FILE]\n", argv[0]);
      return 2;
    }
  }
  FILE* out = json.empty() ? nullptr : std::fopen(json.c_str(), "w");
  if (out != nullptr)
    std::fprintf(out,
                 "{\n  \"bench\": \"datapath_bench\",\n  \"message\": %zu,\n"
                 "  \"rounds\": %d,\n  \"samples\": %d,\n  \"modes\": [",
                 message, rounds, samples);
  const auto addr = target();
  ibv_context* dev = nullptr;
  check(rpma_utils_get_ibv_context(addr.c_str(), RPMA_UTIL_IBV_CONTEXT_REMOTE, &dev), "device");
  rpma_peer* cpeer = nullptr;
  check(rpma_peer_new(dev, &cpeer), "peer");
  auto peer = arpma::peer::create(dev).value();
  const auto port = free_port(addr);
  std::vector<char> server_memory(4096);
  std::atomic<bool> listening{false};
  std::thread server(serve, cpeer, addr, port, rounds * 4, std::ref(listening),
                     std::ref(server_memory));
  while (!listening) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  std::printf(
      "64 B RDMA write round trip on %s (median / p99 in us; best median of %d rounds, "
      "%d samples each)\n",
      addr.c_str(), rounds, samples);
  for (const bool busy : {false, true}) {
    stats best_c{1e9, 0};
    stats best_cxx{1e9, 0};
    for (int r = 0; r < rounds; ++r) {
      auto c = c_path(cpeer, addr, port, busy);
      auto cxx = coawait_path(peer, addr, port, busy);
      const auto sc = summarize(c);
      const auto scxx = summarize(cxx);
      if (sc.median_us < best_c.median_us) best_c = sc;
      if (scxx.median_us < best_cxx.median_us) best_cxx = scxx;
    }
    std::printf(
        "%-9s C path (rpma_write + %s): %7.2f / %7.2f   co_await: %7.2f / %7.2f   "
        "ratio co_await/C: %.2f\n",
        busy ? "busy-poll" : "fd", busy ? "spin on rpma_cq_get_wc" : "rpma_cq_wait",
        best_c.median_us, best_c.p99_us, best_cxx.median_us, best_cxx.p99_us,
        best_cxx.median_us / best_c.median_us);
    if (out != nullptr)
      std::fprintf(out,
                   "%s\n    {\"mode\": \"%s\", \"c_median_us\": %.3f, \"c_p99_us\": %.3f, "
                   "\"coawait_median_us\": %.3f, \"coawait_p99_us\": %.3f, \"ratio\": %.3f}",
                   busy ? "," : "", busy ? "busy_poll" : "fd", best_c.median_us, best_c.p99_us,
                   best_cxx.median_us, best_cxx.p99_us, best_cxx.median_us / best_c.median_us);
  }
  if (out != nullptr) {
    std::fprintf(out, "\n  ]\n}\n");
    std::fclose(out);
  }
  server.join();
  (void)peer.close();
  (void)rpma_peer_delete(&cpeer);
  return 0;
}

// The soft provider's data path against raw TCP on loopback, in one run:
// 64 B send/recv ping-pong round trips (both sides busy-polling, the CQ or
// the socket), and 64 KiB RDMA writes at queue depth 16 (completions waited
// for on the completion channel) against streaming the same bytes over one
// TCP connection. TCP and soft rounds alternate so both see the same load;
// prints the medians and the median of the per-round ratios (targets: latency
// <= 1.5x TCP, bandwidth >= 0.7x TCP). The whole run takes a few seconds.
#include "provider/soft/soft_provider.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace prov = arpma::provider;
using clock_type = std::chrono::steady_clock;

constexpr std::size_t small = 64;
constexpr std::size_t chunk = 64 << 10;
constexpr int depth = 16;
constexpr int paired_rounds = 7;
constexpr int pings_per_round = 2000;
constexpr std::size_t bytes_per_round = std::size_t{256} << 20;

template <class T>
T need(arpma::result<T> r, const char* what) {
  if (!r) throw std::runtime_error(std::string(what) + ": " + r.error().message());
  return r.value();
}

void check(std::error_code ec, const char* what) {
  if (ec) throw std::runtime_error(std::string(what) + ": " + ec.message());
}

/// Busy polling that gives the CPU away now and then: on a loaded machine a
/// pure spin can keep the thread it waits for off the CPU for a whole
/// time slice.
void spin_pause(unsigned spins) {
  if (spins % 64 == 0) std::this_thread::yield();
}

/// Puts the calling thread on CPU `cpu` (modulo the CPUs there are) for its
/// lifetime, or the whole machine with -1. The two sides of a ping-pong go to
/// different CPUs, for TCP and soft alike: left to the scheduler, two
/// spinning threads sometimes share one CPU and measure its time slicing.
void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  for (int i = 0; i < cpus; ++i)
    if (cpu < 0 || i == cpu % cpus) CPU_SET(i, &set);
  (void)::pthread_setaffinity_np(::pthread_self(), sizeof set, &set);
}

/// Pins for the scope of a measurement (the calling thread only).
struct pinned {
  explicit pinned(int cpu) { pin(cpu); }
  pinned(const pinned&) = delete;
  pinned& operator=(const pinned&) = delete;
  ~pinned() { pin(-1); }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// ---- soft provider -------------------------------------------------------------

struct endpoint {
  prov::event_channel* ch = nullptr;
  prov::cm_id* id = nullptr;
  prov::pd* pd = nullptr;
  prov::comp_channel* cc = nullptr;
  prov::cq* cq = nullptr;
  prov::mr* mr = nullptr;
  std::vector<std::uint8_t> buf = std::vector<std::uint8_t>(depth * chunk);
};

prov::cm_event wait_event(prov::provider& p, prov::event_channel* ch) {
  for (int i = 0; i < 5000; ++i) {
    prov::cm_event e;
    if (!p.get_cm_event(ch, e)) return e;
    pollfd ready{p.event_channel_fd(ch), POLLIN, 0};
    (void)::poll(&ready, 1, 1);
  }
  throw std::runtime_error("no cm event");
}

class soft_pair {
 public:
  soft_pair() {
    dev_ = need(soft.find_device("127.0.0.1", false), "device");
    for (endpoint* e : {&a, &b}) {
      e->ch = need(soft.create_event_channel(), "channel");
      e->pd = need(soft.alloc_pd(dev_), "pd");
      e->cc = need(soft.create_comp_channel(dev_), "comp channel");
      e->cq = need(soft.create_cq(dev_, 4 * depth, e->cc), "cq");
      e->mr = need(soft.reg_mr(e->pd, e->buf.data(), e->buf.size(), 0xf), "mr");
    }
    connect();
  }
  soft_pair(const soft_pair&) = delete;
  soft_pair& operator=(const soft_pair&) = delete;
  ~soft_pair() {
    for (endpoint* e : {&a, &b}) {
      soft.destroy_qp(e->id);
      (void)soft.destroy_id(e->id);
      (void)soft.dereg_mr(e->mr);
      (void)soft.destroy_cq(e->cq);
      (void)soft.destroy_comp_channel(e->cc);
      (void)soft.dealloc_pd(e->pd);
      soft.destroy_event_channel(e->ch);
    }
  }

  void post_recv(endpoint& e) {
    prov::recv_wr wr;
    wr.local = {addr(e, 0), small, soft.mr_lkey(e.mr)};
    check(soft.post_recv(e.id, wr), "post_recv");
  }

  void post(endpoint& e, prov::wr_opcode op, std::size_t slot, std::uint32_t len, bool signaled) {
    prov::send_wr wr;
    wr.opcode = op;
    wr.signaled = signaled;
    wr.local = {addr(e, slot), len, soft.mr_lkey(e.mr)};
    endpoint& peer = &e == &a ? b : a;
    wr.remote_addr = addr(peer, slot);
    wr.rkey = soft.mr_rkey(peer.mr);
    check(soft.post_send(e.id, wr), "post_send");
  }

  /// The next completion: spinning on the CQ (latency, as RDMA applications
  /// poll), or sleeping on the completion channel (rpma_cq_wait's way),
  /// which leaves the CPU to the progress thread.
  prov::work_completion wait_wc(endpoint& e, bool spin) {
    std::array<prov::work_completion, 1> wc{};
    unsigned spins = 0;
    for (;;) {
      if (need(soft.poll_cq(e.cq, wc), "poll_cq") == 1) break;
      if (spin) {
        spin_pause(++spins);
        continue;
      }
      check(soft.req_notify_cq(e.cq, false), "req_notify_cq");
      if (need(soft.poll_cq(e.cq, wc), "poll_cq") == 1) break;  // raced with the arming
      pollfd ready{soft.comp_channel_fd(e.cc), POLLIN, 0};
      (void)::poll(&ready, 1, 1000);
      if (auto fired = soft.get_cq_event(e.cc)) soft.ack_cq_events(fired.value(), 1);
    }
    if (wc[0].status != prov::wc_status::success) throw std::runtime_error("completion error");
    return wc[0];
  }

  prov::soft_provider soft;
  endpoint a;
  endpoint b;

 private:
  static std::uint64_t addr(endpoint& e, std::size_t slot) {
    return reinterpret_cast<std::uintptr_t>(e.buf.data() + slot * chunk);
  }

  void connect() {
    prov::cm_id* listener = need(soft.create_id(b.ch, 0), "id");
    const sockaddr_in any = loopback(0);
    check(soft.bind_addr(listener, reinterpret_cast<const sockaddr*>(&any)), "bind");
    check(soft.listen(listener, 1), "listen");
    const sockaddr_in to = loopback(soft.local_port(listener));
    a.id = need(soft.create_id(a.ch, 0), "id");
    check(soft.resolve_addr(a.id, reinterpret_cast<const sockaddr*>(&to), 1000), "resolve");
    (void)wait_event(soft, a.ch);
    check(soft.resolve_route(a.id, 1000), "route");
    (void)wait_event(soft, a.ch);
    make_qp(a);
    check(soft.connect(a.id, {}), "connect");
    b.id = wait_event(soft, b.ch).id;
    make_qp(b);
    check(soft.accept(b.id, {}), "accept");
    (void)wait_event(soft, a.ch);
    (void)wait_event(soft, b.ch);
    (void)soft.destroy_id(listener);
  }

  void make_qp(endpoint& e) {
    prov::qp_config config;
    config.send_cq = config.recv_cq = e.cq;
    config.max_send_wr = 4 * depth;
    config.max_recv_wr = 4 * depth;
    check(soft.create_qp(e.id, e.pd, config), "create_qp");
  }

  prov::device* dev_ = nullptr;
};

/// Median round trip of a 64 B send answered by a 64 B send, in microseconds.
double soft_rtt(int rounds) {
  soft_pair pair;
  const pinned ping_cpu(0);
  std::thread pong([&pair, rounds] {
    pin(1);
    for (int i = 0; i < rounds * pings_per_round; ++i) {
      (void)pair.wait_wc(pair.b, true);  // the ping
      pair.post_recv(pair.b);
      pair.post(pair.b, prov::wr_opcode::send, 1, small, false);
    }
  });
  pair.post_recv(pair.b);
  std::vector<double> medians;
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> rtts;
    for (int i = 0; i < pings_per_round; ++i) {
      pair.post_recv(pair.a);
      const auto start = clock_type::now();
      pair.post(pair.a, prov::wr_opcode::send, 1, small, false);
      (void)pair.wait_wc(pair.a, true);  // the pong
      rtts.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - start).count());
    }
    medians.push_back(median(rtts));
  }
  pong.join();
  return median(medians);
}

/// Median throughput of 64 KiB writes kept `depth` deep, in MB/s.
double soft_write_bandwidth(int rounds) {
  soft_pair pair;
  std::vector<double> rates;
  for (int r = 0; r < rounds; ++r) {
    const std::size_t total = bytes_per_round / chunk;
    std::size_t posted = 0;
    std::size_t done = 0;
    const auto start = clock_type::now();
    for (; posted < static_cast<std::size_t>(depth); ++posted)
      pair.post(pair.a, prov::wr_opcode::rdma_write, posted % depth, chunk, true);
    while (done < total) {
      (void)pair.wait_wc(pair.a, false);
      ++done;
      if (posted < total) {
        pair.post(pair.a, prov::wr_opcode::rdma_write, posted % depth, chunk, true);
        ++posted;
      }
    }
    const double s = std::chrono::duration<double>(clock_type::now() - start).count();
    rates.push_back(static_cast<double>(bytes_per_round) / s / 1e6);
  }
  return median(rates);
}

// ---- raw TCP -----------------------------------------------------------------------

struct tcp_pair {
  int client = -1;
  int server = -1;
  tcp_pair() {
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = loopback(0);
    socklen_t len = sizeof addr;
    if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(listener, 1) != 0 ||
        ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      throw std::runtime_error("tcp listener");
    client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(client, reinterpret_cast<sockaddr*>(&addr), len) != 0)
      throw std::runtime_error("tcp connect");
    server = ::accept(listener, nullptr, nullptr);
    ::close(listener);
    const int one = 1;
    for (int fd : {client, server})
      (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  tcp_pair(const tcp_pair&) = delete;
  tcp_pair& operator=(const tcp_pair&) = delete;
  ~tcp_pair() {
    ::close(client);
    ::close(server);
  }
};

void write_exact(int fd, const std::uint8_t* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) throw std::runtime_error("tcp send");
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

/// With `spin`, polls the socket without sleeping, as the soft side polls
/// its CQ: the round trips compare transports, not wake-up latencies.
void read_exact(int fd, std::uint8_t* p, std::size_t n, bool spin = false) {
  unsigned spins = 0;
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, spin ? MSG_DONTWAIT : 0);
    if (r < 0 && spin && errno == EAGAIN) {
      spin_pause(++spins);
      continue;
    }
    if (r <= 0) throw std::runtime_error("tcp recv");
    p += r;
    n -= static_cast<std::size_t>(r);
  }
}

double tcp_rtt(int rounds) {
  tcp_pair pair;
  const pinned ping_cpu(0);
  std::thread pong([&pair, rounds] {
    pin(1);
    std::array<std::uint8_t, small> buf{};
    for (int i = 0; i < rounds * pings_per_round; ++i) {
      read_exact(pair.server, buf.data(), buf.size(), true);
      write_exact(pair.server, buf.data(), buf.size());
    }
  });
  std::array<std::uint8_t, small> buf{};
  std::vector<double> medians;
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> rtts;
    for (int i = 0; i < pings_per_round; ++i) {
      const auto start = clock_type::now();
      write_exact(pair.client, buf.data(), buf.size());
      read_exact(pair.client, buf.data(), buf.size(), true);
      rtts.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - start).count());
    }
    medians.push_back(median(rtts));
  }
  pong.join();
  return median(medians);
}

double tcp_bandwidth(int rounds) {
  tcp_pair pair;
  std::thread sink([&pair, rounds] {
    std::vector<std::uint8_t> buf(chunk);
    read_exact(pair.server, buf.data(), 0);
    for (int r = 0; r < rounds; ++r)
      for (std::size_t n = 0; n < bytes_per_round; n += chunk)
        read_exact(pair.server, buf.data(), chunk);
    const std::uint8_t done = 1;
    write_exact(pair.server, &done, 1);
  });
  std::vector<std::uint8_t> buf(chunk, 0x42);
  std::vector<double> rates;
  for (int r = 0; r < rounds; ++r) {
    const auto start = clock_type::now();
    for (std::size_t n = 0; n < bytes_per_round; n += chunk)
      write_exact(pair.client, buf.data(), chunk);
    const double s = std::chrono::duration<double>(clock_type::now() - start).count();
    rates.push_back(static_cast<double>(bytes_per_round) / s / 1e6);
  }
  std::uint8_t done = 0;
  read_exact(pair.client, &done, 1);
  sink.join();
  return median(rates);
}

/// Median over `paired_rounds` of (soft, tcp, soft/tcp), the two measured in turn
/// so that both see the same load on a shared machine.
struct paired {
  double soft;
  double tcp;
  double ratio;
};

template <class Soft, class Tcp>
paired interleave(Soft soft, Tcp tcp) {
  std::vector<double> s;
  std::vector<double> t;
  std::vector<double> r;
  for (int i = 0; i < paired_rounds; ++i) {
    t.push_back(tcp(1));
    s.push_back(soft(1));
    r.push_back(s.back() / t.back());
  }
  return {median(s), median(t), median(r)};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    // `soft_datapath_bench rtt|bw`: one soft figure only (for profiling).
    if (argc > 1 && std::string(argv[1]) == "rtt") {
      std::printf("soft send/recv round trip %.1f us\n", soft_rtt(paired_rounds));
      return 0;
    }
    if (argc > 1 && std::string(argv[1]) == "bw") {
      std::printf("soft RDMA write %.0f MB/s\n", soft_write_bandwidth(paired_rounds));
      return 0;
    }
    const paired rtt = interleave(soft_rtt, tcp_rtt);
    const paired bw = interleave(soft_write_bandwidth, tcp_bandwidth);
    std::printf("64 B ping-pong round trip, median of %d rounds of %d (TCP and soft in turn):\n",
                paired_rounds, pings_per_round);
    std::printf("  raw TCP %8.1f us   soft send/recv %8.1f us   ratio %.2f (target <= 1.5)\n",
                rtt.tcp, rtt.soft, rtt.ratio);
    std::printf("64 KiB transfers, %d MiB per round, median of %d rounds (in turn):\n",
                static_cast<int>(bytes_per_round >> 20), paired_rounds);
    std::printf(
        "  raw TCP %8.0f MB/s soft RDMA write QD%d %8.0f MB/s  ratio %.2f (target >= 0.7)\n",
        bw.tcp, depth, bw.soft, bw.ratio);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "soft_datapath_bench: %s\n", e.what());
    return 1;
  }
}

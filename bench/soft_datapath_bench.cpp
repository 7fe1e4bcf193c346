// The soft provider's data path against raw TCP on loopback, in one run:
// 64 B send/recv ping-pong round trips (both sides busy-polling, the CQ or
// the socket), and 64 KiB RDMA writes at queue depth 16 (completions waited
// for on the completion channel) against streaming the same bytes over one
// TCP connection. TCP and soft rounds alternate so both see the same load;
// prints the medians and the median of the per-round ratios (targets: latency
// <= 1.5x TCP, bandwidth >= 0.7x TCP). The whole run takes a few seconds.
//
// --sweep adds a message-size sweep, 64 B to 1 MiB: RDMA write latency (post,
// spin on the CQ until its completion, i.e. until the peer placed it) against
// TCP (send the message, the peer answers one byte once it has all of it),
// and RDMA write bandwidth at queue depth 16 against streaming messages of
// that size over TCP; each point is time-bounded, TCP and soft in turn.
// --quick: fewer rounds and shorter points. --json FILE: the figures as JSON.
//
// Each side of a soft pair has a provider instance of its own, so its own
// progress thread, as two processes would: the responder's thread places
// writes while the requester's sends their large tails, as TCP's sender and
// sink are two threads.
//
//   soft_datapath_bench [--quick] [--sweep] [--json FILE] | rtt | bw | rate ... | sweep [FROM]
//                       | bw-at|lat-at SIZE [SECONDS] [soft|tcp]
#include "provider/soft/soft_memory.hpp"
#include "provider/soft/soft_provider.hpp"
#include "support/provider_events.hpp"

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
constexpr std::size_t sweep_max = std::size_t{1} << 20;
int paired_rounds = 7;  // --quick: 3
constexpr int pings_per_round = 2000;
std::size_t bytes_per_round = std::size_t{256} << 20;  // --quick: 64 MiB
int sweep_rounds = 5;                                  // --quick: 1
std::size_t sweep_from = 64;                           // `sweep FROM`: the large sizes alone
double sweep_point_s = 0.3;                            // --quick: 0.1; per measurement

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
  prov::soft_provider* nic = nullptr;  ///< its own provider: its own progress thread
  prov::event_channel* ch = nullptr;
  prov::cm_id* id = nullptr;
  prov::pd* pd = nullptr;
  prov::comp_channel* cc = nullptr;
  prov::cq* cq = nullptr;
  prov::mr* mr = nullptr;
  std::vector<std::uint8_t> buf;
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
  /// `slot`: the largest message; each side registers `depth` slots.
  explicit soft_pair(std::size_t slot = chunk) : slot_(slot) {
    a.nic = &nic_a_;
    b.nic = &nic_b_;
    for (endpoint* e : {&a, &b}) {
      auto& soft = *e->nic;
      prov::device* dev = need(soft.find_device("127.0.0.1", false), "device");
      e->buf.assign(depth * slot_, 0);
      e->ch = need(soft.create_event_channel(), "channel");
      e->pd = need(soft.alloc_pd(dev), "pd");
      e->cc = need(soft.create_comp_channel(dev), "comp channel");
      // Read as the core's loop reads them: non-blocking (they start blocking).
      for (const int fd : {soft.event_channel_fd(e->ch), soft.comp_channel_fd(e->cc)})
        if (!arpma::test::set_nonblocking(fd)) throw std::runtime_error("O_NONBLOCK");
      e->cq = need(soft.create_cq(dev, 4 * depth, e->cc), "cq");
      e->mr = need(soft.reg_mr(e->pd, e->buf.data(), e->buf.size(), 0xf), "mr");
    }
    connect();
  }
  soft_pair(const soft_pair&) = delete;
  soft_pair& operator=(const soft_pair&) = delete;
  ~soft_pair() {
    for (endpoint* e : {&a, &b}) {
      auto& soft = *e->nic;
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
    auto& soft = *e.nic;
    prov::recv_wr wr;
    wr.local = {addr(e, 0), small, soft.mr_lkey(e.mr)};
    check(soft.post_recv(e.id, wr), "post_recv");
  }

  void post(endpoint& e, prov::wr_opcode op, std::size_t slot, std::uint32_t len, bool signaled) {
    auto& soft = *e.nic;
    prov::send_wr wr;
    wr.opcode = op;
    wr.signaled = signaled;
    wr.local = {addr(e, slot), len, soft.mr_lkey(e.mr)};
    endpoint& peer = &e == &a ? b : a;
    wr.remote_addr = addr(peer, slot);
    wr.rkey = peer.nic->mr_rkey(peer.mr);
    check(soft.post_send(e.id, wr), "post_send");
  }

  /// The next completion: spinning on the CQ (latency, as RDMA applications
  /// poll), or sleeping on the completion channel (rpma_cq_wait's way),
  /// which leaves the CPU to the progress thread.
  prov::work_completion wait_wc(endpoint& e, bool spin) {
    auto& soft = *e.nic;
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

  endpoint a;
  endpoint b;

 private:
  [[nodiscard]] std::uint64_t addr(endpoint& e, std::size_t slot) const {
    return reinterpret_cast<std::uintptr_t>(e.buf.data() + slot * slot_);
  }

  void connect() {
    auto& pa = *a.nic;
    auto& pb = *b.nic;
    prov::cm_id* listener = need(pb.create_id(b.ch, 0), "id");
    const sockaddr_in any = loopback(0);
    check(pb.bind_addr(listener, reinterpret_cast<const sockaddr*>(&any)), "bind");
    check(pb.listen(listener, 1), "listen");
    const sockaddr_in to = loopback(pb.local_port(listener));
    a.id = need(pa.create_id(a.ch, 0), "id");
    check(pa.resolve_addr(a.id, reinterpret_cast<const sockaddr*>(&to), 1000), "resolve");
    (void)wait_event(pa, a.ch);
    check(pa.resolve_route(a.id, 1000), "route");
    (void)wait_event(pa, a.ch);
    make_qp(a);
    check(pa.connect(a.id, {}), "connect");
    b.id = wait_event(pb, b.ch).id;
    make_qp(b);
    check(pb.accept(b.id, {}), "accept");
    (void)wait_event(pa, a.ch);
    (void)wait_event(pb, b.ch);
    (void)pb.destroy_id(listener);
  }

  void make_qp(endpoint& e) {
    prov::qp_config config;
    config.send_cq = config.recv_cq = e.cq;
    config.max_send_wr = 4 * depth;
    config.max_recv_wr = 4 * depth;
    check(e.nic->create_qp(e.id, e.pd, config), "create_qp");
  }

  // One provider per side, as two processes have: each its own progress
  // thread, which plays that side's NIC. (With one instance for both, one
  // thread sent the requester's large tails and placed them at the
  // responder: half the bandwidth of two, where TCP's sides are two threads.)
  prov::soft_provider nic_a_;
  prov::soft_provider nic_b_;
  std::size_t slot_;
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
  /// `nodelay`: TCP_NODELAY on both ends (request/response); without it,
  /// Nagle coalesces small writes, as a streaming application (qperf's
  /// tcp_bw) leaves it.
  explicit tcp_pair(bool nodelay = true) {
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
      if (nodelay) (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
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

/// Median 64 B TCP ping-pong round trip in microseconds; both ends spin on
/// the socket, or (`spin` false) sleep in recv as sockperf's ping-pong does.
double tcp_rtt(int rounds, bool spin = true) {
  tcp_pair pair;
  const pinned ping_cpu(0);
  std::thread pong([&pair, rounds, spin] {
    pin(1);
    std::array<std::uint8_t, small> buf{};
    for (int i = 0; i < rounds * pings_per_round; ++i) {
      read_exact(pair.server, buf.data(), buf.size(), spin);
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
      read_exact(pair.client, buf.data(), buf.size(), spin);
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

// ---- message-size sweep -----------------------------------------------------------

bool time_left(clock_type::time_point start, int done, int at_least, int at_most) {
  if (done < at_least) return true;
  if (done >= at_most) return false;
  return std::chrono::duration<double>(clock_type::now() - start).count() < sweep_point_s;
}

/// Median latency of one RDMA write of `size` (post, spin until its completion), in us.
double soft_write_latency(std::size_t size) {
  soft_pair pair(size);
  const pinned cpu(0);
  std::vector<double> us;
  const auto start = clock_type::now();
  while (time_left(start, static_cast<int>(us.size()), 50, 20000)) {
    const auto t0 = clock_type::now();
    pair.post(pair.a, prov::wr_opcode::rdma_write, 0, static_cast<std::uint32_t>(size), true);
    (void)pair.wait_wc(pair.a, true);
    us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  return median(us);
}

/// TCP's equivalent: `size` bytes out, a one-byte answer once they are all in.
double tcp_write_latency(std::size_t size) {
  tcp_pair pair;
  const pinned cpu(0);
  std::thread peer([&pair, size] {
    pin(1);
    std::vector<std::uint8_t> buf(size);
    for (;;) {
      std::uint8_t more = 0;
      read_exact(pair.server, &more, 1, true);
      if (more == 0) return;
      read_exact(pair.server, buf.data(), size, true);
      write_exact(pair.server, &more, 1);
    }
  });
  std::vector<std::uint8_t> buf(size + 1, 0x42);
  std::vector<double> us;
  const auto start = clock_type::now();
  while (time_left(start, static_cast<int>(us.size()), 50, 20000)) {
    const auto t0 = clock_type::now();
    buf[0] = 1;  // "one more message" marker, then the message, in one send
    write_exact(pair.client, buf.data(), size + 1);
    read_exact(pair.client, buf.data(), 1, true);
    us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  const std::uint8_t end = 0;
  write_exact(pair.client, &end, 1);
  peer.join();
  return median(us);
}

/// RDMA writes of `size` kept `depth` deep for about sweep_point_s, in MB/s.
double soft_write_bandwidth_at(std::size_t size) {
  soft_pair pair(size);
  const auto len = static_cast<std::uint32_t>(size);
  int posted = 0;
  int done = 0;
  const auto start = clock_type::now();
  for (; posted < depth; ++posted)
    pair.post(pair.a, prov::wr_opcode::rdma_write, posted, len, true);
  while (done < posted) {
    (void)pair.wait_wc(pair.a, false);
    ++done;
    if (time_left(start, posted, 4 * depth, 1 << 22)) {
      pair.post(pair.a, prov::wr_opcode::rdma_write, posted % depth, len, true);
      ++posted;
    }
  }
  const double sec = std::chrono::duration<double>(clock_type::now() - start).count();
  return static_cast<double>(size) * done / sec / 1e6;
}

/// Messages of `size` streamed over TCP for about sweep_point_s, until the
/// peer has read them all, in MB/s.
double tcp_bandwidth_at(std::size_t size, bool nodelay = true) {
  tcp_pair pair(nodelay);
  std::thread sink([&pair, size] {
    std::vector<std::uint8_t> buf(std::max<std::size_t>(size, 64 << 10));
    while (::recv(pair.server, buf.data(), buf.size(), 0) > 0) {
    }
    const std::uint8_t done = 1;
    write_exact(pair.server, &done, 1);
  });
  std::vector<std::uint8_t> buf(size, 0x42);
  int sent = 0;
  const auto start = clock_type::now();
  while (time_left(start, sent, 4 * depth, 1 << 22)) {
    write_exact(pair.client, buf.data(), size);
    ++sent;
  }
  (void)::shutdown(pair.client, SHUT_WR);
  std::uint8_t done = 0;
  read_exact(pair.client, &done, 1);
  const double sec = std::chrono::duration<double>(clock_type::now() - start).count();
  sink.join();
  return static_cast<double>(size) * sent / sec / 1e6;
}

/// 64 B messages per second, in millions: RDMA writes kept `depth` deep
/// (each completed, i.e. placed at the peer) against a TCP stream of 64 B
/// writes (each in the peer's socket buffer when counted).
double soft_message_rate(int /*rounds*/) { return soft_write_bandwidth_at(small) / small; }
double tcp_message_rate(int /*rounds*/) { return tcp_bandwidth_at(small, false) / small; }
double tcp_nodelay_message_rate(int /*rounds*/) { return tcp_bandwidth_at(small, true) / small; }

struct sweep_point {
  std::size_t size;
  double tcp_latency_us;
  double soft_latency_us;
  double tcp_mbps;
  double soft_mbps;
};

std::vector<sweep_point> sweep() {
  std::vector<sweep_point> points;
  for (std::size_t size = sweep_from; size <= sweep_max; size *= 4) {
    std::vector<double> tl, sl, tb, sb;
    for (int r = 0; r < sweep_rounds; ++r) {
      tl.push_back(tcp_write_latency(size));
      sl.push_back(soft_write_latency(size));
      tb.push_back(tcp_bandwidth_at(size));
      sb.push_back(soft_write_bandwidth_at(size));
    }
    points.push_back({size, median(tl), median(sl), median(tb), median(sb)});
    const auto& p = points.back();
    std::printf(
        "  %8zu B  latency: TCP %9.1f us  soft %9.1f us  (%.2f)   bandwidth: TCP %7.0f "
        "MB/s  soft %7.0f MB/s  (%.2f)\n",
        size, p.tcp_latency_us, p.soft_latency_us, p.soft_latency_us / p.tcp_latency_us, p.tcp_mbps,
        p.soft_mbps, p.soft_mbps / p.tcp_mbps);
    std::fflush(stdout);
  }
  return points;
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

void write_json(const std::string& path, const paired& rtt, const paired& bw, const paired& rate,
                const std::vector<sweep_point>& points) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) throw std::runtime_error("cannot write " + path);
  std::fprintf(f, "{\n  \"bench\": \"soft_datapath_bench\",\n");
  std::fprintf(f,
               "  \"rtt_64b_us\": {\"tcp\": %.3f, \"soft\": %.3f, \"ratio\": %.3f},\n"
               "  \"write_bw_64k_qd%d_mbps\": {\"tcp\": %.1f, \"soft\": %.1f, \"ratio\": "
               "%.3f},\n",
               rtt.tcp, rtt.soft, rtt.ratio, depth, bw.tcp, bw.soft, bw.ratio);
  std::fprintf(f,
               "  \"msg_rate_64b_qd%d_mops\": {\"tcp\": %.4f, \"soft\": %.4f, \"ratio\": "
               "%.3f},\n  \"sweep\": [",
               depth, rate.tcp, rate.soft, rate.ratio);
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto& p = points[i];
    std::fprintf(f,
                 "%s\n    {\"size\": %zu, \"tcp_latency_us\": %.3f, \"soft_latency_us\": "
                 "%.3f, \"tcp_mbps\": %.1f, \"soft_mbps\": %.1f}",
                 i ? "," : "", p.size, p.tcp_latency_us, p.soft_latency_us, p.tcp_mbps,
                 p.soft_mbps);
  }
  std::fprintf(f, "\n  ]\n}\n");
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    // `soft_datapath_bench rtt|bw`: one soft figure only (for profiling).
    if (argc > 1 && std::string(argv[1]) == "rtt") {
      std::printf("soft send/recv round trip %.1f us\n", soft_rtt(paired_rounds));
      return 0;
    }
    // `soft_datapath_bench sweep [FROM]`: the size sweep alone, from FROM bytes.
    if (argc > 1 && std::string(argv[1]) == "sweep") {
      if (argc > 2) sweep_from = std::max<std::size_t>(64, std::stoul(argv[2]));
      (void)sweep();
      return 0;
    }
    // `soft_datapath_bench rate soft|tcp|window [SECONDS]`: one 64 B message-rate figure
    // alone, for SECONDS (default 0.3): what strace and perf look at.
    if (argc > 2 && std::string(argv[1]) == "rate") {
      const std::string what = argv[2];
      if (argc > 3) sweep_point_s = std::stod(argv[3]);
      if (what == "window")
        std::printf("window bound %d / sleeping TCP round trip %.3f M/s\n", depth,
                    depth / tcp_rtt(1, false));
      else
        std::printf("%s 64 B messages %.3f M/s\n", what == "tcp" ? "TCP stream" : "soft QD16",
                    what == "tcp" ? tcp_message_rate(1) : soft_message_rate(1));
      return 0;
    }
    // `soft_datapath_bench bw-at|lat-at SIZE [SECONDS] [soft|tcp]`: one sweep point at SIZE,
    // both sides or one, for SECONDS (default 0.3): what perf looks at.
    if (argc > 2 && (std::string(argv[1]) == "bw-at" || std::string(argv[1]) == "lat-at")) {
      const bool bw = std::string(argv[1]) == "bw-at";
      const std::size_t size = std::stoul(argv[2]);
      if (argc > 3) sweep_point_s = std::stod(argv[3]);
      const std::string only = argc > 4 ? argv[4] : "";
      if (only != "tcp" && bw)
        std::printf("soft RDMA write QD%d, %zu B: %.0f MB/s\n", depth, size,
                    soft_write_bandwidth_at(size));
      if (only != "tcp" && !bw)
        std::printf("soft RDMA write, %zu B: %.1f us\n", size, soft_write_latency(size));
      if (only != "soft" && bw)
        std::printf("TCP stream, %zu B messages: %.0f MB/s\n", size, tcp_bandwidth_at(size));
      if (only != "soft" && !bw)
        std::printf("TCP, %zu B and a 1 B answer: %.1f us\n", size, tcp_write_latency(size));
      return 0;
    }
    if (argc > 1 && std::string(argv[1]) == "bw") {
      std::printf("soft RDMA write %.0f MB/s\n", soft_write_bandwidth(paired_rounds));
      return 0;
    }
    bool with_sweep = false;
    std::string json;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--quick") {
        paired_rounds = 3;
        bytes_per_round = std::size_t{64} << 20;
        sweep_rounds = 1;
        sweep_point_s = 0.1;
      } else if (a == "--sweep") {
        with_sweep = true;
      } else if (a == "--json" && i + 1 < argc) {
        json = argv[++i];
      } else {
        std::fprintf(
            stderr,
            "usage: %s [--quick] [--sweep] [--json FILE] | rtt | bw | rate "
            "soft|tcp|window [SECONDS] | sweep [FROM] | bw-at|lat-at SIZE [SECONDS] [soft|tcp]\n",
            argv[0]);
        return 2;
      }
    }
    const paired rtt = interleave(soft_rtt, [](int rounds) { return tcp_rtt(rounds); });
    const paired bw = interleave(soft_write_bandwidth, tcp_bandwidth);
    const paired rate = interleave(soft_message_rate, tcp_message_rate);
    const paired rate_nodelay = interleave(soft_message_rate, tcp_nodelay_message_rate);
    std::printf("64 B ping-pong round trip, median of %d rounds of %d (TCP and soft in turn):\n",
                paired_rounds, pings_per_round);
    std::printf("  raw TCP %8.1f us   soft send/recv %8.1f us   ratio %.2f (target <= 1.5)\n",
                rtt.tcp, rtt.soft, rtt.ratio);
    std::printf("64 KiB transfers, %d MiB per round, median of %d rounds (in turn):\n",
                static_cast<int>(bytes_per_round >> 20), paired_rounds);
    std::printf(
        "  raw TCP %8.0f MB/s soft RDMA write QD%d %8.0f MB/s  ratio %.2f (target >= 0.7)\n",
        bw.tcp, depth, bw.soft, bw.ratio);
    std::printf("64 B messages per second, %.1f s per point, median of %d rounds (in turn):\n",
                sweep_point_s, paired_rounds);
    std::printf(
        "  TCP stream %6.3f M/s   soft RDMA write QD%d %6.3f M/s   ratio %.2f (target >= 1.0)\n",
        rate.tcp, depth, rate.soft, rate.ratio);
    std::printf("  TCP_NODELAY stream %6.3f M/s   soft %6.3f M/s   ratio %.2f\n", rate_nodelay.tcp,
                rate_nodelay.soft, rate_nodelay.ratio);
    // A write completes when its ACK is back, so QD writes take at least one
    // round trip: were both ends asleep between frames, at most depth / (a
    // round trip in which both ends sleep) per second. The soft responder's
    // progress thread keeps polling for limits::progress_spin after work, so
    // it beats that bound; a TCP stream has no window at all.
    const paired window =
        interleave(soft_message_rate, [](int rounds) { return depth / tcp_rtt(rounds, false); });
    std::printf(
        "  window bound %d / sleeping TCP round trip %6.3f M/s   soft %6.3f M/s   ratio %.2f\n",
        depth, window.tcp, window.soft, window.ratio);
    // What fault-guarded copies into registered memory cost (docs/soft-provider.md,
    // "Memory safety"): the same round trip with plain copies, rounds in turn.
    const paired guard = interleave(soft_rtt, [](int rounds) {
      prov::soft_mem::unguarded_for_benchmark(true);
      const double us = soft_rtt(rounds);
      prov::soft_mem::unguarded_for_benchmark(false);
      return us;
    });
    std::printf("64 B round trip with fault-guarded copies vs plain memcpy:\n");
    std::printf("  memcpy  %8.1f us   guarded        %8.1f us   ratio %.2f (+%.2f us)\n", guard.tcp,
                guard.soft, guard.ratio, guard.soft - guard.tcp);
    std::vector<sweep_point> points;
    if (with_sweep) {
      std::printf("RDMA write vs TCP by message size (median of %d, soft/TCP in brackets):\n",
                  sweep_rounds);
      std::fflush(stdout);
      points = sweep();
    }
    if (!json.empty()) write_json(json, rtt, bw, rate, points);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "soft_datapath_bench: %s\n", e.what());
    return 1;
  }
}

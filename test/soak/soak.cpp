// Soak: one server and N clients that connect, transfer and disconnect at
// random for a bounded time, every byte checked end to end, with the
// process's descriptors and memory sampled after a warm-up and at the end.
//
//   soak [--duration S] [--clients N] [--seed X] [--warmup S]
//
// The server runs its own io_context on a thread; the clients are coroutines
// on a second io_context on the main thread. Each client owns a slice of the
// server's region and, per connection, does a random number of random
// operations:
//   write+read   RDMA write of random bytes at a random offset and length,
//                then RDMA read of the same range: both checksums must match;
//   write+verify RDMA write, then a SEND asking the server for the checksum of
//                that range of its own memory (it answers with a SEND): the
//                server's bytes must be the client's;
//   atomic       8-byte atomic write, flush, read back.
// A connection ends at random: the client disconnects, the client vanishes
// (closes without a disconnect), or the client asks the server to disconnect.
//
// Exit status 0 only when there was no error, no checksum mismatch, every
// server session ended, and descriptors and RSS stayed flat (see
// docs/reliability.md for the tolerance). The seed is printed; rerun with
// --seed to replay a client's sequence of operations.
#include "arpma/conn_req.hpp"
#include "arpma/connection.hpp"
#include "arpma/endpoint.hpp"
#include "arpma/error.hpp"
#include "arpma/mr.hpp"
#include "arpma/peer.hpp"
#include "support/open_fds.hpp"

#include <malloc.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using arpma::test::open_fds;

namespace {

constexpr std::size_t slice = 16 * 1024;  // each client's part of the server's region
constexpr std::size_t msg_size = 32;
constexpr int server_recvs = 4;
/// How much the samples may grow between the warm-up and the end. Both are
/// taken after malloc_trim(0), so RSS is live pages plus fragmentation, not
/// what the allocator merely keeps cached. A leak of one small object
/// (64 B with malloc's overhead) per connection over the ~5,000+ connections
/// of a 30 s run on a loaded 2-core machine is 320 KiB: over the heap
/// tolerance. Observed noise (glibc's thread caches off, see
/// without_thread_caches): heap -21..+25 KiB, RSS -36..+92 KiB (20 s runs).
constexpr long heap_tolerance_kib = 256;
constexpr long rss_tolerance_kib = 2048;

struct options {
  int duration = 30;
  int warmup = 3;
  int clients = 64;
  std::uint64_t seed = 0;
};

std::string test_addr() {
  const char* env = std::getenv("ARPMA_TEST_ADDR");  // NOLINT(concurrency-mt-unsafe)
  return env != nullptr && *env != '\0' ? env : "127.0.0.1";
}

/// FNV-1a, 64 bits: a checksum of what was written and what came back.
std::uint64_t checksum(const char* data, std::size_t len) {
  std::uint64_t h = 14695981039346656037ULL;
  for (std::size_t i = 0; i < len; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 1099511628211ULL;
  }
  return h;
}

/// Bytes the allocator has handed out and not got back (every arena):
/// unlike RSS, not blurred by caches and fragmentation.
long heap_kib() {
  const struct mallinfo2 mi = ::mallinfo2();
  return static_cast<long>((mi.uordblks + mi.hblkhd) / 1024);
}

long rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

/// What RSS is made of (anonymous or file-backed pages) and the thread count,
/// printed with each sample so that a growth can be told apart: the heap
/// (heap_kib) is anonymous; code paged in late, or a thread's stack, is not.
std::string memory_breakdown() {
  std::ifstream status("/proc/self/status");
  std::string line;
  std::string out;
  while (std::getline(status, line)) {
    for (const char* key : {"RssAnon:", "RssFile:", "Threads:"}) {
      if (line.rfind(key, 0) != 0) continue;
      std::string value = line.substr(std::string_view(key).size());
      value.erase(0, value.find_first_not_of(" \t"));
      out += (out.empty() ? "" : ", ") + std::string(key) + " " + value;
    }
  }
  return out;
}

/// A message, client -> server: what to check, or 'D' (disconnect me).
struct message {
  std::uint32_t kind = 0;  // 'V' verify, 'D' disconnect
  std::uint32_t len = 0;
  std::uint64_t offset = 0;  // in the server's region
};
static_assert(sizeof(message) <= msg_size);

struct counters {
  std::atomic<std::uint64_t> connections{0};
  std::atomic<std::uint64_t> client_disconnects{0};
  std::atomic<std::uint64_t> client_vanished{0};
  std::atomic<std::uint64_t> server_disconnects{0};
  std::atomic<std::uint64_t> write_reads{0};
  std::atomic<std::uint64_t> verifies{0};
  std::atomic<std::uint64_t> atomics{0};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> errors{0};
  std::atomic<std::uint64_t> mismatches{0};
  std::atomic<std::uint64_t> sessions{0};
  std::atomic<int> live_sessions{0};
};
counters stats;
std::mutex log_mutex;

void error(const char* what, const std::error_code& ec) {
  if (stats.errors++ < 20) {
    const std::lock_guard lock(log_mutex);
    std::fprintf(stderr, "soak: error: %s: %s\n", what, ec.message().c_str());
  }
}
bool failed(const char* what, const std::error_code& ec) {
  error(what, ec);
  return false;
}
void mismatch(const char* what, std::size_t client, std::uint64_t offset, std::uint32_t len) {
  if (stats.mismatches++ < 20) {
    const std::lock_guard lock(log_mutex);
    std::fprintf(stderr, "soak: MISMATCH: %s, client %zu, offset %llu, %u bytes\n", what, client,
                 static_cast<unsigned long long>(offset), len);
  }
}

// ---- the server -----------------------------------------------------------------------------

/// A recv that ends because the connection ended: expected, not an error.
const std::error_code aborted = arpma::error_code(asio::error::operation_aborted);
bool ended_by_close(const std::error_code& ec) {
  return ec == arpma::wc_errc::wr_flush_err || ec == aborted;
}

struct server;

/// One accepted connection: receives posted all the time; answers each
/// verify with the checksum of that range of the server's memory.
class session : public std::enable_shared_from_this<session> {
 public:
  explicit session(server& srv);
  session(const session&) = delete;
  session& operator=(const session&) = delete;
  ~session() { --stats.live_sessions; }
  void start(arpma::conn_req req);

 private:
  void post(int slot);
  void on_message(int slot, std::uint32_t len);
  void wait_event();

  server& srv_;
  std::vector<char> buf_ = std::vector<char>((server_recvs + 1) * msg_size);
  arpma::local_mr mr_;
  arpma::connection conn_;
  bool closing_ = false;
};

struct server {
  server(const arpma::peer& p, const std::string& addr, int clients)
      : memory(static_cast<std::size_t>(clients) * slice), peer(p) {
    auto m = arpma::local_mr::reg(peer, memory.data(), memory.size(),
                                  arpma::mr_usage::write_dst | arpma::mr_usage::read_src |
                                      arpma::mr_usage::flush_type_visibility);
    if (!m) throw std::system_error(m.error(), "server region");
    mr = std::move(m).value();
    auto e = arpma::endpoint::listen(io.get_executor(), peer, addr, "0");
    if (!e) throw std::system_error(e.error(), "listen");
    ep = std::move(e).value();
  }

  void accept_next() {
    ep.async_next_conn_req({}, [this](std::error_code ec, arpma::conn_req req) {
      if (ec) {
        if (ec != aborted) error("server: next_conn_req", ec);
        return;
      }
      accept_next();
      std::make_shared<session>(*this)->start(std::move(req));
    });
  }

  asio::io_context io;
  std::vector<char> memory;
  const arpma::peer& peer;
  arpma::local_mr mr;
  arpma::endpoint ep;
};

session::session(server& srv) : srv_(srv) {
  ++stats.live_sessions;
  ++stats.sessions;
}

void session::start(arpma::conn_req req) {
  auto m = arpma::local_mr::reg(srv_.peer, buf_.data(), buf_.size(),
                                arpma::mr_usage::recv | arpma::mr_usage::send);
  if (!m) return error("server: session mr", m.error());
  mr_ = std::move(m).value();
  const auto desc = srv_.mr.descriptor();
  req.async_connect(desc, [self = shared_from_this()](std::error_code ec, arpma::connection c) {
    if (ec) return error("server: accept", ec);
    self->conn_ = std::move(c);
    for (int i = 0; i < server_recvs; ++i) self->post(i);
    self->wait_event();
  });
}

void session::post(int slot) {
  conn_.async_recv(arpma::buffer(mr_, static_cast<std::size_t>(slot) * msg_size, msg_size).value(),
                   [self = shared_from_this(), slot](std::error_code ec, arpma::completion c) {
                     if (ec) {
                       if (!ended_by_close(ec)) error("server: recv", ec);
                       return;
                     }
                     self->on_message(slot, c.byte_len);
                   });
}

void session::on_message(int slot, std::uint32_t len) {
  message m;
  if (len != sizeof m) return error("server: message size", make_error_code(arpma::errc::unknown));
  std::memcpy(&m, buf_.data() + static_cast<std::size_t>(slot) * msg_size, sizeof m);
  if (m.kind == 'D') {
    ++stats.server_disconnects;
    if (auto ec = conn_.disconnect()) error("server: disconnect", ec);
    return;  // the closed event ends the session
  }
  if (m.kind != 'V' || m.offset + m.len > srv_.memory.size())
    return error("server: bad message", make_error_code(arpma::errc::invalid_argument));
  // The range is stable: its client waits for this answer before writing again.
  const std::uint64_t sum = checksum(srv_.memory.data() + m.offset, m.len);
  const std::size_t answer = server_recvs * msg_size;
  std::memcpy(buf_.data() + answer, &sum, sizeof sum);
  if (!closing_) post(slot);
  conn_.async_send(arpma::buffer(mr_, answer, sizeof sum).value(),
                   [self = shared_from_this()](std::error_code ec, arpma::completion) {
                     if (ec && !ended_by_close(ec)) error("server: send", ec);
                   });
}

void session::wait_event() {
  conn_.async_next_event([self = shared_from_this()](std::error_code ec, arpma::conn_event ev) {
    if (ec) {
      if (ec != aborted) error("server: next_event", ec);
      return;
    }
    if (ev == arpma::conn_event::closed || ev == arpma::conn_event::lost) {
      self->closing_ = true;
      if (auto e = self->conn_.close()) error("server: close", e);
      return;  // the receives end with operation_aborted, then the session goes
    }
    self->wait_event();
  });
}

// ---- the clients ----------------------------------------------------------------------------

struct client {
  std::size_t index = 0;
  std::mt19937_64 rng;
  std::vector<char> local = std::vector<char>(2 * slice + 2 * msg_size);
  arpma::local_mr mr;
};

using tuple_token = asio::as_tuple_t<asio::use_awaitable_t<>>;
constexpr tuple_token tok{};

template <class T>
T uniform(std::mt19937_64& rng, T lo, T hi) {
  return std::uniform_int_distribution<T>(lo, hi)(rng);
}

/// One random operation; false when the connection is no longer usable.
asio::awaitable<bool> one_op(client& c, arpma::connection& conn, const arpma::remote_mr& remote) {
  const std::size_t base = c.index * slice;
  const auto kind = uniform(c.rng, 0, 2);
  if (kind == 2) {  // atomic write, flush, read back
    const std::size_t off = uniform<std::size_t>(c.rng, 0, slice / 8 - 1) * 8;
    std::array<char, 8> value{};
    for (auto& b : value) b = static_cast<char>(c.rng());
    auto [e1, w] =
        co_await conn.async_atomic_write(arpma::buffer(remote, base + off, 8).value(), value, tok);
    if (e1) co_return failed("atomic_write", e1);
    auto [e2, f] = co_await conn.async_flush(arpma::buffer(remote, base + off, 8).value(),
                                             arpma::flush_type::visibility, tok);
    if (e2) co_return failed("flush", e2);
    auto [e3, r] = co_await conn.async_read(arpma::buffer(c.mr, slice, 8).value(),
                                            arpma::buffer(remote, base + off, 8).value(), tok);
    if (e3) co_return failed("read", e3);
    if (std::memcmp(value.data(), c.local.data() + slice, 8) != 0)
      mismatch("atomic write", c.index, off, 8);
    ++stats.atomics;
    stats.bytes += 16;
    co_return true;
  }
  const auto len = uniform<std::size_t>(c.rng, 1, slice);
  const auto off = uniform<std::size_t>(c.rng, 0, slice - len);
  for (std::size_t i = 0; i < len; ++i) c.local[i] = static_cast<char>(c.rng());
  const std::uint64_t sum = checksum(c.local.data(), len);
  auto [e1, w] = co_await conn.async_write(arpma::buffer(remote, base + off, len).value(),
                                           arpma::buffer(c.mr, 0, len).value(), tok);
  if (e1) co_return failed("write", e1);
  stats.bytes += len;
  if (kind == 0) {  // read it back
    std::memset(c.local.data() + slice, 0, len);
    auto [e2, r] = co_await conn.async_read(arpma::buffer(c.mr, slice, len).value(),
                                            arpma::buffer(remote, base + off, len).value(), tok);
    if (e2) co_return failed("read", e2);
    if (checksum(c.local.data() + slice, len) != sum)
      mismatch("read back", c.index, off, static_cast<std::uint32_t>(len));
    ++stats.write_reads;
    stats.bytes += len;
    co_return true;
  }
  // Ask the server what its memory holds there (RC order: the write is placed first).
  const std::size_t out = 2 * slice;
  const std::size_t in = out + msg_size;
  const message m{'V', static_cast<std::uint32_t>(len), base + off};
  std::memcpy(c.local.data() + out, &m, sizeof m);
  // The answer's receive may outlive this frame (a failed send, then close):
  // its result lives as long as its handler.
  auto answer = std::make_shared<std::optional<std::pair<std::error_code, arpma::completion>>>();
  conn.async_recv(arpma::buffer(c.mr, in, msg_size).value(),
                  [answer](std::error_code ec, arpma::completion x) { answer->emplace(ec, x); });
  auto [e2, s] = co_await conn.async_send(arpma::buffer(c.mr, out, sizeof m).value(), tok);
  if (e2) co_return failed("send", e2);
  const auto limit = clock_type::now() + 10s;
  while (!*answer && clock_type::now() < limit) {
    asio::steady_timer t(co_await asio::this_coro::executor, 1ms);
    co_await t.async_wait(asio::use_awaitable);
  }
  if (!*answer) co_return failed("recv", make_error_code(std::errc::timed_out));
  if ((*answer)->first) co_return failed("recv", (*answer)->first);
  std::uint64_t seen = 0;
  std::memcpy(&seen, c.local.data() + in, sizeof seen);
  if ((*answer)->second.byte_len != sizeof seen || seen != sum)
    mismatch("server's memory", c.index, off, static_cast<std::uint32_t>(len));
  ++stats.verifies;
  co_return true;
}

/// Ends the connection one of three ways.
asio::awaitable<void> end_connection(client& c, arpma::connection& conn) {
  const auto how = uniform(c.rng, 0, 9);
  if (how < 6) {
    auto [ec] = co_await conn.async_disconnect(tok);
    if (ec) error("disconnect", ec);
    ++stats.client_disconnects;
  } else if (how < 8) {
    ++stats.client_vanished;  // closed without a word: the server must notice
  } else {
    const std::size_t out = 2 * slice;
    const message m{'D', 0, 0};
    std::memcpy(c.local.data() + out, &m, sizeof m);
    auto [e1, s] = co_await conn.async_send(arpma::buffer(c.mr, out, sizeof m).value(), tok);
    if (e1) error("send D", e1);
    auto [e2, ev] = co_await conn.async_next_event(tok);
    if (e2 || ev != arpma::conn_event::closed) error("server's disconnect", e2);
  }
  if (auto ec = conn.close()) error("close", ec);
}

asio::awaitable<void> run_client(client& c, const arpma::peer& peer, std::string addr,
                                 std::string port, clock_type::time_point deadline) {
  while (clock_type::now() < deadline) {
    auto [ec, req] = co_await arpma::async_conn_req_new(peer, addr, port, {}, tok);
    if (ec) {
      error("conn_req_new", ec);
      asio::steady_timer t(co_await asio::this_coro::executor, 10ms);
      co_await t.async_wait(asio::use_awaitable);
      continue;
    }
    auto [ec2, conn] = co_await req.async_connect({}, tok);
    if (ec2) {
      error("connect", ec2);
      continue;
    }
    ++stats.connections;
    auto remote = arpma::remote_mr::from_descriptor(conn.private_data());
    if (!remote) {
      error("descriptor", remote.error());
      continue;
    }
    const int ops = uniform(c.rng, 1, 48);
    bool usable = true;
    for (int i = 0; i < ops && usable && clock_type::now() < deadline; ++i)
      usable = co_await one_op(c, conn, remote.value());
    co_await end_connection(c, conn);
  }
}

/// Runs every client until `deadline`, then waits (bounded) until the
/// server has closed every session.
bool run_phase(asio::io_context& io, std::vector<client>& clients, const arpma::peer& peer,
               const std::string& addr, const std::string& port, clock_type::time_point deadline) {
  std::size_t finished = 0;
  for (auto& c : clients)
    asio::co_spawn(io, run_client(c, peer, addr, port, deadline), [&](const std::exception_ptr& e) {
      ++finished;
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        error(x.what(), make_error_code(arpma::errc::unknown));
      }
    });
  const auto hard_end = deadline + 30s;
  while (finished < clients.size() && clock_type::now() < hard_end) {
    io.restart();
    io.run_for(10ms);
  }
  if (finished < clients.size()) return false;
  const auto drain_end = clock_type::now() + 10s;
  while (stats.live_sessions > 0 && clock_type::now() < drain_end) std::this_thread::sleep_for(5ms);
  return stats.live_sessions == 0;
}

/// The descriptor count once links closing in the background are gone.
std::size_t settled_fds() {
  std::size_t fds = open_fds();
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(20ms);
    const auto now = open_fds();
    if (now == fds) break;
    fds = now;
  }
  return fds;
}

bool parse(int argc, char** argv, options& o) {
  std::random_device rd;
  o.seed = (std::uint64_t{rd()} << 32) | rd();
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v, &end, 0);
    if (end == v || *end != '\0') return false;
    if (arg == "--duration")
      o.duration = static_cast<int>(n);
    else if (arg == "--warmup")
      o.warmup = static_cast<int>(n);
    else if (arg == "--clients")
      o.clients = static_cast<int>(n);
    else if (arg == "--seed")
      o.seed = n;
    else
      return false;
  }
  return o.duration > 0 && o.warmup >= 0 && o.clients > 0 && o.clients <= 4096;
}

/// glibc's per-thread caches (tcache: up to 7 chunks of each size up to
/// 1 KiB per thread) count as in use in mallinfo2 and survive malloc_trim:
/// with them on, the heap figure moved by up to +300 KiB between two samples
/// of the same program (their contents at that instant, not a leak). The
/// program runs itself again with them off, so what it judges is the
/// library's live memory.
void without_thread_caches(char** argv) {
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  constexpr std::string_view off = "glibc.malloc.tcache_count=0";
  const char* set = std::getenv("GLIBC_TUNABLES");  // NOLINT(concurrency-mt-unsafe)
  const std::string now = set != nullptr ? set : "";
  if (now.find(off) != std::string::npos) return;
  const std::string with = now.empty() ? std::string(off) : now + ":" + std::string(off);
  ::setenv("GLIBC_TUNABLES", with.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
  ::execv("/proc/self/exe", argv);
  std::fprintf(stderr, "soak: cannot run again without thread caches: %s\n", std::strerror(errno));
#else
  (void)argv;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  without_thread_caches(argv);
  options opt;
  if (!parse(argc, argv, opt)) {
    std::fprintf(stderr, "usage: %s [--duration S] [--clients N] [--seed X] [--warmup S]\n",
                 argv[0]);
    return 2;
  }
  const std::string addr = test_addr();
  std::printf("soak: seed %llu, %d clients, %d s (after a %d s warm-up), %s\n",
              static_cast<unsigned long long>(opt.seed), opt.clients, opt.duration, opt.warmup,
              addr.c_str());
  std::fflush(stdout);

  auto dev = arpma::get_ibv_context(addr, arpma::ibv_context_type::local);
  if (!dev) return failed("device", dev.error()) ? 0 : 1;
  auto p = arpma::peer::create(dev.value());
  if (!p) return failed("peer", p.error()) ? 0 : 1;
  const arpma::peer peer = std::move(p).value();

  std::optional<server> srv;
  srv.emplace(peer, addr, opt.clients);
  const std::string port = std::to_string(srv->ep.port());
  auto guard = asio::make_work_guard(srv->io);
  asio::post(srv->io, [&] { srv->accept_next(); });
  std::thread server_thread([&] { srv->io.run(); });

  std::vector<client> clients(static_cast<std::size_t>(opt.clients));
  for (std::size_t i = 0; i < clients.size(); ++i) {
    clients[i].index = i;
    clients[i].rng.seed(opt.seed + i);
    auto m = arpma::local_mr::reg(peer, clients[i].local.data(), clients[i].local.size(),
                                  arpma::mr_usage::write_src | arpma::mr_usage::read_dst |
                                      arpma::mr_usage::send | arpma::mr_usage::recv);
    if (!m) return failed("client mr", m.error()) ? 0 : 1;
    clients[i].mr = std::move(m).value();
  }

  asio::io_context io;
  bool drained = run_phase(io, clients, peer, addr, port,
                           clock_type::now() + std::chrono::seconds(opt.warmup));
  const auto fds_start = settled_fds();
  ::malloc_trim(0);  // both samples without what the allocator merely keeps cached
  const auto rss_start = rss_kib();
  const std::string memory_start = memory_breakdown();
  const auto heap_start = heap_kib();
  const auto connections_warmup = stats.connections.load();
  const auto t0 = clock_type::now();
  drained =
      run_phase(io, clients, peer, addr, port, t0 + std::chrono::seconds(opt.duration)) && drained;
  const double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  const auto fds_end = settled_fds();
  ::malloc_trim(0);
  const auto rss_end = rss_kib();
  const std::string memory_end = memory_breakdown();
  const auto heap_end = heap_kib();

  asio::post(srv->io, [&] { (void)srv->ep.shutdown(); });
  guard.reset();
  server_thread.join();
  srv.reset();

  const auto conns = stats.connections - connections_warmup;
  const auto ops = stats.write_reads + stats.verifies + stats.atomics;
  std::printf(
      "soak: %.1f s: connections %llu (%llu in all: %llu client disconnects, %llu vanished, %llu "
      "server disconnects; %llu server sessions)\n",
      secs, static_cast<unsigned long long>(conns),
      static_cast<unsigned long long>(stats.connections.load()),
      static_cast<unsigned long long>(stats.client_disconnects.load()),
      static_cast<unsigned long long>(stats.client_vanished.load()),
      static_cast<unsigned long long>(stats.server_disconnects.load()),
      static_cast<unsigned long long>(stats.sessions.load()));
  std::printf(
      "soak: operations %llu (write+read %llu, write+verify %llu, atomic %llu), %.1f MiB moved\n",
      static_cast<unsigned long long>(ops),
      static_cast<unsigned long long>(stats.write_reads.load()),
      static_cast<unsigned long long>(stats.verifies.load()),
      static_cast<unsigned long long>(stats.atomics.load()),
      static_cast<double>(stats.bytes.load()) / (1 << 20));
  std::printf("soak: errors %llu, checksum mismatches %llu, sessions left %d\n",
              static_cast<unsigned long long>(stats.errors.load()),
              static_cast<unsigned long long>(stats.mismatches.load()), stats.live_sessions.load());
  const auto per_conn = [conns](long kib) {
    return conns > 0 ? static_cast<double>(kib) * 1024 / static_cast<double>(conns) : 0.0;
  };
  std::printf(
      "soak: fds %zu -> %zu; RSS %ld -> %ld KiB (%+ld, tolerance %ld); heap in use %ld -> "
      "%ld KiB (%+ld, tolerance %ld = %.0f B per connection)\n",
      fds_start, fds_end, rss_start, rss_end, rss_end - rss_start, rss_tolerance_kib, heap_start,
      heap_end, heap_end - heap_start, heap_tolerance_kib, per_conn(heap_tolerance_kib));
  std::printf("soak: memory at the start: %s; at the end: %s\n", memory_start.c_str(),
              memory_end.c_str());
  bool ok = stats.errors == 0 && stats.mismatches == 0 && drained && conns > 0 && ops > 0;
  ok = ok && fds_end <= fds_start;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  std::printf("soak: RSS and heap not judged under a sanitizer (its allocator quarantines)\n");
#else
  ok =
      ok && rss_end - rss_start <= rss_tolerance_kib && heap_end - heap_start <= heap_tolerance_kib;
#endif
  std::printf("soak: %s (seed %llu)\n", ok ? "PASS" : "FAIL",
              static_cast<unsigned long long>(opt.seed));
  return ok ? 0 : 1;
}

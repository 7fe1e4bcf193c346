// Many concurrent connections on one io_context over the soft provider (issue 7).
// A server process (forked first, before any thread exists) accepts everything
// and holds it; this process opens N connections on one thread, K in flight,
// keeps them all open, then measures:
//   - setup time and rate (N connections, from the first request to the last
//     ESTABLISHED);
//   - file descriptors, from /proc/self/fd before and after, sorted by what
//     they are: TCP sockets (the soft provider's transport, one per
//     connection: on rdma-core the kernel's rdma_cm and the NIC carry the
//     connection and there is no socket), eventfds (arpma's event and
//     completion channels: the shared rdma_cm event channel and each
//     connection's completion channel, or one arpma::completion_channel
//     for all of a side's connections with --channel shared, the default),
//     anything else;
//   - RSS per connection: VmRSS after minus before, over N. The bench
//     registers no memory per connection, so this is what a connection costs
//     beyond its registered buffers (arpma's state, the provider's queues
//     and socket buffers in user space, Asio's per-descriptor state);
//   - traffic: one send on every connection at once, into a receive the
//     server posted when it accepted it (both sides' completions through
//     their completion channels) — the connections hold, not only exist;
//   - teardown time (async_disconnect of all, K in flight).
// RLIMIT_NOFILE is raised to the hard limit; when that cannot fit N
// connections on both sides the bench says so and opens as many as fit.
//
//   scale_bench [--connections N] [--in-flight K] [--channel shared|own] [--addr A]
//               [--json FILE]
#include "arpma/completion_channel.hpp"
#include "arpma/conn_req.hpp"
#include "arpma/connection.hpp"
#include "arpma/endpoint.hpp"
#include "arpma/mr.hpp"
#include "arpma/peer.hpp"

#include <boost/asio/io_context.hpp>

#include <dirent.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;

namespace {

struct options {
  int connections = 10000;
  int in_flight = 64;
  std::string addr = "127.0.0.1";
  std::string json;
  bool shared_channel = true;  ///< one completion channel per side, not one per connection
};

/// The cfg of a side's connections: on `channel` when there is one.
arpma::conn_cfg side_cfg(const arpma::completion_channel& channel) {
  arpma::conn_cfg cfg;
  channel.attach_to(cfg);
  return cfg;
}

constexpr std::size_t message_size = 8;

struct fd_census {
  int total = 0;
  int sockets = 0;
  int eventfds = 0;
  int other = 0;
};

fd_census count_fds() {
  fd_census c;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return c;
  const int own = ::dirfd(dir);
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.' || std::atoi(e->d_name) == own) continue;
    char target[256] = {};
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
    ++c.total;
    if (n > 0 && std::strncmp(target, "socket:", 7) == 0)
      ++c.sockets;
    else if (n > 0 && std::strstr(target, "eventfd") != nullptr)
      ++c.eventfds;
    else
      ++c.other;
  }
  ::closedir(dir);
  return c;
}

long vm_rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      long kib = 0;
      status >> kib;
      return kib;
    }
    status.ignore(4096, '\n');
  }
  return -1;
}

/// Raises the soft fd limit to the hard one; returns the soft limit now.
rlim_t raise_fd_limit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return 1024;
  lim.rlim_cur = lim.rlim_max;
  (void)::setrlimit(RLIMIT_NOFILE, &lim);
  (void)::getrlimit(RLIMIT_NOFILE, &lim);
  return lim.rlim_cur;
}

// ---- server (child process) ---------------------------------------------------------

/// Accepts until the parent closes `control`; holds every connection, each
/// with one receive posted.
int run_server(const options& opt, int control_write, int control_read) {
  const std::string& addr = opt.addr;
  auto dev = arpma::get_ibv_context(addr, arpma::ibv_context_type::local);
  if (!dev) return 1;
  auto peer = arpma::peer::create(dev.value()).value();
  asio::io_context io;
  arpma::completion_channel channel;
  if (opt.shared_channel)
    channel = arpma::completion_channel::create(io.get_executor(), peer).value();
  std::vector<char> inbox(static_cast<std::size_t>(opt.connections) * message_size);
  auto inbox_mr =
      arpma::local_mr::reg(peer, inbox.data(), inbox.size(), arpma::mr_usage::recv).value();
  int received = 0;
  auto ep = arpma::endpoint::listen(io.get_executor(), peer, addr, "0");
  if (!ep) {
    std::fprintf(stderr, "scale_bench server: listen: %s\n", ep.error().message().c_str());
    return 1;
  }
  std::vector<std::unique_ptr<arpma::connection>> held;
  int refused = 0;
  struct acceptor {
    arpma::endpoint& ep;
    std::vector<std::unique_ptr<arpma::connection>>& held;
    int& refused;
    const arpma::conn_cfg cfg;
    arpma::local_mr& inbox;
    int& received;
    void next() {
      ep.async_next_conn_req(cfg, [this](std::error_code ec, arpma::conn_req req) {
        if (ec) return;
        next();
        req.async_connect({}, [this](std::error_code ec2, arpma::connection c) {
          if (ec2) {
            ++refused;
            return;
          }
          const std::size_t slot = held.size() % (inbox.size() / message_size);
          held.push_back(std::make_unique<arpma::connection>(std::move(c)));
          held.back()->async_next_event([](std::error_code, arpma::conn_event) {});
          held.back()->async_recv(arpma::buffer(inbox, slot * message_size, message_size).value(),
                                  [this](std::error_code ec3, arpma::completion) {
                                    if (!ec3) ++received;
                                  });
        });
      });
    }
  } acc{ep.value(), held, refused, side_cfg(channel), inbox_mr, received};
  acc.next();
  const std::uint16_t port = ep.value().port();
  if (::write(control_write, &port, sizeof port) != sizeof port) return 1;
  // The parent closes its end when it is done; until then, serve.
  for (;;) {
    io.run_for(std::chrono::milliseconds(20));
    io.restart();
    pollfd control{control_read, POLLIN, 0};
    if (::poll(&control, 1, 0) > 0) {
      char byte = 0;
      if (::read(control_read, &byte, 1) <= 0) break;
    }
  }
  held.clear();
  io.restart();
  io.poll();  // the aborted receives' handlers
  (void)ep.value().shutdown();
  (void)inbox_mr.dereg();
  (void)peer.close();
  if (refused > 0) std::fprintf(stderr, "scale_bench server: %d accepts failed\n", refused);
  if (::write(control_write, &received, sizeof received) != sizeof received) return 1;
  return 0;
}

// ---- client ----------------------------------------------------------------------------

struct opener {
  asio::io_context& io;
  const arpma::peer& peer;
  std::string addr;
  std::string port;
  int total;
  std::vector<std::unique_ptr<arpma::connection>>& open;
  arpma::conn_cfg cfg;
  int started = 0;
  int done = 0;
  int failed = 0;
  std::string first_error;

  void start_one() {
    if (started == total) return;
    ++started;
    arpma::async_conn_req_new(
        io.get_executor(), peer, addr, port, cfg, [this](std::error_code ec, arpma::conn_req req) {
          if (ec) return finish(ec);
          req.async_connect({}, [this](std::error_code ec2, arpma::connection c) {
            if (!ec2) open.push_back(std::make_unique<arpma::connection>(std::move(c)));
            finish(ec2);
          });
        });
  }
  void finish(std::error_code ec) {
    ++done;
    if (ec) {
      ++failed;
      if (first_error.empty()) first_error = ec.message();
    }
    start_one();
  }
};

/// Runs `io` until `cond` or the deadline.
template <class Cond>
bool run_until(asio::io_context& io, Cond cond, std::chrono::seconds limit) {
  const auto deadline = clock_type::now() + limit;
  while (!cond() && clock_type::now() < deadline) {
    io.restart();
    io.run_for(std::chrono::milliseconds(10));
  }
  return cond();
}

int parse(int argc, char** argv, options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--connections" && has_value)
      o.connections = std::atoi(argv[++i]);
    else if (a == "--in-flight" && has_value)
      o.in_flight = std::atoi(argv[++i]);
    else if (a == "--addr" && has_value)
      o.addr = argv[++i];
    else if (a == "--json" && has_value)
      o.json = argv[++i];
    else if (a == "--channel" && has_value &&
             (std::strcmp(argv[i + 1], "shared") == 0 || std::strcmp(argv[i + 1], "own") == 0))
      o.shared_channel = std::strcmp(argv[++i], "shared") == 0;
    else
      return -1;
  }
  return o.connections > 0 && o.in_flight > 0 ? 0 : -1;
}

}  // namespace

int main(int argc, char** argv) {
  options opt;
  if (parse(argc, argv, opt) != 0) {
    std::fprintf(stderr,
                 "usage: %s [--connections N] [--in-flight K] [--channel shared|own] [--addr A] "
                 "[--json FILE]\n",
                 argv[0]);
    return 2;
  }
  const rlim_t limit = raise_fd_limit();
  // Each side needs a socket (the soft provider's transport) per connection
  // and, without a shared completion channel, an eventfd (the connection's
  // own channel); plus a few dozen fds of its own. The rdma_cm event channel
  // is one for all.
  const int fds_per_connection = opt.shared_channel ? 1 : 2;
  constexpr int reserve = 64;
  const int fit = (static_cast<int>(limit) - reserve) / fds_per_connection;
  const int wanted = opt.connections;
  if (fit < opt.connections) {
    const int needed = opt.connections * fds_per_connection + reserve;
    std::printf(
        "scale_bench: RLIMIT_NOFILE hard limit is %lu: %d connections need about %d fds per "
        "side; running with %d (for all of them, raise the hard limit: prlimit --nofile=%d:%d, "
        "which needs CAP_SYS_RESOURCE)\n",
        static_cast<unsigned long>(limit), opt.connections, needed, fit, needed, needed);
    opt.connections = fit;
  }

  int to_child[2];
  int from_child[2];
  if (::pipe(to_child) != 0 || ::pipe(from_child) != 0) return 1;
  const pid_t child = ::fork();
  if (child < 0) return 1;
  if (child == 0) {
    ::close(to_child[1]);
    ::close(from_child[0]);
    ::_exit(run_server(opt, from_child[1], to_child[0]));
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  std::uint16_t port = 0;
  if (::read(from_child[0], &port, sizeof port) != sizeof port) {
    std::fprintf(stderr, "scale_bench: the server did not start\n");
    return 1;
  }

  auto dev = arpma::get_ibv_context(opt.addr, arpma::ibv_context_type::remote);
  if (!dev) return 1;
  auto peer = arpma::peer::create(dev.value()).value();
  asio::io_context io;
  arpma::completion_channel channel;
  if (opt.shared_channel)
    channel = arpma::completion_channel::create(io.get_executor(), peer).value();
  const arpma::conn_cfg cfg = side_cfg(channel);
  std::vector<std::unique_ptr<arpma::connection>> open;
  open.reserve(static_cast<std::size_t>(opt.connections) + 1);

  // One connection first, closed again: the one-time costs (the soft
  // provider's progress thread, Asio's reactor, the shared event channel's
  // first use) stay out of the per-connection figures.
  {
    opener warm{io, peer, opt.addr, std::to_string(port), 1, open, cfg, 0, 0, 0, {}};
    warm.start_one();
    if (!run_until(
            io, [&] { return warm.done == 1; }, std::chrono::seconds(10)) ||
        warm.failed) {
      std::fprintf(stderr, "scale_bench: warm-up connection failed: %s\n",
                   warm.first_error.c_str());
      return 1;
    }
    open.clear();
    run_until(
        io, [] { return false; }, std::chrono::seconds(0));
  }

  const fd_census fds_before = count_fds();
  const long rss_before = vm_rss_kib();
  opener op{io, peer, opt.addr, std::to_string(port), opt.connections, open, cfg, 0, 0, 0, {}};
  const auto t0 = clock_type::now();
  for (int i = 0; i < opt.in_flight; ++i) op.start_one();
  run_until(
      io, [&] { return op.done == op.total; }, std::chrono::seconds(300));
  const double setup_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  const fd_census fds_after = count_fds();
  const long rss_after = vm_rss_kib();
  const int n = static_cast<int>(open.size());

  // Traffic: one send on every connection at once.
  std::vector<char> outbox(message_size, 'x');
  auto outbox_mr =
      arpma::local_mr::reg(peer, outbox.data(), outbox.size(), arpma::mr_usage::send).value();
  int sent = 0;
  int send_failed = 0;
  const auto t2 = clock_type::now();
  for (auto& c : open)
    c->async_send(arpma::buffer(outbox_mr, 0, message_size).value(),
                  [&](std::error_code ec, arpma::completion) { ++(ec ? send_failed : sent); });
  run_until(
      io, [&] { return sent + send_failed == n; }, std::chrono::seconds(120));
  const double traffic_s = std::chrono::duration<double>(clock_type::now() - t2).count();

  // Orderly teardown, K in flight.
  const auto t1 = clock_type::now();
  std::size_t next = 0;
  int closed = 0;
  std::function<void()> close_next = [&] {
    if (next == open.size()) return;
    auto* c = open[next++].get();
    c->async_disconnect([&](std::error_code) {
      ++closed;
      close_next();
    });
  };
  for (int i = 0; i < opt.in_flight; ++i) close_next();
  run_until(
      io, [&] { return closed == n; }, std::chrono::seconds(300));
  const double teardown_s = std::chrono::duration<double>(clock_type::now() - t1).count();
  open.clear();
  (void)outbox_mr.dereg();
  (void)channel.close();
  (void)peer.close();
  ::close(to_child[1]);
  int received = -1;
  if (::read(from_child[0], &received, sizeof received) != sizeof received) received = -1;
  int status = 0;
  (void)::waitpid(child, &status, 0);

  const double rss_per_conn = n > 0 ? static_cast<double>(rss_after - rss_before) / n : 0;
  const int arpma_fds = fds_after.eventfds - fds_before.eventfds;
  const int socket_fds = fds_after.sockets - fds_before.sockets;
  std::printf("%d connections on one io_context, %d in flight, soft provider on %s, %s%s\n", n,
              opt.in_flight, opt.addr.c_str(),
              opt.shared_channel ? "one completion channel per side"
                                 : "a completion channel per connection",
              n < wanted ? " (fewer than asked: see above)" : "");
  std::printf("  setup:    %.3f s (%.0f connections/s), failed %d%s%s\n", setup_s, n / setup_s,
              op.failed, op.failed ? ", first error: " : "", op.first_error.c_str());
  std::printf(
      "  fds:      +%d in all: +%d TCP sockets (soft provider transport), +%d eventfds "
      "(arpma's event and completion channels: %.3f per connection), +%d other\n",
      fds_after.total - fds_before.total, socket_fds, arpma_fds,
      n > 0 ? static_cast<double>(arpma_fds) / n : 0.0, fds_after.other - fds_before.other);
  std::printf(
      "  RSS:      +%ld KiB, %.1f KiB per connection (no registered buffers; target <= 64)\n",
      rss_after - rss_before, rss_per_conn);
  std::printf(
      "  traffic:  %d sends at once, %d completed, %d failed, %d received by the server, "
      "%.3f s\n",
      n, sent, send_failed, received, traffic_s);
  std::printf("  teardown: %.3f s (async_disconnect of all, %d in flight)\n", teardown_s,
              opt.in_flight);
  if (!opt.json.empty()) {
    if (FILE* f = std::fopen(opt.json.c_str(), "w")) {
      std::fprintf(f,
                   "{\n  \"bench\": \"scale_bench\",\n  \"connections_asked\": %d,\n"
                   "  \"connections\": %d,\n  \"in_flight\": %d,\n  \"failed\": %d,\n"
                   "  \"setup_s\": %.6f,\n  \"connections_per_s\": %.1f,\n"
                   "  \"teardown_s\": %.6f,\n  \"fd_limit\": %lu,\n  \"fds_delta\": %d,\n"
                   "  \"socket_fds_delta\": %d,\n  \"arpma_channel_fds_delta\": %d,\n"
                   "  \"other_fds_delta\": %d,\n  \"rss_delta_kib\": %ld,\n"
                   "  \"rss_per_connection_kib\": %.2f,\n  \"shared_channel\": %s,\n"
                   "  \"sends_completed\": %d,\n  \"sends_failed\": %d,\n"
                   "  \"server_received\": %d,\n  \"traffic_s\": %.6f\n}\n",
                   wanted, n, opt.in_flight, op.failed, setup_s, n / setup_s, teardown_s,
                   static_cast<unsigned long>(limit), fds_after.total - fds_before.total,
                   socket_fds, arpma_fds, fds_after.other - fds_before.other,
                   rss_after - rss_before, rss_per_conn, opt.shared_channel ? "true" : "false",
                   sent, send_failed, received, traffic_s);
      std::fclose(f);
    }
  }
  return op.failed == 0 && send_failed == 0 && received == n && WIFEXITED(status) &&
                 WEXITSTATUS(status) == 0
             ? 0
             : 1;
}

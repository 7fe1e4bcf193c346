// libFuzzer harness over one whole soft-provider link, as a hostile peer
// would drive it (docs/soft-provider.md, "Bounds"): the harness completes the
// handshake over real TCP (REQ, the application accepts with a QP and four
// posted receives, REP, RTU), then writes the input as the byte stream that
// follows it, half-closes, reads what the server answers until it closes,
// and tears the id down. The provider runs with small limits (64 KiB held
// behind RNR waits in total, 200 ms deadlines) so that inputs reach them.
//
// Substitutions, so that inputs reach the one registered region (its keys
// and address are random): the 4 bytes 'R' 'K' x y become its rkey, the 8
// bytes 'A' 'D' followed by 6 bytes become its base address plus that
// (big-endian) offset, wrapping.
//
// Oracle, after every input: no crash, no sanitizer report; the guard bytes
// around the region unchanged; while the link was up, held_bytes() never
// above the total plus one frame of this input; once the id is destroyed,
// held_bytes() back to 0; every kCheckEvery inputs, the process's fd count
// (sockets, eventfds, epoll, timerfds) equal to the first one (no link,
// socket or timer left behind).
#include "provider/soft/soft_provider.hpp"
#include "support/raw_peer.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace prov = arpma::provider;
using namespace std::chrono_literals;
using arpma::test::raw::open_for;
using arpma::test::raw::put_be;
using arpma::test::raw::read_exact;
using arpma::test::raw::wire_frame;

constexpr std::size_t kTotal = std::size_t{64} << 10;
constexpr std::size_t kGuard = 256;
constexpr std::size_t kRegion = 4096;
constexpr unsigned kCheckEvery = 256;
constexpr auto kWait = 1000ms;  // for one step of the handshake or teardown

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "soft_link_fuzz: %s\n", what);
  std::abort();
}

/// The descriptors of the kinds the provider makes (sockets, eventfds, epoll,
/// timerfds); libFuzzer opens pipes and /dev/null of its own as it goes.
std::size_t provider_fds() {
  std::size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
    if (target.rfind("socket:", 0) == 0 || target.rfind("anon_inode:", 0) == 0) ++n;
  }
  return n;
}

struct server {
  prov::soft_provider provider;
  prov::event_channel* channel = nullptr;
  prov::cm_id* listener = nullptr;
  prov::pd* pd = nullptr;
  prov::comp_channel* cc = nullptr;
  prov::cq* cq = nullptr;
  prov::mr* region_mr = nullptr;
  prov::mr* recv_mr = nullptr;
  std::vector<std::uint8_t> arena = std::vector<std::uint8_t>(kRegion + 2 * kGuard + 256, 0x5a);
  sockaddr_in addr{};
  std::size_t baseline_fds = 0;
  unsigned inputs = 0;

  server() {
    provider.set_limits({.handshake = 200ms, .frame = 200ms, .held_bytes_total = kTotal});
    channel = provider.create_event_channel().value();
    listener = provider.create_id(channel, 1).value();
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (provider.bind_addr(listener, reinterpret_cast<const sockaddr*>(&addr)) ||
        provider.listen(listener, 0))
      fail("listen");
    addr.sin_port = htons(provider.local_port(listener));
    auto dev = provider.find_device("127.0.0.1", false);
    if (!dev) fail("find_device");
    pd = provider.alloc_pd(dev.value()).value();
    cc = provider.create_comp_channel(dev.value()).value();
    cq = provider.create_cq(dev.value(), 256, cc).value();
    constexpr int all = prov::access::local_write | prov::access::remote_write |
                        prov::access::remote_read | prov::access::remote_atomic |
                        prov::access::flush_global | prov::access::flush_persistent;
    region_mr = provider.reg_mr(pd, region(), kRegion, all).value();
    recv_mr =
        provider.reg_mr(pd, region() + kRegion + kGuard, 256, prov::access::local_write).value();
  }
  server(const server&) = delete;
  server& operator=(const server&) = delete;
  ~server() {
    (void)provider.dereg_mr(recv_mr);
    (void)provider.dereg_mr(region_mr);
    (void)provider.destroy_id(listener);
    (void)provider.destroy_cq(cq);
    (void)provider.destroy_comp_channel(cc);
    (void)provider.dealloc_pd(pd);
    provider.destroy_event_channel(channel);
  }

  std::uint8_t* region() { return arena.data() + kGuard; }

  bool guards_intact() const {
    const auto intact = [this](std::size_t from, std::size_t to) {
      for (std::size_t i = from; i < to; ++i)
        if (arena[i] != 0x5a) return false;
      return true;
    };
    return intact(0, kGuard) && intact(kGuard + kRegion, 2 * kGuard + kRegion);
  }

  /// The next event of `type` within kWait (others, of earlier links, skipped).
  bool next(prov::cm_event_type type, prov::cm_event& out) {
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!provider.get_cm_event_nonblocking(channel, out)) {
        if (out.type == type) return true;
        continue;
      }
      pollfd ready{provider.event_channel_fd(channel), POLLIN, 0};
      (void)::poll(&ready, 1, 10);
    }
    return false;
  }

  std::vector<std::uint8_t> substituted(const std::uint8_t* data, std::size_t size) {
    std::vector<std::uint8_t> out;
    out.reserve(size);
    const std::uint32_t rkey = provider.mr_rkey(region_mr);
    const auto base = reinterpret_cast<std::uintptr_t>(region());
    for (std::size_t i = 0; i < size;) {
      if (i + 4 <= size && data[i] == 'R' && data[i + 1] == 'K') {
        put_be(out, rkey, 4);
        i += 4;
      } else if (i + 8 <= size && data[i] == 'A' && data[i + 1] == 'D') {
        std::uint64_t offset = 0;
        for (std::size_t k = 2; k < 8; ++k) offset = (offset << 8) | data[i + k];
        put_be(out, base + offset, 8);
        i += 8;
      } else {
        out.push_back(data[i++]);
      }
    }
    return out;
  }

  /// One link: handshake, the stream, the end; false if the handshake failed.
  bool run(const std::vector<std::uint8_t>& stream, std::size_t& peak_held) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeval timeout{0, 200'000};
    (void)::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) fail("connect");
    const auto req = wire_frame(1, {0xff, 0xff, 7, 7, 0, 0, 0, 1});
    bool ok = ::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size());
    prov::cm_event e;
    ok = ok && next(prov::cm_event_type::connect_request, e);
    prov::cm_id* id = ok ? e.id : nullptr;
    if (id != nullptr) {
      prov::qp_config config;
      config.send_cq = cq;
      config.recv_cq = cq;
      config.max_send_wr = 16;
      config.max_recv_wr = 16;
      ok = !provider.create_qp(id, pd, config);
      for (std::uint32_t i = 0; ok && i < 4; ++i) {
        const auto at = reinterpret_cast<std::uintptr_t>(region() + kRegion + kGuard) + 64 * i;
        ok = !provider.post_recv(id, {i, {at, 64, provider.mr_lkey(recv_mr)}});
      }
      ok = ok && !provider.accept(id, {}) && read_exact(fd, 12 + 8).size() == 20;
      const auto rtu = wire_frame(4, {});
      ok = ok && ::send(fd, rtu.data(), rtu.size(), MSG_NOSIGNAL) == 12 &&
           next(prov::cm_event_type::established, e);
    }
    if (ok) {
      // Whatever the socket takes within its timeout (a paused reader may take less).
      (void)::send(fd, stream.data(), stream.size(), MSG_NOSIGNAL);
      peak_held = std::max(peak_held, provider.held_bytes());
      ::shutdown(fd, SHUT_WR);
      (void)open_for(fd, 300ms);  // what the server answers, until it closes
      peak_held = std::max(peak_held, provider.held_bytes());
    }
    ::close(fd);
    std::array<prov::work_completion, 32> wcs{};
    for (;;) {
      const auto n = provider.poll_cq(cq, wcs);
      if (!n || n.value() == 0) break;
    }
    if (id != nullptr) {
      provider.destroy_qp(id);
      (void)provider.destroy_id(id);
    }
    while (!provider.get_cm_event_nonblocking(channel, e)) {
    }
    return ok;
  }
};

server& the_server() {
  static server s;
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  server& s = the_server();
  const auto stream = s.substituted(data, size);
  std::size_t peak = 0;
  if (!s.run(stream, peak)) fail("the handshake of a fresh link failed");
  // One frame of this input may cross the total before its link stops reading.
  if (peak > kTotal + stream.size() + 64) fail("held past the provider total");
  if (!s.guards_intact()) fail("bytes outside the registered region changed");
  // The id's teardown finishes on the progress thread: the held bytes go with it.
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (s.provider.held_bytes() != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  if (s.provider.held_bytes() != 0) fail("held bytes left after the link was destroyed");
  if (s.inputs++ % kCheckEvery == 0) {
    const auto settle = std::chrono::steady_clock::now() + 6s;  // linger: 5 s at most
    std::size_t fds = provider_fds();
    while (s.baseline_fds != 0 && fds > s.baseline_fds &&
           std::chrono::steady_clock::now() < settle) {
      std::this_thread::sleep_for(10ms);
      fds = provider_fds();
    }
    if (s.baseline_fds == 0) s.baseline_fds = fds;
    if (fds > s.baseline_fds) {
      for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        std::fprintf(stderr, "fd %s -> %s\n", e.path().filename().c_str(),
                     std::filesystem::read_symlink(e.path(), ec).c_str());
      }
      fail("descriptors left behind");
    }
  }
  return 0;
}

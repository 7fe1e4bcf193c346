// libFuzzer harness for the soft provider's connection-manager wire protocol
// (docs/soft-provider.md, "Wire protocol"), end to end: the bytes go over a
// real TCP connection to a listening soft_provider, whose progress thread
// parses them (read_request / parse_header / bounds_of / read_frame /
// on_frame), and the application side answers the CONNECT_REQUESTs that come
// out of it. Nothing of the parser is copied here.
//
// Input layout:
//   byte 0   control
//            bits 0-1  answer to a CONNECT_REQUEST: 0 destroy unanswered
//                      (REJ 28 on the wire), 1 accept, 2 reject, 3 accept and
//                      disconnect when ESTABLISHED arrives
//            bit  2    end the stream with close() instead of shutdown(SHUT_WR)
//                      followed by reading to the end
//            bit  3    reject/accept with private data (the last bytes of the
//                      input, up to the call's limit)
//   byte 1   split point: the stream is written in two parts, the first
//            min(byte 1, size) bytes, then (after answering a CONNECT_REQUEST
//            the first part produced, if any) the rest
//   byte 2.. the byte stream the listener receives
//
// Oracle: no crash, no sanitizer report (ASan/UBSan/LSan), and the listener
// keeps working: every kCheckEvery inputs a well-formed REQ must produce a
// CONNECT_REQUEST with exactly its private data, and the reject of it a REJ
// frame with reason 28; otherwise the harness aborts.
#include "provider/soft/soft_provider.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

namespace prov = arpma::provider;
using clock_type = std::chrono::steady_clock;

constexpr std::uint64_t kListenerContext = 0xA5A5'0001;
constexpr int kPollMs = 10;  // one poll() wait, kept small for exec/s
constexpr auto kInputBudget = std::chrono::milliseconds(60);  // per input, worst case
constexpr unsigned kCheckEvery = 256;                         // liveness check period (inputs)

/// SOFT_CM_FUZZ_VERBOSE=1: print each input's events (to check what a seed reaches).
bool verbose() {
  static const bool on = std::getenv("SOFT_CM_FUZZ_VERBOSE") != nullptr;
  return on;
}

[[noreturn]] void fail(const char* what, int err = 0) {
  std::fprintf(stderr, "soft_cm_frames_fuzz: %s%s%s\n", what, err ? ": " : "",
               err ? std::strerror(err) : "");
  std::abort();
}

// ---- frames, built per docs/soft-provider.md (not with the provider's code) --

void put_u32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(v >> shift));
}

std::vector<std::uint8_t> req_frame(const std::uint8_t* pdata, std::size_t len) {
  std::vector<std::uint8_t> f;
  put_u32(f, 0x4152504d);  // magic "ARPM"
  f.push_back(1);          // version
  f.push_back(1);          // type REQ
  f.push_back(0);          // flags
  f.push_back(0);
  put_u32(f, static_cast<std::uint32_t>(8 + len));
  f.insert(f.end(), {16, 16, 7, 7});  // resources, depth, retry, rnr retry
  put_u32(f, 0);                      // QP number: none
  f.insert(f.end(), pdata, pdata + len);
  return f;
}

// ---- the listener, created once ----------------------------------------------

struct fixture {
  prov::soft_provider provider;
  prov::event_channel* channel = nullptr;
  prov::cm_id* listener = nullptr;
  int channel_fd = -1;
  sockaddr_in addr{};

  fixture() {
    auto ch = provider.create_event_channel();
    if (!ch.has_value()) fail("create_event_channel");
    channel = ch.value();
    channel_fd = provider.event_channel_fd(channel);
    auto id = provider.create_id(channel, kListenerContext);
    if (!id.has_value()) fail("create_id");
    listener = id.value();
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (auto ec = provider.bind_addr(listener, reinterpret_cast<const sockaddr*>(&addr)))
      fail("bind_addr", ec.value());
    if (auto ec = provider.listen(listener, 0)) fail("listen", ec.value());
    addr.sin_port = htons(provider.local_port(listener));
    if (addr.sin_port == 0) fail("local_port");
  }
  fixture(const fixture&) = delete;
  fixture& operator=(const fixture&) = delete;
  // At exit (libFuzzer calls exit()): every id goes before the provider, so
  // LeakSanitizer's final check sees the whole teardown.
  ~fixture() {
    drain_and_destroy_all();
    (void)provider.destroy_id(listener);
    provider.destroy_event_channel(channel);
  }

  /// Takes every queued event; CONNECT_REQUEST ids that are not `keep` are
  /// destroyed at once (requests left over from an earlier input).
  void drain_and_destroy_all() {
    prov::cm_event ev;
    while (!provider.get_cm_event_nonblocking(channel, ev)) {
      if (ev.type == prov::cm_event_type::connect_request) (void)provider.destroy_id(ev.id);
    }
  }
};

fixture& the_fixture() {
  static fixture f;
  return f;
}

int connect_raw(const sockaddr_in& addr) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket", errno);
  const int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
    fail("connect to the listener", errno);
  return fd;
}

/// Writes all of it unless the peer has gone (then the rest is dropped).
void send_all(int fd, const std::uint8_t* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;  // EPIPE / ECONNRESET: the listener closed this link, which is allowed
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

/// Reads what is there without blocking; false at end of stream (or error).
bool read_some(int fd, std::vector<std::uint8_t>* keep) {
  std::array<std::uint8_t, 512> buf{};
  for (;;) {
    const ssize_t r = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (r > 0) {
      if (keep) keep->insert(keep->end(), buf.data(), buf.data() + r);
      continue;
    }
    if (r == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

/// One input's application side: the passive id of its CONNECT_REQUEST (if
/// any) and what to do with it.
struct session {
  fixture& fx;
  unsigned action;
  const std::uint8_t* answer_data;
  std::uint8_t answer_len;
  prov::cm_id* passive = nullptr;
  bool disconnect_on_established = false;

  void answer(prov::cm_id* id, std::uint8_t accept_limit, std::uint8_t reject_limit) {
    passive = id;
    switch (action) {
      case 1:
      case 3: {
        prov::conn_param p;
        p.private_data = answer_len ? answer_data : nullptr;
        p.private_data_len = std::min(answer_len, accept_limit);
        (void)fx.provider.accept(id, p);
        disconnect_on_established = action == 3;
        break;
      }
      case 2: {
        const std::uint8_t len = std::min(answer_len, reject_limit);
        (void)fx.provider.reject(id, len ? answer_data : nullptr, len);
        break;
      }
      default: break;  // destroyed unanswered at the end
    }
  }

  /// Handles the queued events; true if one arrived.
  bool handle_events() {
    bool any = false;
    prov::cm_event ev;
    while (!fx.provider.get_cm_event_nonblocking(fx.channel, ev)) {
      any = true;
      if (verbose())
        std::fprintf(stderr, "  event %d status %d pdata %u\n", static_cast<int>(ev.type),
                     ev.status, ev.private_data_len);
      if (ev.type == prov::cm_event_type::connect_request) {
        if (ev.context != kListenerContext) fail("CONNECT_REQUEST with a foreign context");
        if (ev.private_data_len > prov::max_connect_private_data)
          fail("CONNECT_REQUEST with more private data than a REQ carries");
        if (passive == nullptr) {
          answer(ev.id, prov::max_accept_private_data, prov::max_reject_private_data);
        } else {
          // A request left over from an earlier input (its link is gone).
          (void)fx.provider.destroy_id(ev.id);
        }
      } else if (ev.id == passive && ev.type == prov::cm_event_type::established &&
                 disconnect_on_established) {
        (void)fx.provider.disconnect(passive);
      }
    }
    return any;
  }

  void finish() {
    handle_events();
    if (passive != nullptr) (void)fx.provider.destroy_id(passive);
    passive = nullptr;
  }
};

/// Waits (≤ kPollMs) for the channel or the socket; returns poll's revents of
/// the socket (0 when it had nothing).
short wait_once(const fixture& fx, int fd, int timeout_ms) {
  pollfd p[2] = {{fx.channel_fd, POLLIN, 0}, {fd, POLLIN, 0}};
  const int n = ::poll(p, fd >= 0 ? 2 : 1, timeout_ms);
  if (n < 0 && errno != EINTR) fail("poll", errno);
  return fd >= 0 ? p[1].revents : 0;
}

/// Liveness: a well-formed REQ with 56 bytes of private data must arrive as a
/// CONNECT_REQUEST carrying exactly those bytes; rejecting it must send a REJ
/// with reason 28 and no private data.
void check_listener(fixture& fx, unsigned round) {
  fx.drain_and_destroy_all();
  std::array<std::uint8_t, prov::max_connect_private_data> pdata{};
  for (std::size_t i = 0; i < pdata.size(); ++i)
    pdata[i] = static_cast<std::uint8_t>(round * 31 + i);
  const auto req = req_frame(pdata.data(), pdata.size());
  const int fd = connect_raw(fx.addr);
  send_all(fd, req.data(), req.size());
  const auto deadline = clock_type::now() + std::chrono::seconds(5);
  prov::cm_event ev;
  for (;;) {
    if (!fx.provider.get_cm_event_nonblocking(fx.channel, ev)) {
      if (ev.type != prov::cm_event_type::connect_request) continue;  // stale
      // Our connection is the only one open, but an older request may still
      // have been in flight: take the one with our private data.
      if (ev.private_data_len == pdata.size() &&
          std::memcmp(ev.private_data.data(), pdata.data(), pdata.size()) == 0)
        break;
      (void)fx.provider.destroy_id(ev.id);
      continue;
    }
    if (clock_type::now() > deadline) fail("listener check: no CONNECT_REQUEST within 5 s");
    wait_once(fx, -1, 50);
  }
  if (ev.context != kListenerContext) fail("listener check: wrong context");
  if (auto ec = fx.provider.reject(ev.id, nullptr, 0)) fail("listener check: reject", ec.value());
  // Expect REJ: header (type 3, length 2) + reason 28, then end of stream.
  std::vector<std::uint8_t> got;
  while (clock_type::now() < deadline) {
    if (!read_some(fd, &got)) break;
    wait_once(fx, fd, 50);
  }
  static const std::uint8_t rej[] = {0x41, 0x52, 0x50, 0x4d, 1, 3, 0, 0, 0, 0, 0, 2, 0, 28};
  if (got.size() != sizeof rej || std::memcmp(got.data(), rej, sizeof rej) != 0)
    fail("listener check: the reject did not arrive as REJ 28 followed by end of stream");
  (void)fx.provider.destroy_id(ev.id);
  ::close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static unsigned inputs = 0;
  fixture& fx = the_fixture();
  if (inputs++ % kCheckEvery == 0) check_listener(fx, inputs);
  if (size < 2) return -1;  // not kept in the corpus

  const std::uint8_t control = data[0];
  const std::uint8_t* stream = data + 2;
  const std::size_t len = size - 2;
  const std::size_t split = std::min<std::size_t>(data[1], len);
  const bool abrupt = (control & 4) != 0;
  // Answer private data: the last bytes of the input (any length the call takes).
  const std::uint8_t answer_len =
      (control & 8) ? static_cast<std::uint8_t>(std::min<std::size_t>(len, 255)) : 0;
  session s{fx, control & 3u, stream + len - answer_len, answer_len};

  const auto deadline = clock_type::now() + kInputBudget;
  const int fd = connect_raw(fx.addr);

  // Part one; then give the progress thread the chance to turn it into a
  // CONNECT_REQUEST (or to drop the link) before the rest follows.
  send_all(fd, stream, split);
  bool open = true;
  if (split > 0 && split < len) {
    const short rev = wait_once(fx, fd, kPollMs);
    s.handle_events();
    if (rev != 0) open = read_some(fd, nullptr);
  }
  if (open) send_all(fd, stream + split, len - split);

  if (abrupt) {
    ::close(fd);
    // The progress thread sees the end of stream (or a reset); let it act.
    while (clock_type::now() < deadline) {
      wait_once(fx, -1, kPollMs);
      if (!s.handle_events()) break;
    }
    s.finish();
    return 0;
  }

  // Half-close, then read until the listener's side ends the stream: by then
  // the progress thread has parsed everything it will parse on this link.
  (void)::shutdown(fd, SHUT_WR);
  while (clock_type::now() < deadline) {
    const short rev = wait_once(fx, fd, kPollMs);
    s.handle_events();
    if (rev != 0 && !read_some(fd, nullptr)) break;
  }
  if (verbose())
    std::fprintf(stderr, "  input done: %s\n",
                 clock_type::now() < deadline ? "stream ended" : "budget spent");
  s.finish();
  ::close(fd);
  return 0;
}

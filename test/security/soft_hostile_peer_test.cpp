// A hostile peer against a legitimate soft-provider server, over a raw TCP
// socket (test/support/raw_peer.hpp), and registrations verbs would refuse.
// After each attack the server is alive, its memory unchanged except where a
// legitimate write was allowed, and what the attack made it hold stays within
// the documented bounds (docs/soft-provider.md, "Bounds").
#include "provider/soft/soft_provider.hpp"

#include "provider/soft/soft_memory.hpp"
#include "support/address_space.hpp"
#include "support/provider_events.hpp"
#include "support/raw_peer.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace soft_hostile_peer_test {

namespace {

namespace prov = arpma::provider;
using namespace arpma::test::raw;  // NOLINT(google-build-using-namespace): the wire vocabulary
using namespace std::chrono_literals;
using arpma::test::highest_mapping_end;
using arpma::test::page_size;
using arpma::test::pages;

std::optional<prov::cm_event> next_event(prov::provider& p, prov::event_channel* channel,
                                         std::chrono::milliseconds limit = wait_limit) {
  return arpma::test::next_event(p, channel, limit);
}
using prov::cm_event_type;

constexpr int all_access = prov::access::local_write | prov::access::remote_write |
                           prov::access::remote_read | prov::access::remote_atomic;

std::uint64_t addr_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

/// Sanitizers keep shadow memory and quarantines beside every allocation:
/// the RSS bounds below are widened for them (the unfixed defects grew the
/// server by 112 to 160 MiB, far past either bound).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr std::size_t rss_slack = 3;
#else
constexpr std::size_t rss_slack = 1;
#endif

/// Resident memory of this process, in bytes.
std::size_t rss() {
  std::ifstream statm("/proc/self/statm");
  std::size_t total = 0;
  std::size_t resident = 0;
  statm >> total >> resident;
  return resident * page_size();
}

// ---- registration --------------------------------------------------------------

class soft_registration : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = soft.find_device("127.0.0.1", false);
    ASSERT_TRUE(dev);
    pd = soft.alloc_pd(dev.value()).value();
  }
  void TearDown() override { EXPECT_FALSE(soft.dealloc_pd(pd)); }

  /// The errno reg_mr fails with (0 on success, which is deregistered).
  int reg_errno(void* addr, std::size_t length, int access) {
    auto m = soft.reg_mr(pd, addr, length, access);
    if (!m) return m.error().value();
    EXPECT_FALSE(soft.dereg_mr(m.value()));
    return 0;
  }

  prov::soft_provider soft;
  prov::pd* pd = nullptr;
};

TEST_F(soft_registration, refuses_what_ibv_reg_mr_refuses) {
  pages two(2);
  ASSERT_NE(two.base, nullptr);
  EXPECT_EQ(reg_errno(two.base, SIZE_MAX, all_access), EINVAL);                 // wraps
  EXPECT_EQ(reg_errno(two.base + 8, SIZE_MAX - 4, all_access), EINVAL);         // wraps
  EXPECT_EQ(reg_errno(reinterpret_cast<void*>(0x10), 64, all_access), EFAULT);  // NOLINT
  EXPECT_EQ(reg_errno(two.base, two.size, all_access), 0);
  // Past the highest mapping nothing is mapped.
  auto* top = reinterpret_cast<std::uint8_t*>(highest_mapping_end());        // NOLINT
  EXPECT_EQ(reg_errno(top, 64, 0), EFAULT);                                  // unmapped
  EXPECT_EQ(reg_errno(top - page_size(), 2 * page_size(), 0), EFAULT);       // half unmapped
  EXPECT_EQ(reg_errno(top - page_size(), std::size_t{1} << 30, 0), EFAULT);  // 1 GiB over a page
  two.revoke_from(1);
  EXPECT_EQ(reg_errno(two.base, 2 * page_size(), all_access), EFAULT);  // half inaccessible
  EXPECT_EQ(reg_errno(two.base + page_size(), 64, 0), EFAULT);          // inaccessible
  EXPECT_EQ(reg_errno(two.base, page_size(), all_access), 0);
}

TEST_F(soft_registration, write_access_needs_writable_pages) {
  pages read_only(1, PROT_READ);
  ASSERT_NE(read_only.base, nullptr);
  for (int write :
       {prov::access::local_write, prov::access::remote_write, prov::access::remote_atomic})
    EXPECT_EQ(reg_errno(read_only.base, read_only.size, write), EFAULT) << write;
  EXPECT_EQ(reg_errno(read_only.base, read_only.size, prov::access::remote_read), 0);
  pages none(1, PROT_NONE);
  EXPECT_EQ(reg_errno(none.base, none.size, prov::access::remote_read), EFAULT);
}

TEST(soft_memory, copies_report_a_fault_instead_of_taking_one) {
  ASSERT_TRUE(prov::soft_mem::copies_are_guarded()) << "no fault handler installed";
  pages p(2);
  std::vector<std::uint8_t> local(64, 0x42);
  EXPECT_TRUE(prov::soft_mem::copy_to_region(p.base, local.data(), local.size()));
  EXPECT_EQ(p.base[63], 0x42);
  std::uint8_t* second = p.base + page_size();
  p.revoke_from(1);
  auto* unmapped = reinterpret_cast<std::uint8_t*>(highest_mapping_end());  // NOLINT
  for (std::uint8_t* gone : {second, unmapped}) {
    EXPECT_FALSE(prov::soft_mem::copy_to_region(gone, local.data(), local.size()));
    EXPECT_FALSE(prov::soft_mem::copy_from_region(local.data(), gone, local.size()));
    EXPECT_FALSE(prov::soft_mem::store_u64_to_region(gone, 7));
  }
  // A copy that starts in memory that is there and runs into what is not.
  EXPECT_FALSE(prov::soft_mem::copy_to_region(second - 16, local.data(), local.size()));
  EXPECT_TRUE(prov::soft_mem::store_u64_to_region(p.base, 7));
  EXPECT_TRUE(prov::soft_mem::copy_from_region(local.data(), p.base, 8));
}

// ---- a legitimate server and a hostile peer -------------------------------------

/// The verbs objects either side of a test needs: an event channel, a PD, and
/// one CQ on its completion channel.
struct verbs_objects {
  void make(prov::soft_provider& soft) {
    auto dev = soft.find_device("127.0.0.1", false);
    ASSERT_TRUE(dev);
    ch = soft.create_event_channel().value();
    pd = soft.alloc_pd(dev.value()).value();
    cc = soft.create_comp_channel(dev.value()).value();
    cq = soft.create_cq(dev.value(), 64, cc).value();
  }
  void destroy(prov::soft_provider& soft) const {
    EXPECT_FALSE(soft.destroy_cq(cq));
    EXPECT_FALSE(soft.destroy_comp_channel(cc));
    EXPECT_FALSE(soft.dealloc_pd(pd));
    soft.destroy_event_channel(ch);
  }
  prov::event_channel* ch = nullptr;
  prov::pd* pd = nullptr;
  prov::comp_channel* cc = nullptr;
  prov::cq* cq = nullptr;
};

/// The server: a listener whose connections get a QP and one target region
/// the attacker knows the key of (as after an exchange of descriptors).
class soft_hostile_peer : public ::testing::Test, protected verbs_objects {
 protected:
  void SetUp() override {
    make(soft);
    // Short deadlines so that the tests of them are quick (default 10 s).
    soft.set_limits(test_limits());
    listener = soft.create_id(ch, 1).value();
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_FALSE(soft.bind_addr(listener, reinterpret_cast<const sockaddr*>(&any)));
    ASSERT_FALSE(soft.listen(listener, 64));
    std::memset(target.base, 0x11, target.size);
    auto m = soft.reg_mr(pd, target.base, target.size, all_access);
    ASSERT_TRUE(m);
    mr = m.value();
    rkey = soft.mr_rkey(mr);
  }

  void TearDown() override {
    for (int fd : fds) ::close(fd);
    for (prov::cm_id* id : ids) {
      soft.destroy_qp(id);
      EXPECT_FALSE(soft.destroy_id(id));
    }
    EXPECT_FALSE(soft.destroy_id(listener));
    EXPECT_FALSE(soft.dereg_mr(mr));
    destroy(soft);
  }

  /// A raw link that sent its REQ, and the server's id of it, with a QP
  /// (nullptr when no CONNECT_REQUEST came).
  std::pair<int, prov::cm_id*> requester() {
    const int fd = raw_connect(soft.local_port(listener));
    EXPECT_GE(fd, 0);
    fds.push_back(fd);
    EXPECT_TRUE(write_all(fd, wire_frame(1, {0xff, 0xff, 7, 7, 0, 0, 0, 1})));
    // Earlier attacks' links may have left DISCONNECTED / TIMEWAIT_EXIT.
    auto req = next_of(cm_event_type::connect_request);
    EXPECT_TRUE(req);
    if (!req) return {fd, nullptr};
    ids.push_back(req->id);
    prov::qp_config config;
    config.send_cq = cq;
    config.recv_cq = cq;
    EXPECT_FALSE(soft.create_qp(req->id, pd, config));
    return {fd, req->id};
  }

  /// A raw link through REQ / REP / RTU to an accepted id with a QP.
  int attacker() {
    const auto [fd, id] = requester();
    if (id == nullptr) return -1;
    EXPECT_FALSE(soft.accept(id, {}));
    EXPECT_EQ(read_exact(fd, 12 + 8).size(), 20u);
    EXPECT_TRUE(write_all(fd, wire_frame(4, {})));
    EXPECT_TRUE(next_of(cm_event_type::established));
    return fd;
  }

  std::optional<prov::cm_event> next_of(cm_event_type type) {
    for (;;) {
      auto e = next_event(soft, ch);
      if (!e || e->type == type) return e;
      if (e->type != cm_event_type::disconnected && e->type != cm_event_type::timewait_exit)
        return std::nullopt;
    }
  }

  /// A fresh legitimate reader still gets the region's bytes.
  void expect_server_serves(std::size_t offset, std::uint8_t value) {
    const int fd = attacker();
    ASSERT_TRUE(write_all(fd, read_frame(rkey, addr_of(target.base) + offset, 16)));
    const auto response = read_exact(fd, 12 + 16);
    ASSERT_EQ(response.size(), 28u);
    EXPECT_EQ(response[5], 25);  // READ_RESP
    for (std::size_t i = 12; i < response.size(); ++i) EXPECT_EQ(response[i], value) << i;
  }

  static constexpr std::chrono::milliseconds deadline{400};
  /// What SetUp gives the provider: short deadlines; tests may change more.
  virtual prov::soft_provider::limits test_limits() {
    return {.handshake = deadline, .frame = deadline};
  }
  prov::soft_provider soft;
  prov::cm_id* listener = nullptr;
  pages target{2};
  prov::mr* mr = nullptr;
  std::uint32_t rkey = 0;
  std::vector<int> fds;
  std::vector<prov::cm_id*> ids;
};

TEST_F(soft_hostile_peer, remote_access_to_memory_taken_away_after_registration_fails_cleanly) {
  const std::uint64_t second = addr_of(target.base) + page_size();
  target.revoke_from(1);
  // A WRITE there is refused (NAK 10, REM_ACCESS_ERR) instead of faulting.
  const int w = attacker();
  ASSERT_TRUE(write_all(w, write_frame(rkey, second, 64)));
  EXPECT_EQ(read_exact(w, 16), nak_access);
  // A READ there cannot be answered: the link closes, the server lives.
  const int r = attacker();
  ASSERT_TRUE(write_all(r, read_frame(rkey, second, 4096)));
  const auto got = read_exact(r, 12 + 4096);
  EXPECT_LT(got.size(), 12u + 4096u) << "answered with bytes of unmapped memory";
  EXPECT_TRUE(closed_by_peer(r));
  // An ATOMIC_WRITE there too.
  const int a = attacker();
  auto atomic = remote(rkey, second);
  atomic.insert(atomic.end(), 8, 0xcc);
  ASSERT_TRUE(write_all(a, wire_frame(21, atomic)));
  EXPECT_EQ(read_exact(a, 16), nak_access);
  expect_server_serves(0, 0x11);
}

TEST_F(soft_hostile_peer, a_header_announcing_8_mib_costs_nothing_until_bytes_arrive) {
  constexpr int links = 20;
  const std::size_t before = rss();
  for (int i = 0; i < links; ++i) {
    const int fd = attacker();
    // A SEND of 8 MiB announced, 16 bytes of it sent, the rest never.
    auto head = wire_frame(16, std::vector<std::uint8_t>(16, 0xee), 8u << 20);
    ASSERT_TRUE(write_all(fd, head));
  }
  // And links that announce the same before any handshake.
  for (int i = 0; i < links; ++i) {
    const int fd = raw_connect(soft.local_port(listener));
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
    ASSERT_TRUE(write_all(fd, wire_frame(16, {}, 8u << 20)));
  }
  std::this_thread::sleep_for(200ms);  // let the progress thread read what was sent
  const std::size_t grown = rss() > before ? rss() - before : 0;
  // Before the fix: 8 MiB allocated and zeroed per link (320 MiB here).
  EXPECT_LT(grown, rss_slack * (std::size_t{32} << 20))
      << "RSS grew by " << (grown >> 20) << " MiB";
  expect_server_serves(0, 0x11);
}

/// Sends `frame` without blocking until the peer stops reading (the socket
/// refuses more for `quiet`) or `cap` frames went; how many went.
std::size_t flood(int fd, const std::vector<std::uint8_t>& frame, std::size_t cap,
                  std::chrono::milliseconds quiet = 500ms) {
  std::vector<std::uint8_t> batch;
  constexpr std::size_t per_batch = 4096;
  for (std::size_t i = 0; i < per_batch; ++i) batch.insert(batch.end(), frame.begin(), frame.end());
  std::size_t bytes = 0;
  auto last_progress = std::chrono::steady_clock::now();
  while (bytes / frame.size() < cap) {
    const ssize_t n = ::send(fd, batch.data() + bytes % batch.size(),
                             batch.size() - bytes % batch.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      bytes += static_cast<std::size_t>(n);
      last_progress = std::chrono::steady_clock::now();
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (std::chrono::steady_clock::now() - last_progress > quiet) break;
      std::this_thread::sleep_for(1ms);
    } else {
      break;
    }
  }
  return bytes / frame.size();
}

TEST_F(soft_hostile_peer, empty_sends_behind_a_waiting_send_are_bounded_with_their_bookkeeping) {
  const int fd = attacker();
  // No receive is posted: the first SEND waits (RNR) and everything behind
  // it is held. Held frames count 64 bytes each besides their payload, so at
  // most 16 MiB / 64 = 262,144 are held before reading stops.
  ASSERT_TRUE(write_all(fd, wire_frame(16, {1, 2, 3, 4})));
  const std::size_t before = rss();
  constexpr std::size_t cap = 4'000'000;  // 128 MiB held before the fix
  const std::size_t sent = flood(fd, wire_frame(16, {}), cap);
  const std::size_t grown = rss() > before ? rss() - before : 0;
  EXPECT_LT(sent, cap) << "the server never stopped reading";
  // What the kernel's socket buffers hold besides: a few MiB of 12-byte frames.
  EXPECT_LT(sent, std::size_t{262'144} + (std::size_t{16} << 20) / 12);
  EXPECT_LT(grown, rss_slack * (std::size_t{48} << 20))
      << "RSS grew by " << (grown >> 20) << " MiB";
  expect_server_serves(0, 0x11);
}

TEST_F(soft_hostile_peer, read_requests_never_collected_are_refused_past_the_responder_resources) {
  const int fd = attacker();
  const std::size_t before = rss();
  // 3,000 READs of 64 KiB, and never a byte read: before the bound the
  // server queued every response (+184 MiB). Now it holds at most 16
  // responses beyond what the kernel's socket buffers take, then closes.
  const auto request = read_frame(rkey, addr_of(target.base), 2 * page_size());
  std::vector<std::uint8_t> requests;
  for (int i = 0; i < 3000; ++i) requests.insert(requests.end(), request.begin(), request.end());
  ASSERT_TRUE(write_all(fd, requests));
  // The server's own end of the link, before a byte is read: an attacker
  // that drains as it goes is answered in full, and nothing is refused.
  EXPECT_TRUE(next_of(cm_event_type::disconnected));
  const std::size_t grown = rss() > before ? rss() - before : 0;
  EXPECT_TRUE(closed_by_peer(fd));
  EXPECT_LT(grown, rss_slack * (std::size_t{32} << 20))
      << "RSS grew by " << (grown >> 20) << " MiB";
  expect_server_serves(0, 0x11);
}

TEST_F(soft_hostile_peer, a_frame_left_incomplete_closes_the_link_after_the_frame_deadline) {
  const int fd = attacker();
  auto f = write_frame(rkey, addr_of(target.base), 64);
  f.resize(20);  // the header and part of the target, then nothing
  ASSERT_TRUE(write_all(fd, f));
  const auto lasted = open_for(fd, 5 * deadline);
  EXPECT_GE(lasted, deadline / 2);
  EXPECT_LT(lasted, 5 * deadline) << "the link stayed open";
  EXPECT_TRUE(next_of(cm_event_type::disconnected));
  expect_server_serves(0, 0x11);
}

TEST_F(soft_hostile_peer, a_frame_trickling_in_byte_by_byte_is_held_to_the_same_deadline) {
  const int fd = attacker();
  const auto f = write_frame(rkey, addr_of(target.base), 256);
  const auto start = std::chrono::steady_clock::now();
  std::size_t sent = 0;
  // One byte every 20 ms: progress, but a frame of 268 bytes takes 5 s.
  while (sent < f.size() && std::chrono::steady_clock::now() - start < 5 * deadline) {
    if (::send(fd, &f[sent], 1, MSG_NOSIGNAL) != 1) break;
    ++sent;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_LT(sent, f.size());
  EXPECT_LT(open_for(fd, 5 * deadline), 5 * deadline);
  EXPECT_TRUE(next_of(cm_event_type::disconnected));
}

// A large frame's payload trickling in, a byte every few µs, inside the
// progress thread's wait for the rest of a payload (20 µs a gap): the thread
// still serves the other links meanwhile, here a new connection's request,
// answered before the trickle ends. (The per-wake-up bound, 100 µs of
// waiting, is what guarantees it; on a busy machine a gap past 20 µs also
// sends the thread back to its reactor, so this test cannot tell the two
// apart, only that other links are served.)
TEST_F(soft_hostile_peer, a_payload_trickling_in_fast_leaves_the_progress_thread_to_others) {
  const pages big(16);  // a WRITE this large goes straight to its target
  auto big_mr = soft.reg_mr(pd, big.base, big.size, all_access);
  ASSERT_TRUE(big_mr);
  const int fd = attacker();
  ASSERT_GE(fd, 0);
  const int on = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  const auto f = write_frame(soft.mr_rkey(big_mr.value()), addr_of(big.base), big.size);
  const std::size_t head = 12 + 12 + 1024;  // header, target, the payload's first KiB
  ASSERT_TRUE(write_all(fd, std::vector<std::uint8_t>(f.begin(), f.begin() + head)));
  std::atomic<bool> served{false};
  std::atomic<bool> trickling{true};
  std::thread trickle([&] {
    // A byte every 5 µs or so, for 300 ms at most (the frame deadline is 400).
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t at = head; at < f.size() && !served.load(); ++at) {
      if (::send(fd, &f[at], 1, MSG_NOSIGNAL) != 1) break;
      const auto next = std::chrono::steady_clock::now() + 5us;
      while (std::chrono::steady_clock::now() < next) {
      }
      if (std::chrono::steady_clock::now() - start > 300ms) break;
    }
    trickling.store(false);
  });
  std::this_thread::sleep_for(20ms);  // the trickle is under way
  const auto [other, id] = requester();
  const bool during = trickling.load();
  served.store(true);
  trickle.join();
  EXPECT_GE(other, 0);
  EXPECT_NE(id, nullptr) << "the new connection's request was never served";
  EXPECT_TRUE(during) << "served only once the trickle had stopped";
  EXPECT_FALSE(soft.dereg_mr(big_mr.value()));
}

TEST_F(soft_hostile_peer, a_link_that_never_sends_its_req_is_closed) {
  const int fd = raw_connect(soft.local_port(listener));
  ASSERT_GE(fd, 0);
  fds.push_back(fd);
  const auto lasted = open_for(fd, 5 * deadline);
  EXPECT_GE(lasted, deadline / 2);
  EXPECT_LT(lasted, 5 * deadline);
}

TEST_F(soft_hostile_peer, an_accepted_request_whose_rtu_never_comes_is_unreachable) {
  const auto [fd, id] = requester();
  ASSERT_GE(fd, 0);
  ASSERT_NE(id, nullptr);
  ASSERT_FALSE(soft.accept(id, {}));
  // No RTU: the server's id does not stay half-open.
  auto e = next_event(soft, ch, 5 * deadline);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, cm_event_type::unreachable) << prov::to_string(e->type);
  EXPECT_EQ(e->status, -ETIMEDOUT);
  EXPECT_LT(open_for(fd, 5 * deadline), 5 * deadline);
}

/// Whether the server closed `fd` (EOF or reset) within `limit`.
bool closed_within(int fd, std::chrono::milliseconds limit) { return open_for(fd, limit) < limit; }

class soft_hostile_peer_few_half_open : public soft_hostile_peer {
 protected:
  prov::soft_provider::limits test_limits() override {
    return {.handshake = std::chrono::seconds(10), .half_open_per_listener = 4};
  }
};

TEST_F(soft_hostile_peer_few_half_open, links_past_the_half_open_cap_are_closed_at_once) {
  std::vector<int> links;
  for (int i = 0; i < 10; ++i) {
    const int fd = raw_connect(soft.local_port(listener));
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
    links.push_back(fd);
    std::this_thread::sleep_for(5ms);  // accepted in this order
  }
  // The 6 past the cap go at once; the 4 within it wait for their REQ (10 s).
  for (std::size_t i = 4; i < links.size(); ++i) EXPECT_TRUE(closed_within(links[i], 3000ms)) << i;
  for (std::size_t i = 0; i < 4; ++i) EXPECT_FALSE(closed_within(links[i], 50ms)) << i;
  // One of them completes its handshake: a link of its own, served.
  ASSERT_TRUE(write_all(links[0], wire_frame(1, {0xff, 0xff, 7, 7, 0, 0, 0, 1})));
  auto req = next_of(cm_event_type::connect_request);
  ASSERT_TRUE(req);
  ids.push_back(req->id);
}

class soft_hostile_peer_small_total : public soft_hostile_peer {
 protected:
  static constexpr std::size_t total = std::size_t{1} << 20;
  prov::soft_provider::limits test_limits() override {
    auto l = soft_hostile_peer::test_limits();
    l.held_bytes_total = total;
    return l;
  }
};

TEST_F(soft_hostile_peer_small_total, links_together_hold_no_more_than_the_provider_total) {
  // Two links, each with a waiting SEND and a flood of empty ones behind it:
  // each alone may hold 16 MiB; together they stop at the 1 MiB total.
  std::vector<int> links;
  for (int i = 0; i < 2; ++i) {
    const int fd = attacker();
    ASSERT_TRUE(write_all(fd, wire_frame(16, {1, 2, 3, 4})));
    links.push_back(fd);
  }
  for (int fd : links) (void)flood(fd, wire_frame(16, {}), 2'000'000, 300ms);
  // Past the total a link holds at most the frame that crossed it.
  EXPECT_LE(soft.held_bytes(), total + 2 * 64 + 8);
  EXPECT_GT(soft.held_bytes(), total / 2);
  expect_server_serves(0, 0x11);
}

class soft_hostile_peer_small_read_budget : public soft_hostile_peer {
 protected:
  static constexpr std::size_t budget = std::size_t{64} << 10;  // below 16 responses of a link
  prov::soft_provider::limits test_limits() override {
    auto l = soft_hostile_peer::test_limits();
    l.queued_read_bytes_total = budget;
    return l;
  }
};

TEST_F(soft_hostile_peer_small_read_budget, read_responses_over_all_links_stay_within_the_budget) {
  // Two links that never read; each alone would get 16 responses queued.
  const auto request = read_frame(rkey, addr_of(target.base), 2 * page_size());
  std::vector<std::uint8_t> requests;
  for (int i = 0; i < 2000; ++i) requests.insert(requests.end(), request.begin(), request.end());
  std::vector<int> links;
  for (int i = 0; i < 2; ++i) links.push_back(attacker());
  for (int fd : links) {
    ::fcntl(fd, F_SETFL, O_NONBLOCK);
    (void)::send(fd, requests.data(), requests.size(), MSG_NOSIGNAL);
  }
  // The server's own end of each link, before a byte is read: a reader that
  // drains as it goes is answered in full (waiting by reading failed this
  // test once in thirty runs), and the FIN waits behind what is unread.
  for (std::size_t i = 0; i < links.size(); ++i)
    EXPECT_TRUE(next_of(cm_event_type::disconnected)) << i;
  for (int fd : links) EXPECT_TRUE(closed_by_peer(fd));
  // At most one response past the budget (the one that crossed it).
  EXPECT_LE(soft.queued_read_bytes_peak(), budget + 2 * page_size() + 12);
  EXPECT_GT(soft.queued_read_bytes_peak(), 0u);
  const auto give_up = std::chrono::steady_clock::now() + wait_limit;
  while (soft.queued_read_bytes() != 0 && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(soft.queued_read_bytes(), 0u);
  expect_server_serves(0, 0x11);
}

// ---- a hostile server and a legitimate client ------------------------------------

/// A TCP listener on loopback that the test answers by hand.
struct raw_server {
  raw_server() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 4) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return;
    port = ntohs(a.sin_port);
  }
  ~raw_server() {
    if (conn >= 0) ::close(conn);
    ::close(fd);
  }
  raw_server(const raw_server&) = delete;
  raw_server& operator=(const raw_server&) = delete;

  /// Accepts the client's link and reads its REQ whole.
  bool take_request() {
    pollfd ready{fd, POLLIN, 0};
    if (::poll(&ready, 1, static_cast<int>(wait_limit.count())) != 1) return false;
    conn = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    const auto header = read_exact(conn, 12);
    if (header.size() != 12 || header[5] != 1) return false;
    const std::size_t length = (std::size_t{header[10]} << 8) | header[11];
    return read_exact(conn, length).size() == length;
  }

  int fd = -1;
  int conn = -1;
  std::uint16_t port = 0;
};

/// A legitimate client: an active id with a QP, connecting to a raw server,
/// and a guarded buffer the server's answers may land in.
class soft_hostile_server : public ::testing::Test, protected verbs_objects {
 protected:
  void SetUp() override {
    ASSERT_NE(server.port, 0);
    make(soft);
    id = soft.create_id(ch, 2).value();
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(server.port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_FALSE(soft.resolve_addr(id, reinterpret_cast<const sockaddr*>(&to), 1000));
    ASSERT_TRUE(next_event(soft, ch));
    ASSERT_FALSE(soft.resolve_route(id, 1000));
    ASSERT_TRUE(next_event(soft, ch));
    prov::qp_config config;
    config.send_cq = cq;
    config.recv_cq = cq;
    config.max_send_wr = 16;
    ASSERT_FALSE(soft.create_qp(id, pd, config));
    std::memset(local.base, 0x22, local.size);
    auto m = soft.reg_mr(pd, local.base, local.size, all_access);
    ASSERT_TRUE(m);
    mr = m.value();
    ASSERT_FALSE(soft.connect(id, {}));
    ASSERT_TRUE(server.take_request());
  }

  void TearDown() override {
    soft.destroy_qp(id);
    EXPECT_FALSE(soft.destroy_id(id));
    EXPECT_FALSE(soft.dereg_mr(mr));
    destroy(soft);
  }

  /// REP (then the client's RTU): the connection is established.
  void establish() {
    ASSERT_TRUE(write_all(server.conn, wire_frame(2, {0xff, 0xff, 7, 7, 0, 0, 0, 9})));
    ASSERT_EQ(read_exact(server.conn, 12).size(), 12u);  // RTU
    auto e = next_event(soft, ch);
    ASSERT_TRUE(e && e->type == cm_event_type::established);
  }

  std::error_code post(prov::wr_opcode op, std::size_t offset, std::uint32_t len,
                       std::uint64_t wr_id) {
    prov::send_wr wr;
    wr.wr_id = wr_id;
    wr.opcode = op;
    wr.local = {addr_of(local.base + offset), len, soft.mr_lkey(mr)};
    wr.remote_addr = 0x1000;
    wr.rkey = 0x1234;
    return soft.post_send(id, wr);
  }

  std::vector<prov::work_completion> completions(std::size_t want) {
    std::vector<prov::work_completion> got;
    const auto deadline = std::chrono::steady_clock::now() + wait_limit;
    while (got.size() < want && std::chrono::steady_clock::now() < deadline) {
      std::array<prov::work_completion, 8> batch{};
      const auto n = soft.poll_cq(cq, batch);
      if (n && n.value() > 0)
        got.insert(got.end(), batch.begin(), batch.begin() + static_cast<long>(n.value()));
      else
        std::this_thread::sleep_for(1ms);
    }
    return got;
  }

  bool local_untouched_from(std::size_t offset) const {
    return std::all_of(local.base + offset, local.base + local.size,
                       [](std::uint8_t b) { return b == 0x22; });
  }

  raw_server server;
  prov::soft_provider soft;
  prov::cm_id* id = nullptr;
  pages local{1};
  prov::mr* mr = nullptr;
};

TEST_F(soft_hostile_server, a_rep_with_oversized_private_data_is_unreachable) {
  // REP's payload is at most 8 + 196 bytes: a longer one is not even read.
  ASSERT_TRUE(write_all(server.conn, wire_frame(2, std::vector<std::uint8_t>(8 + 197, 0xab))));
  auto e = next_event(soft, ch);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, cm_event_type::unreachable) << prov::to_string(e->type);
  EXPECT_TRUE(closed_by_peer(server.conn));
}

TEST_F(soft_hostile_server, a_read_response_longer_than_asked_touches_nothing_past_the_buffer) {
  establish();
  ASSERT_FALSE(post(prov::wr_opcode::rdma_read, 0, 64, 1));
  ASSERT_EQ(read_exact(server.conn, 12 + 16).size(), 28u);  // the READ_REQ
  ASSERT_TRUE(write_all(server.conn, wire_frame(25, std::vector<std::uint8_t>(128, 0xee))));
  const auto wcs = completions(1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].status, prov::wc_status::wr_flush_err);
  EXPECT_TRUE(local_untouched_from(0));
  EXPECT_TRUE(closed_by_peer(server.conn));
}

TEST_F(soft_hostile_server, responses_to_work_never_posted_are_protocol_errors) {
  establish();
  // One WRITE posted; the server acknowledges five and answers a READ nobody made.
  ASSERT_FALSE(post(prov::wr_opcode::rdma_write, 0, 64, 1));
  ASSERT_EQ(read_exact(server.conn, 12 + 12 + 64).size(), 88u);
  ASSERT_TRUE(write_all(server.conn, wire_frame(23, {0, 0, 0, 5})));
  ASSERT_TRUE(write_all(server.conn, wire_frame(25, std::vector<std::uint8_t>(64, 0xee))));
  // The link fails on the bogus ACK; once DISCONNECTED is out, the QP is
  // flushed, so every completion there will ever be is in the CQ.
  auto e = next_event(soft, ch);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, cm_event_type::disconnected) << prov::to_string(e->type);
  std::array<prov::work_completion, 8> wcs{};
  const auto n = soft.poll_cq(cq, wcs);
  ASSERT_TRUE(n);
  ASSERT_EQ(n.value(), 1u);  // the one WRITE, and nothing invented
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_TRUE(local_untouched_from(0));
}

TEST_F(soft_hostile_server, a_server_that_stops_reading_holds_the_client_to_its_queue_depth) {
  establish();
  // 1 MiB writes from memory of our own registering; the server reads none.
  pages big(256);
  auto m = soft.reg_mr(pd, big.base, big.size, all_access);
  ASSERT_TRUE(m);
  const std::size_t before = rss();
  int posted = 0;
  std::error_code last;
  for (int i = 0; i < 64 && !last; ++i) {
    prov::send_wr wr;
    wr.wr_id = static_cast<std::uint64_t>(i);
    wr.opcode = prov::wr_opcode::rdma_write;
    wr.local = {addr_of(big.base), static_cast<std::uint32_t>(big.size), soft.mr_lkey(m.value())};
    wr.rkey = 0x1234;
    last = soft.post_send(id, wr);
    if (!last) ++posted;
  }
  EXPECT_EQ(posted, 16);  // max_send_wr: then ENOMEM
  EXPECT_EQ(last, std::errc::not_enough_memory);
  const std::size_t grown = rss() > before ? rss() - before : 0;
  // At most the 16 queued messages are copied (the kernel holds some of it).
  EXPECT_LT(grown, rss_slack * (std::size_t{24} << 20)) << "RSS grew by " << (grown >> 20);
  soft.destroy_qp(id);
  EXPECT_FALSE(soft.dereg_mr(m.value()));
}

}  // namespace

}  // namespace soft_hostile_peer_test

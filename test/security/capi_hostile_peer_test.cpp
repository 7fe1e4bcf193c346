// A hostile peer against a server written with librpma's C API only
// (<librpma.h>, the soft provider underneath): the server registers a region,
// hands its descriptor out (as a librpma server sends it in private data) and
// serves connections one after another; the attacker speaks the wire directly
// (test/support/raw_peer.hpp). After each attack the server lives, its region
// is unchanged except where an allowed WRITE landed, and a fresh connection
// reads the right bytes.
#include <librpma.h>

#include "support/raw_peer.hpp"
#include "support/wait.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace capi_hostile_peer_test {

namespace {

using namespace arpma::test::raw;  // NOLINT(google-build-using-namespace): the wire vocabulary
using arpma::test::eventually;

// The soft provider, also where rdma-core would find a device.
const bool soft_provider = [] { return ::setenv("ARPMA_PROVIDER", "soft", 1) == 0; }();

std::uint64_t get_le(const unsigned char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::size_t rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoul(line.substr(6));
  return 0;
}

/// The server: rpma_peer_new, rpma_mr_reg, rpma_ep_listen, then `links`
/// connections served in turn (accept, wait for the end, delete).
class capi_server {
 public:
  explicit capi_server(int links) : region_(4096, 0x11) {
    ibv_context* dev = nullptr;
    if (rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev) != 0 ||
        rpma_peer_new(dev, &peer_) != 0 ||
        rpma_mr_reg(peer_, region_.data(), region_.size(),
                    RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST, &mr_) != 0 ||
        rpma_ep_listen(peer_, "127.0.0.1", std::to_string(free_port()).c_str(), &ep_) != 0)
      return;
    unsigned char desc[32] = {};
    if (rpma_mr_get_descriptor(mr_, desc) != 0) return;
    // librpma's descriptor: addr u64, length u64, rkey u32, usage u8 (little-endian).
    addr_ = get_le(desc, 8);
    rkey_ = static_cast<std::uint32_t>(get_le(desc + 16, 4));
    port_ = listening_port_;
    thread_ = std::thread([this, links] { serve(links); });
  }
  ~capi_server() {
    if (thread_.joinable()) thread_.join();
    if (ep_ != nullptr) (void)rpma_ep_shutdown(&ep_);
    if (mr_ != nullptr) (void)rpma_mr_dereg(&mr_);
    if (peer_ != nullptr) (void)rpma_peer_delete(&peer_);
  }
  capi_server(const capi_server&) = delete;
  capi_server& operator=(const capi_server&) = delete;

  [[nodiscard]] bool ready() const { return port_ != 0; }
  [[nodiscard]] std::uint16_t port() const { return port_; }
  [[nodiscard]] std::uint32_t rkey() const { return rkey_; }
  [[nodiscard]] std::uint64_t addr() const { return addr_; }
  [[nodiscard]] int served() const { return served_.load(); }
  [[nodiscard]] const std::vector<std::uint8_t>& region() const { return region_; }

 private:
  /// A port nobody uses now (librpma has no call that says which port an
  /// endpoint listening on "0" got); kept for the endpoint.
  std::uint16_t free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      listening_port_ = ntohs(a.sin_port);
    ::close(fd);
    return listening_port_;
  }

  void serve(int links) {
    for (int i = 0; i < links; ++i) {
      rpma_conn_req* req = nullptr;
      if (rpma_ep_next_conn_req(ep_, nullptr, &req) != 0) return;
      rpma_conn* conn = nullptr;
      if (rpma_conn_req_connect(&req, nullptr, &conn) != 0) continue;
      // ESTABLISHED (or not), then the end the attacker brings.
      rpma_conn_event event = RPMA_CONN_UNDEFINED;
      while (rpma_conn_next_event(conn, &event) == 0 && event != RPMA_CONN_CLOSED &&
             event != RPMA_CONN_LOST && event != RPMA_CONN_UNREACHABLE) {
      }
      (void)rpma_conn_disconnect(conn);
      (void)rpma_conn_delete(&conn);
      ++served_;
    }
  }

  std::vector<std::uint8_t> region_;
  rpma_peer* peer_ = nullptr;
  rpma_mr_local* mr_ = nullptr;
  rpma_ep* ep_ = nullptr;
  std::uint64_t addr_ = 0;
  std::uint32_t rkey_ = 0;
  std::uint16_t port_ = 0;
  std::uint16_t listening_port_ = 0;
  std::atomic<int> served_{0};
  std::thread thread_;
};

/// Through REQ / REP / RTU by hand, to the C server.
int attacker(const capi_server& server) {
  const int fd = raw_connect(server.port());
  if (fd < 0) return -1;
  if (!write_all(fd, wire_frame(1, {0xff, 0xff, 7, 7, 0, 0, 0, 1})) ||
      read_exact(fd, 12 + 8).size() != 20 || !write_all(fd, wire_frame(4, {}))) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// A fresh connection reads `len` bytes at `offset` of the server's region.
std::vector<std::uint8_t> legitimate_read(const capi_server& server, std::size_t offset,
                                          std::uint32_t len) {
  const int fd = attacker(server);
  std::vector<std::uint8_t> data;
  if (fd >= 0 && write_all(fd, read_frame(server.rkey(), server.addr() + offset, len))) {
    const auto response = read_exact(fd, 12 + len);
    if (response.size() == 12u + len && response[5] == 25)
      data.assign(response.begin() + 12, response.end());
  }
  if (fd >= 0) ::close(fd);
  return data;
}

TEST(capi_hostile_peer, a_librpma_server_survives_every_attack_and_serves_the_right_bytes) {
  ASSERT_TRUE(soft_provider);
  // Links: forged key, out of bounds, a READ flood, an allowed write, and a
  // legitimate read after each of them.
  capi_server server(8);
  ASSERT_TRUE(server.ready());
  const std::vector<std::uint8_t> before(4096, 0x11);
  const std::size_t rss_before = rss_kib();

  int fd = attacker(server);  // 1: a WRITE under a forged key
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(write_all(fd, write_frame(server.rkey() ^ 1u, server.addr(), 64)));
  EXPECT_EQ(read_exact(fd, 16), nak_access);
  ::close(fd);
  EXPECT_EQ(legitimate_read(server, 0, 4096), before);  // 2

  fd = attacker(server);  // 3: a READ one byte past the region
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(write_all(fd, read_frame(server.rkey(), server.addr() + 1, 4096)));
  EXPECT_EQ(read_exact(fd, 16), nak_access);
  ::close(fd);
  EXPECT_EQ(legitimate_read(server, 0, 4096), before);  // 4

  fd = attacker(server);  // 5: 3,000 READs of the whole region, never collected
  ASSERT_GE(fd, 0);
  std::vector<std::uint8_t> flood;
  const auto request = read_frame(server.rkey(), server.addr(), 4096);
  for (int i = 0; i < 3000; ++i) flood.insert(flood.end(), request.begin(), request.end());
  const int served_before = server.served();
  ASSERT_TRUE(write_all(fd, flood));
  // Not a byte read until the server has ended the link: an attacker that
  // drains the responses as they come is answered in full (all 12 MB), which
  // is no attack, and nothing would be refused.
  EXPECT_TRUE(eventually([&] { return server.served() == served_before + 1; }));
  EXPECT_TRUE(closed_by_peer(fd));
  ::close(fd);
  EXPECT_EQ(legitimate_read(server, 0, 4096), before);  // 6

  fd = attacker(server);  // 7: an allowed WRITE of 64 bytes at 100
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(write_all(fd, write_frame(server.rkey(), server.addr() + 100, 64)));
  EXPECT_EQ(read_exact(fd, 16).size(), 16u);  // its ACK
  ::close(fd);
  auto expected = before;
  std::fill(expected.begin() + 100, expected.begin() + 164, 0xcc);
  EXPECT_EQ(legitimate_read(server, 0, 4096), expected);  // 8
  EXPECT_EQ(server.region(), expected);

  // 3,000 uncollected 4 KiB responses grew a server by 12 MiB before the bounds.
  EXPECT_LT(rss_kib() - std::min(rss_kib(), rss_before), std::size_t{16} << 10);
}

}  // namespace

}  // namespace capi_hostile_peer_test

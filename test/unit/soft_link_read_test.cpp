// How the soft provider's progress thread reads a link: a read that gets
// less than it asked for emptied the socket, so it waits for the next
// readiness instead of asking again for an EAGAIN (one recv per wake-up
// less), and what arrives after that read still wakes it; and an active
// side's socket is watched for reading only once connected, so that its
// waits are not woken by a writable socket. The first tests are the
// requester, speaking the wire by hand, so they decide when bytes arrive.
#include "provider/soft/soft_provider.hpp"
#include "support/open_fds.hpp"
#include "support/raw_peer.hpp"
#include "support/soft_pair.hpp"
#include "support/soft_raw_link.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace soft_link_read_test {

namespace {

using namespace arpma::test::raw;  // NOLINT(google-build-using-namespace): the wire vocabulary
using namespace std::chrono_literals;
using arpma::test::epoll_masks_of;
using arpma::test::guarded;

const std::vector<std::uint8_t> ack_one = {0x41, 0x52, 0x50, 0x4d, 1, 23, 0, 0,
                                           0,    0,    0,    4,    0, 0,  0, 1};

class soft_link_read : public arpma::test::soft_raw_link {
 protected:
  void SetUp() override {
    soft_raw_link::SetUp();
    handshake();
  }
  std::uint8_t target_byte(std::size_t i) const { return target_.bytes[guarded::guard + i]; }
};

TEST_F(soft_link_read, a_frame_read_whole_costs_the_progress_thread_no_empty_read) {
  const std::size_t before = soft.empty_progress_reads();
  for (int i = 0; i < 20; ++i) {
    // One send: the frame is in the socket whole when the progress thread wakes.
    ASSERT_TRUE(write_all(fd_, write_frame(rkey_, base(), 16)));
    ASSERT_EQ(read_exact(fd_, 16), ack_one) << "write " << i;
  }
  EXPECT_EQ(target_byte(0), 0xcc);
  EXPECT_EQ(soft.empty_progress_reads(), before)
      << "the progress thread asked the socket again after a short read";
}

TEST_F(soft_link_read, the_rest_of_a_frame_that_comes_later_is_still_read) {
  const auto f = write_frame(rkey_, base(), 64);
  const std::size_t first = 12 + 12 + 20;  // header, target, part of the payload
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(write_all(fd_, std::vector<std::uint8_t>(f.begin(), f.begin() + first)));
    // The progress thread reads the part (a short read) and waits.
    std::this_thread::sleep_for(20ms);
    ASSERT_TRUE(write_all(fd_, std::vector<std::uint8_t>(f.begin() + first, f.end())));
    ASSERT_EQ(read_exact(fd_, 16), ack_one) << "round " << i << ": the rest was never read";
  }
  EXPECT_EQ(target_byte(63), 0xcc);
  EXPECT_TRUE(target_.guards_intact());
}

/// The fd of this process's TCP socket whose local port is `port`.
std::optional<int> socket_with_local_port(std::uint16_t port) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(entry.path().filename().string());
    sockaddr_in local{};
    socklen_t len = sizeof local;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        local.sin_family == AF_INET && ntohs(local.sin_port) == port)
      return fd;
  }
  return std::nullopt;
}

class soft_link_watch : public arpma::test::soft_pair {};

TEST_F(soft_link_watch, a_connected_socket_is_watched_for_reading_only) {
  connect();
  const auto fd = socket_with_local_port(soft.local_port(a.id));
  ASSERT_TRUE(fd) << "no socket of the active side";
  const auto masks = epoll_masks_of(*fd);
  // The progress thread's reactor and the completion channel of a's CQs.
  ASSERT_EQ(masks.size(), 2U) << "two epoll sets watch the link's socket";
  for (const unsigned mask : masks) {
    EXPECT_NE(mask & EPOLLIN, 0U);
    // The connect waited for writability; kept, an edge-triggered epoll
    // would report the writable socket at every re-arm for reading.
    EXPECT_EQ(mask & EPOLLOUT, 0U) << std::hex << mask;
  }
}

}  // namespace

}  // namespace soft_link_read_test

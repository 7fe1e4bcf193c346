// A large WRITE on the soft provider: its payload goes to the target as it
// arrives (docs/soft-provider.md, "Receiving"), never through a buffer the
// size of the frame. The test is the requester, speaking the wire by hand, so
// it decides when each part of the payload reaches the socket.
#include "provider/soft/soft_provider.hpp"
#include "support/raw_peer.hpp"
#include "support/soft_pair.hpp"
#include "support/soft_raw_link.hpp"
#include "support/wait.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace soft_large_write_test {

namespace {

using namespace arpma::test::raw;  // NOLINT(google-build-using-namespace): the wire vocabulary
using namespace std::chrono_literals;
using arpma::test::eventually;
using arpma::test::guarded;

const std::vector<std::uint8_t> ack_one = {0x41, 0x52, 0x50, 0x4d, 1, 23, 0, 0,
                                           0,    0,    0,    4,    0, 0,  0, 1};

class soft_large_write : public arpma::test::soft_raw_link {
 protected:
  static constexpr std::size_t size = std::size_t{1} << 20;
  static constexpr std::size_t head = 12 + 12;  // header, then rkey and address

  void SetUp() override {
    soft_raw_link::SetUp();
    big_mr_ = reg(b, big_.data(), big_.size());
    handshake();
  }

  std::vector<std::uint8_t> frame() {
    return write_frame(soft.mr_rkey(big_mr_), arpma::test::addr_of(big_.data()), size);
  }
  std::vector<std::uint8_t> target_now() { return bytes_now(big_.data(), size); }
  /// The frame's head and first quarter, placed; `between()`; the rest, placed
  /// and acknowledged.
  template <class Between>
  void write_in_two(Between between) {
    const auto f = frame();
    const std::size_t first = head + size / 4;
    ASSERT_TRUE(write_all(fd_, std::vector<std::uint8_t>(f.begin(), f.begin() + first)));
    ASSERT_TRUE(eventually([&] { return placed() == size / 4; })) << placed();
    between();
    ASSERT_TRUE(write_all(fd_, std::vector<std::uint8_t>(f.begin() + first, f.end())));
    EXPECT_EQ(read_exact(fd_, 16), ack_one);
    EXPECT_EQ(placed(), size);
  }
  std::size_t placed() { return placed_at(big_.data(), size); }

  guarded big_{size, 0x11};
  arpma::provider::mr* big_mr_ = nullptr;
};

TEST_F(soft_large_write, its_payload_is_placed_as_it_arrives_and_acknowledged_once_whole) {
  const auto f = frame();
  const std::size_t first = head + size / 4;
  ASSERT_TRUE(write_all(fd_, std::vector<std::uint8_t>(f.begin(), f.begin() + first)));
  // Before: a frame was buffered until whole, then copied (and its 1 MiB
  // buffer zero-filled, then shrunk again), so nothing was placed yet.
  ASSERT_TRUE(eventually([&] { return placed() == size / 4; })) << placed();
  EXPECT_TRUE(nothing_to_read()) << "acknowledged before the payload was all in";
  ASSERT_TRUE(write_all(fd_, std::vector<std::uint8_t>(f.begin() + first, f.end())));
  EXPECT_EQ(read_exact(fd_, 16), ack_one);
  EXPECT_EQ(placed(), size);
  EXPECT_TRUE(big_.guards_intact());
  // The link goes on: a small WRITE behind it is placed and acknowledged too.
  ASSERT_TRUE(write_all(fd_, write_frame(rkey_, base(), 16)));
  EXPECT_EQ(read_exact(fd_, 16), ack_one);
  EXPECT_EQ(target_.bytes[guarded::guard], 0xcc);
}

TEST_F(soft_large_write, a_target_deregistered_before_the_payload_is_in_refuses_the_write) {
  const auto f = frame();
  const std::size_t first = head + size / 4;
  ASSERT_TRUE(write_all(fd_, std::vector<std::uint8_t>(f.begin(), f.begin() + first)));
  ASSERT_TRUE(eventually([&] { return placed() == size / 4; })) << placed();
  ASSERT_FALSE(soft.dereg_mr(big_mr_));
  std::erase(b.mrs, big_mr_);
  ASSERT_TRUE(write_all(fd_, std::vector<std::uint8_t>(f.begin() + first, f.end())));
  // Refused as a WRITE to a bad key: the rest was read and dropped, not placed.
  EXPECT_EQ(read_exact(fd_, 16), nak_access);
  EXPECT_EQ(placed(), size / 4);
  const auto now = target_now();
  EXPECT_TRUE(std::all_of(now.begin() + size / 4, now.end(), [](auto v) { return v == 0x11; }));
  EXPECT_TRUE(big_.guards_intact());
}

// Placed what had come of a payload, the progress thread asks the socket
// again for a while (a sender is still copying the rest in) before it goes
// back to its reactor; a rest that comes later than that is read on its
// readiness, as before.
TEST_F(soft_large_write, an_unfinished_payload_is_asked_for_again_before_the_thread_waits) {
  const std::size_t before = soft.payload_waits();
  write_in_two([&] {
    EXPECT_TRUE(eventually([&] { return soft.payload_waits() > before; }));
    std::this_thread::sleep_for(5ms);  // far past the wait: the rest wakes the thread
  });
  EXPECT_TRUE(big_.guards_intact());
}

class soft_large_write_no_spin : public soft_large_write {
 protected:
  arpma::provider::soft_provider::limits link_limits() override {
    return {.progress_spin = std::chrono::microseconds(0)};
  }
};

// A provider told not to spin (ARPMA_SOFT_PROGRESS_SPIN_US=0: CPU counts
// more than microseconds) does not spin on a payload either.
TEST_F(soft_large_write_no_spin, without_a_progress_spin_the_thread_waits_on_its_reactor_at_once) {
  const std::size_t before = soft.payload_waits();
  write_in_two([] {});
  EXPECT_EQ(soft.payload_waits(), before);
}

class soft_large_write_deadline : public soft_large_write {
 protected:
  static constexpr std::chrono::milliseconds deadline{300};
  arpma::provider::soft_provider::limits link_limits() override { return {.frame = deadline}; }
};

TEST_F(soft_large_write_deadline, a_payload_that_stops_coming_is_held_to_the_frame_deadline) {
  const auto f = frame();
  ASSERT_TRUE(write_all(fd_, std::vector<std::uint8_t>(f.begin(), f.begin() + head + 4096)));
  ASSERT_TRUE(eventually([&] { return placed() == 4096; })) << placed();
  const auto lasted = open_for(fd_, 20 * deadline);
  EXPECT_GE(lasted, deadline / 2);
  EXPECT_LT(lasted, 20 * deadline) << "the link stayed open";
  expect_disconnected();
}

class soft_large_write_pair : public arpma::test::soft_pair {};

// Between two soft ends: posted, placed and completed as any WRITE.
TEST_F(soft_large_write_pair, a_1_mib_write_lands_whole_round_after_round) {
  connect();
  guarded& src = guarded_memory(std::size_t{1} << 20, 0xab);
  guarded& dst = guarded_memory(std::size_t{1} << 20, 0x00);
  auto* smr = reg(a, src.data(), src.size());
  auto* dmr = reg(b, dst.data(), dst.size());
  for (std::uint8_t round = 0; round < 4; ++round) {
    std::fill(dst.data(), dst.data() + dst.size(), round);
    ASSERT_FALSE(post(a, arpma::provider::wr_opcode::rdma_write, smr, src.data(),
                      static_cast<std::uint32_t>(src.size()), arpma::test::addr_of(dst.data()),
                      soft.mr_rkey(dmr)));
    expect_wc(a.cq, 1, arpma::provider::wc_status::success, arpma::provider::wc_opcode::rdma_write);
    EXPECT_TRUE(std::all_of(dst.data(), dst.data() + dst.size(), [](auto v) { return v == 0xab; }));
    EXPECT_TRUE(dst.guards_intact());
  }
}

}  // namespace

}  // namespace soft_large_write_test

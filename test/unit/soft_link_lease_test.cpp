// The soft provider's poll lease: an application thread busy-polling a CQ
// moves its link's frames itself, and the progress thread, parked, leaves the
// socket to it (off its reactor, so the frames do not wake it). What must
// still hold: the peer is served when the poller stops without arming (the
// lease lapses), at once when it arms the CQ and sleeps on its channel, connection
// events get through, large writes that fill the socket go out, and a parked
// link closes without leaking its descriptor. Every wait is bounded.
#include "provider/soft/soft_provider.hpp"

#include "support/open_fds.hpp"
#include "support/soft_pair.hpp"
#include "support/wait.hpp"

#include <gtest/gtest.h>
#include <poll.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

namespace soft_link_lease_test {

namespace {

namespace prov = arpma::provider;
using namespace std::chrono_literals;
using arpma::test::addr_of;
using arpma::test::open_fds;
using arpma::test::wait_limit;
using prov::wc_status;
using prov::wr_opcode;

class soft_link_lease_test : public arpma::test::soft_pair {
 protected:
  /// Spins on `cq` (no sleeping: a busy poller) for its next completion.
  std::optional<prov::work_completion> spin_wc(prov::cq* cq) {
    const auto deadline = std::chrono::steady_clock::now() + wait_limit;
    while (std::chrono::steady_clock::now() < deadline) {
      std::array<prov::work_completion, 1> wc{};
      auto got = soft.poll_cq(cq, wc);
      if (!got) return std::nullopt;
      if (got.value() == 1) return wc[0];
    }
    return std::nullopt;
  }

  /// `a` writes 8-byte records into b's `target`, one at a time, spinning on
  /// its CQ, until the progress thread has parked a link (bounded).
  void poll_until_parked() {
    src_mr_ = reg(a, src_.data(), src_.size());
    dst_mr_ = reg(b, dst_.data(), dst_.size());
    for (std::uint64_t i = 1; i <= 2000 && soft.parks() == 0; ++i) {
      std::memcpy(src_.data(), &i, sizeof i);
      ASSERT_FALSE(post(a, wr_opcode::rdma_write, src_mr_, src_.data(), 8, addr_of(dst_.data()),
                        soft.mr_rkey(dst_mr_), i));
      auto wc = spin_wc(a.cq);
      ASSERT_TRUE(wc) << "write " << i;
      ASSERT_EQ(wc->status, wc_status::success);
      std::uint64_t landed = 0;
      std::memcpy(&landed, dst_.data(), sizeof landed);
      ASSERT_EQ(landed, i) << "completed, so placed";
    }
    ASSERT_GT(soft.parks(), 0u) << "a spinning poller leaves the progress thread parked";
  }

  std::array<std::uint8_t, 64> src_{};
  std::array<std::uint8_t, 64> dst_{};
  prov::mr* src_mr_ = nullptr;
  prov::mr* dst_mr_ = nullptr;
};

TEST_F(soft_link_lease_test, a_poller_that_stops_without_arming_still_serves_its_peer) {
  connect();
  poll_until_parked();
  // a polls no more and arms nothing: its peer's WRITE is executed once the
  // lease lapses (1 ms), by a's progress thread.
  std::array<std::uint8_t, 64> in{};
  prov::mr* in_mr = reg(a, in.data(), in.size());
  const std::array<std::uint8_t, 8> bytes{1, 2, 3, 4, 5, 6, 7, 8};
  std::memcpy(src_.data(), bytes.data(), bytes.size());
  prov::mr* b_src = reg(b, src_.data(), src_.size());
  ASSERT_FALSE(post(b, wr_opcode::rdma_write, b_src, src_.data(), 8, addr_of(in.data()),
                    soft.mr_rkey(in_mr), 99));
  expect_wc(b.cq, 99, wc_status::success, prov::wc_opcode::rdma_write);
  EXPECT_EQ(std::memcmp(in.data(), bytes.data(), bytes.size()), 0);
}

TEST_F(soft_link_lease_test, a_poller_that_arms_and_sleeps_gets_the_next_frame_at_once) {
  long_lease();
  connect();
  poll_until_parked();
  std::array<std::uint8_t, 64> in{};
  prov::mr* in_mr = reg(a, in.data(), in.size());
  ASSERT_FALSE(recv(a, in_mr, in.data(), in.size(), 5));
  ASSERT_FALSE(soft.req_notify_cq(a.rcq, false));
  // a sleeps on its channel now; the lease would keep the progress thread
  // parked for a minute, so the SEND must wake the channel itself (its fd
  // watches the link's socket) and be moved by the reader.
  prov::mr* b_src = reg(b, src_.data(), src_.size());
  ASSERT_FALSE(post(b, wr_opcode::send, b_src, src_.data(), 16, 0, 0, 6));
  pollfd ready{soft.comp_channel_fd(a.cc), POLLIN, 0};
  ASSERT_EQ(::poll(&ready, 1, static_cast<int>(wait_limit.count())), 1) << "the SEND arrived";
  auto fired = soft.get_cq_event(a.cc);
  ASSERT_TRUE(fired);
  EXPECT_EQ(fired.value(), a.rcq);
  soft.ack_cq_events(a.rcq, 1);
  expect_wc(a.rcq, 5, wc_status::success, prov::wc_opcode::recv);
  expect_wc(b.cq, 6, wc_status::success, prov::wc_opcode::send);
}

TEST_F(soft_link_lease_test, a_disconnect_reaches_a_link_its_poller_holds) {
  long_lease();
  connect();
  poll_until_parked();
  ASSERT_FALSE(soft.disconnect(b.id));
  // a goes on polling (holding the lease): the DISCONNECT frame it reads is
  // the progress thread's to handle, and a's channel gets the event.
  const auto deadline = std::chrono::steady_clock::now() + wait_limit;
  std::optional<prov::cm_event> event;
  while (!event && std::chrono::steady_clock::now() < deadline) {
    std::array<prov::work_completion, 1> wc{};
    (void)soft.poll_cq(a.cq, wc);
    prov::cm_event e;
    if (!soft.get_cm_event_nonblocking(a.ch, e)) event = e;
  }
  ASSERT_TRUE(event) << "no event within the wait limit";
  EXPECT_EQ(event->type, prov::cm_event_type::disconnected);
}

TEST_F(soft_link_lease_test, writes_that_fill_the_socket_go_out_while_the_link_is_parked) {
  long_lease();
  connect();
  poll_until_parked();
  // 16 MiB at once is more than loopback's socket buffers take: the rest
  // queues for the progress thread's writer, which needs the socket back.
  constexpr std::size_t piece = std::size_t{1} << 20;
  constexpr int depth = 16;
  auto& big = memory(piece * depth, 0x3c);
  auto& far = memory(piece * depth, 0);
  prov::mr* big_mr = reg(a, big.data(), big.size());
  prov::mr* far_mr = reg(b, far.data(), far.size());
  for (int i = 0; i < depth; ++i) {
    const std::size_t off = piece * static_cast<std::size_t>(i);
    ASSERT_FALSE(post(a, wr_opcode::rdma_write, big_mr, big.data() + off, piece,
                      addr_of(far.data() + off), soft.mr_rkey(far_mr), 100 + i));
  }
  for (int i = 0; i < depth; ++i) {
    auto wc = spin_wc(a.cq);
    ASSERT_TRUE(wc) << "completion " << i;
    EXPECT_EQ(wc->wr_id, 100u + static_cast<unsigned>(i));
    EXPECT_EQ(wc->status, wc_status::success);
  }
  EXPECT_EQ(far, big);
  EXPECT_EQ(soft.link_failures(), 0u);
}

TEST_F(soft_link_lease_test, a_parked_link_closes_without_leaking_its_socket) {
  long_lease();
  // A first connection starts the progress thread and what it keeps.
  connect();
  TearDown();
  a = {};
  b = {};
  ASSERT_TRUE(arpma::test::eventually([&] { return soft.live_ids() == 0; }));
  const std::size_t before = open_fds();

  connect();
  poll_until_parked();
  TearDown();
  a = {};
  b = {};
  ASSERT_TRUE(arpma::test::eventually([&] { return soft.live_ids() == 0; }));
  EXPECT_TRUE(arpma::test::eventually([&] { return open_fds() == before; }))
      << open_fds() << " descriptors open, " << before << " before";
}

}  // namespace

}  // namespace soft_link_lease_test

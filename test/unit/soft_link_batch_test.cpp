// The soft provider's batching: a request posted while an earlier one awaits
// its response waits in the link's cork and goes out with the next ones, in
// one sendmsg. What must hold: a batch nobody flushes (no poll, no arm, no
// response) still leaves within the ack tick; a frame that may not wait takes
// the batch out before it, so the peer sees every request in posting order;
// a poll sends the batch at once. The peer is held in an RNR wait (a SEND
// with no receive posted), so no response can flush the batch and every
// request after the SEND is batched, whatever the timing.
#include "provider/soft/soft_provider.hpp"

#include "support/soft_pair.hpp"
#include "support/wait.hpp"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

namespace soft_link_batch_test {

namespace {

namespace prov = arpma::provider;
using namespace std::chrono_literals;
using arpma::test::addr_of;
using arpma::test::eventually;
using prov::wc_opcode;
using prov::wc_status;
using prov::wr_opcode;

constexpr std::size_t record = 8;
constexpr std::uint64_t writes = 8;
constexpr std::uint64_t send_id = 100;
// What b holds per WRITE behind the RNR wait: its payload (rkey, address,
// data) plus 64 bytes of bookkeeping (docs/soft-provider.md, "Bounds").
constexpr std::size_t held_per_write = 4 + 8 + record + 64;

class soft_link_batch_test : public arpma::test::soft_pair {
 protected:
  void SetUp() override {
    soft_pair::SetUp();
    soft.set_rnr_timeout(20s);  // longer than any wait here: only a receive ends it
    connect();
    src_mr_ = reg(a, src_.data(), src_.size());
    dst_mr_ = reg(b, dst_.data(), dst_.size());
    in_mr_ = reg(b, in_.data(), in_.size());
  }

  /// a's SEND, which b holds (no receive posted): nothing answers a until
  /// release_send().
  void hold_send() {
    ASSERT_FALSE(post(a, wr_opcode::send, src_mr_, src_.data(), record, 0, 0, send_id));
    ASSERT_TRUE(eventually([&] { return soft.held_bytes() > 0; }))
        << "b never held the SEND behind an RNR wait";
  }

  /// Record i (its own value, 8 bytes) written to b's `dst_` at i * 8.
  void post_write(std::uint64_t i) {
    std::memcpy(src_.data() + record * (i + 1), &i, sizeof i);
    ASSERT_FALSE(post(a, wr_opcode::rdma_write, src_mr_, src_.data() + record * (i + 1), record,
                      addr_of(dst_.data() + record * i), soft.mr_rkey(dst_mr_), i));
  }

  void release_send() { ASSERT_FALSE(recv(b, in_mr_, in_.data(), record, 7)); }

  /// The SEND's completion, then every write's, in posting order; b's
  /// memory holds each record.
  void expect_all_done(std::uint64_t count) {
    expect_wc(a.cq, send_id, wc_status::success, wc_opcode::send);
    for (std::uint64_t i = 0; i < count; ++i) {
      expect_wc(a.cq, i, wc_status::success, wc_opcode::rdma_write);
      std::uint64_t got = ~i;
      std::memcpy(&got, dst_.data() + record * i, sizeof got);
      EXPECT_EQ(got, i) << "record " << i;
    }
  }

  std::vector<std::uint8_t> src_ = std::vector<std::uint8_t>(64 << 10);
  std::vector<std::uint8_t> dst_ = std::vector<std::uint8_t>(64 << 10);
  std::array<std::uint8_t, record> in_{};
  prov::mr* src_mr_ = nullptr;
  prov::mr* dst_mr_ = nullptr;
  prov::mr* in_mr_ = nullptr;
};

TEST_F(soft_link_batch_test, requests_behind_an_unanswered_one_are_batched) {
  hold_send();
  const std::size_t before = soft.batched();
  for (std::uint64_t i = 0; i < writes; ++i) post_write(i);
  EXPECT_EQ(soft.batched() - before, writes);
  release_send();
  expect_all_done(writes);
}

TEST_F(soft_link_batch_test, a_batch_nobody_flushes_leaves_within_the_tick) {
  hold_send();
  const std::size_t held = soft.held_bytes();
  for (std::uint64_t i = 0; i < writes; ++i) post_write(i);
  // Nobody polls or arms a's CQs and b answers nothing: only a's ack tick
  // can send the batch, and b then holds it too.
  EXPECT_TRUE(eventually([&] { return soft.held_bytes() >= held + writes * held_per_write; }, 5s))
      << "the batch never left a";
  release_send();
  expect_all_done(writes);
}

TEST_F(soft_link_batch_test, a_frame_that_may_not_wait_takes_the_batch_out_before_it) {
  hold_send();
  for (std::uint64_t i = 0; i < writes; ++i) post_write(i);
  // 32 KiB: too large to wait in the cork; it follows the batch on the wire.
  constexpr std::uint64_t big_id = 200;
  constexpr std::size_t big = 32 << 10;
  std::memset(src_.data() + (16 << 10), 0xab, big);
  ASSERT_FALSE(post(a, wr_opcode::rdma_write, src_mr_, src_.data() + (16 << 10), big,
                    addr_of(dst_.data() + (16 << 10)), soft.mr_rkey(dst_mr_), big_id));
  release_send();
  expect_all_done(writes);
  expect_wc(a.cq, big_id, wc_status::success, wc_opcode::rdma_write);
  EXPECT_EQ(dst_[16 << 10], 0xab);
  EXPECT_EQ(dst_[(16 << 10) + big - 1], 0xab);
}

}  // namespace

}  // namespace soft_link_batch_test

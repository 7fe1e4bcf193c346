// A large SEND or READ response on the soft provider: its payload goes into
// the receive it completes, or the buffer of the READ it answers, as it
// arrives (docs/soft-provider.md, "Receiving"), never through the link's
// buffer. The test is the peer, speaking the wire by hand, so it decides when
// each part of the payload reaches the socket. (Large WRITEs:
// soft_large_write_test.cpp.)
#include "provider/soft/soft_provider.hpp"
#include "support/raw_peer.hpp"
#include "support/soft_pair.hpp"
#include "support/soft_raw_link.hpp"
#include "support/wait.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace soft_large_frames_test {

namespace {

using namespace arpma::test::raw;  // NOLINT(google-build-using-namespace): the wire vocabulary
namespace prov = arpma::provider;
using arpma::test::eventually;
using arpma::test::guarded;

const std::vector<std::uint8_t> ack_one = {0x41, 0x52, 0x50, 0x4d, 1, 23, 0, 0,
                                           0,    0,    0,    4,    0, 0,  0, 1};
std::vector<std::uint8_t> nak(std::uint8_t status) {
  return {0x41, 0x52, 0x50, 0x4d, 1, 24, 0, 0, 0, 0, 0, 4, 0, 0, 0, status};
}
constexpr std::uint8_t rem_inv_req = 9;
constexpr std::uint8_t rem_op = 11;

/// A SEND (with `imm`: SEND WITH IMMEDIATE) of `len` bytes of 0xcc.
std::vector<std::uint8_t> send_frame(std::size_t len, std::optional<std::uint32_t> imm = {}) {
  std::vector<std::uint8_t> p;
  if (imm) put_be(p, *imm, 4);
  p.insert(p.end(), len, 0xcc);
  return wire_frame(imm ? 17 : 16, p);
}

class soft_large_frames : public arpma::test::soft_raw_link {
 protected:
  static constexpr std::size_t size = std::size_t{1} << 20;

  void SetUp() override {
    soft_raw_link::SetUp();
    big_mr_ = reg(b, big_.data(), big_.size());
    handshake();
  }

  std::vector<std::uint8_t> buffer_now() { return bytes_now(big_.data(), size); }
  std::size_t placed() { return placed_at(big_.data(), size); }
  /// Sends bytes [from, first) of `f`, waits until `expect` payload bytes
  /// are in the receive, then checks that nothing was acknowledged early.
  void send_part(const std::vector<std::uint8_t>& f, std::size_t first, std::size_t expect,
                 std::size_t from = 0) {
    ASSERT_TRUE(write_all(fd_, std::vector<std::uint8_t>(f.begin() + from, f.begin() + first)));
    ASSERT_TRUE(eventually([&] { return placed() == expect; })) << placed();
    EXPECT_TRUE(nothing_to_read()) << "acknowledged before the payload was all in";
  }
  void send_rest(const std::vector<std::uint8_t>& f, std::size_t first) {
    ASSERT_TRUE(write_all(fd_, std::vector<std::uint8_t>(f.begin() + first, f.end())));
  }

  guarded big_{size, 0x11};
  prov::mr* big_mr_ = nullptr;
};

TEST_F(soft_large_frames, its_payload_is_placed_into_the_receive_as_it_arrives) {
  ASSERT_FALSE(recv(b, big_mr_, big_.data(), size, 41));
  const auto f = send_frame(size);
  const std::size_t first = 12 + size / 4;
  // Before: the frame was buffered until whole, then copied into the receive.
  send_part(f, first, size / 4);
  std::array<prov::work_completion, 1> none{};
  EXPECT_EQ(soft.poll_cq(b.rcq, none).value(), 0U) << "completed before the payload was all in";
  send_rest(f, first);
  EXPECT_EQ(read_exact(fd_, 16), ack_one);
  const auto wc = arpma::test::next_wc(soft, b.rcq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->wr_id, 41U);
  EXPECT_EQ(wc->status, prov::wc_status::success);
  EXPECT_EQ(wc->opcode, prov::wc_opcode::recv);
  EXPECT_EQ(wc->byte_len, size);
  EXPECT_FALSE(wc->with_imm);
  EXPECT_EQ(placed(), size);
  EXPECT_TRUE(big_.guards_intact());
  // The link goes on: a small SEND behind it lands in the next receive.
  ASSERT_FALSE(recv(b, tmr_, target_.data(), 256, 42));
  ASSERT_TRUE(write_all(fd_, send_frame(16)));
  EXPECT_EQ(read_exact(fd_, 16), ack_one);
  expect_wc(b.rcq, 42, prov::wc_status::success, prov::wc_opcode::recv);
  EXPECT_EQ(target_.bytes[guarded::guard + 15], 0xcc);
  EXPECT_EQ(target_.bytes[guarded::guard + 16], 0x11);
}

TEST_F(soft_large_frames, an_immediate_split_across_reads_reaches_the_completion) {
  ASSERT_FALSE(recv(b, big_mr_, big_.data(), size, 43));
  const auto f = send_frame(size / 2, 0xfeedf00d);
  // The header and half the immediate first: nothing can be placed before
  // the immediate is whole; then some payload, then the rest.
  ASSERT_TRUE(write_all(fd_, std::vector<std::uint8_t>(f.begin(), f.begin() + 14)));
  send_part(f, 16 + 4096, 4096, 14);
  send_rest(f, 16 + 4096);
  EXPECT_EQ(read_exact(fd_, 16), ack_one);
  const auto wc = arpma::test::next_wc(soft, b.rcq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, prov::wc_status::success);
  EXPECT_EQ(wc->byte_len, size / 2);
  EXPECT_TRUE(wc->with_imm);
  EXPECT_EQ(wc->imm_data, 0xfeedf00dU);
  EXPECT_EQ(placed(), size / 2);
  EXPECT_EQ(buffer_now()[size / 2], 0x11);
}

TEST_F(soft_large_frames, a_receive_deregistered_before_the_payload_is_in_fails_it) {
  ASSERT_FALSE(recv(b, big_mr_, big_.data(), size, 44));
  const auto f = send_frame(size);
  const std::size_t first = 12 + size / 4;
  send_part(f, first, size / 4);
  ASSERT_FALSE(soft.dereg_mr(big_mr_));
  std::erase(b.mrs, big_mr_);
  send_rest(f, first);
  // As a SEND into an unregistered receive: a local protection error here,
  // a NAK there, and the rest read and dropped, not placed.
  EXPECT_EQ(read_exact(fd_, 16), nak(rem_op));
  expect_wc(b.rcq, 44, prov::wc_status::loc_prot_err, prov::wc_opcode::recv);
  EXPECT_EQ(placed(), size / 4);
  const auto now = buffer_now();
  EXPECT_TRUE(std::all_of(now.begin() + size / 4, now.end(), [](auto v) { return v == 0x11; }));
  EXPECT_TRUE(big_.guards_intact());
}

TEST_F(soft_large_frames, a_receive_too_small_is_not_written_and_fails_with_a_length_error) {
  ASSERT_FALSE(recv(b, big_mr_, big_.data(), size / 2, 45));
  const auto f = send_frame(size / 2 + 1);
  ASSERT_TRUE(write_all(fd_, std::vector<std::uint8_t>(f.begin(), f.begin() + 12 + 4096)));
  ASSERT_TRUE(write_all(fd_, std::vector<std::uint8_t>(f.begin() + 12 + 4096, f.end())));
  EXPECT_EQ(read_exact(fd_, 16), nak(rem_inv_req));
  expect_wc(b.rcq, 45, prov::wc_status::loc_len_err, prov::wc_opcode::recv);
  EXPECT_EQ(placed(), 0U);
}

TEST_F(soft_large_frames, a_large_send_before_its_receive_waits_for_it) {
  const auto f = send_frame(size / 4);
  ASSERT_TRUE(write_all(fd_, std::vector<std::uint8_t>(f.begin(), f.begin() + 12 + 4096)));
  ASSERT_TRUE(write_all(fd_, std::vector<std::uint8_t>(f.begin() + 12 + 4096, f.end())));
  // No receive yet (an RNR wait, which the soft provider holds for a while):
  // the receive posted now takes it whole.
  ASSERT_FALSE(recv(b, big_mr_, big_.data(), size, 46));
  EXPECT_EQ(read_exact(fd_, 16), ack_one);
  expect_wc(b.rcq, 46, prov::wc_status::success, prov::wc_opcode::recv);
  EXPECT_EQ(placed(), size / 4);
}

/// A READ response (no fixed part) of `len` bytes of 0xcc.
std::vector<std::uint8_t> read_response(std::size_t len) {
  return wire_frame(25, std::vector<std::uint8_t>(len, 0xcc));
}

TEST_F(soft_large_frames, a_read_response_is_placed_into_the_reads_buffer_as_it_arrives) {
  ASSERT_FALSE(post(b, prov::wr_opcode::rdma_read, big_mr_, big_.data(), size, 0x1000, 0x77, 51));
  ASSERT_EQ(read_exact(fd_, 12 + 16).size(), 28U);  // the READ request
  const auto f = read_response(size);
  const std::size_t first = 12 + size / 4;
  // Before: buffered until whole, the buffer grown past 1 MiB and its pages
  // faulted in anew for every such response, then copied.
  send_part(f, first, size / 4);
  std::array<prov::work_completion, 1> none{};
  EXPECT_EQ(soft.poll_cq(b.cq, none).value(), 0U) << "completed before the payload was all in";
  send_rest(f, first);
  expect_wc(b.cq, 51, prov::wc_status::success, prov::wc_opcode::rdma_read);
  EXPECT_EQ(placed(), size);
  EXPECT_TRUE(big_.guards_intact());
  // The link goes on: the next READ, a small one, is answered too.
  ASSERT_FALSE(post(b, prov::wr_opcode::rdma_read, tmr_, target_.data(), 16, 0x1000, 0x77, 52));
  ASSERT_EQ(read_exact(fd_, 12 + 16).size(), 28U);
  ASSERT_TRUE(write_all(fd_, read_response(16)));
  expect_wc(b.cq, 52, prov::wc_status::success, prov::wc_opcode::rdma_read);
  EXPECT_EQ(target_.bytes[guarded::guard + 15], 0xcc);
  EXPECT_EQ(target_.bytes[guarded::guard + 16], 0x11);
}

TEST_F(soft_large_frames, a_read_buffer_deregistered_before_the_response_is_in_fails_the_read) {
  ASSERT_FALSE(post(b, prov::wr_opcode::rdma_read, big_mr_, big_.data(), size, 0x1000, 0x77, 53));
  ASSERT_EQ(read_exact(fd_, 12 + 16).size(), 28U);
  const auto f = read_response(size);
  const std::size_t first = 12 + size / 4;
  send_part(f, first, size / 4);
  ASSERT_FALSE(soft.dereg_mr(big_mr_));
  std::erase(b.mrs, big_mr_);
  send_rest(f, first);
  expect_wc(b.cq, 53, prov::wc_status::loc_prot_err, prov::wc_opcode::rdma_read);
  EXPECT_EQ(placed(), size / 4);
  const auto now = buffer_now();
  EXPECT_TRUE(std::all_of(now.begin() + size / 4, now.end(), [](auto v) { return v == 0x11; }));
}

TEST_F(soft_large_frames, a_read_response_of_the_wrong_length_is_not_placed_and_closes_the_link) {
  ASSERT_FALSE(post(b, prov::wr_opcode::rdma_read, big_mr_, big_.data(), size / 2, 0x1000, 0x77));
  ASSERT_EQ(read_exact(fd_, 12 + 16).size(), 28U);
  const auto f = read_response(size / 2 + 4096);
  ASSERT_TRUE(write_all(fd_, std::vector<std::uint8_t>(f.begin(), f.begin() + 12 + 4096)));
  ASSERT_TRUE(write_all(fd_, std::vector<std::uint8_t>(f.begin() + 12 + 4096, f.end())));
  expect_disconnected();
  EXPECT_EQ(placed(), 0U);
}

class soft_large_frames_pair : public arpma::test::soft_pair {};

// Between two soft ends, with and without an immediate, round after round:
// every byte lands in its receive and nowhere else.
TEST_F(soft_large_frames_pair, large_sends_land_whole_in_their_receives) {
  connect();
  constexpr std::size_t len = std::size_t{256} << 10;
  guarded& src = guarded_memory(len);
  guarded& dst = guarded_memory(2 * len);
  auto* smr = reg(a, src.data(), src.size());
  auto* dmr = reg(b, dst.data(), dst.size());
  for (std::uint8_t round = 1; round <= 8; ++round) {
    for (std::size_t i = 0; i < len; ++i) src.data()[i] = static_cast<std::uint8_t>(i * 7 + round);
    std::fill(dst.data(), dst.data() + dst.size(), 0);
    std::uint8_t* into = dst.data() + (round % 2) * len;
    ASSERT_FALSE(recv(b, dmr, into, static_cast<std::uint32_t>(len), round));
    const auto op = round % 2 == 0 ? prov::wr_opcode::send : prov::wr_opcode::send_with_imm;
    ASSERT_FALSE(post(a, op, smr, src.data(), static_cast<std::uint32_t>(len)));
    expect_wc(a.cq, 1, prov::wc_status::success, prov::wc_opcode::send);
    const auto wc = arpma::test::next_wc(soft, b.rcq);
    ASSERT_TRUE(wc);
    EXPECT_EQ(wc->wr_id, round);
    EXPECT_EQ(wc->byte_len, len);
    EXPECT_EQ(wc->with_imm, round % 2 != 0);
    EXPECT_TRUE(std::equal(src.data(), src.data() + len, into)) << "round " << int{round};
    const std::uint8_t* other = dst.data() + ((round + 1) % 2) * len;
    EXPECT_TRUE(std::all_of(other, other + len, [](auto v) { return v == 0; }));
    EXPECT_TRUE(dst.guards_intact());
  }
}

// READs of 1 and 4 MiB between two soft ends, round after round. Each round reads its own
// slice of the target: b's progress thread sends a response straight from it, and the READ can
// complete on this thread (a poll receives a's link inline). That the send is over is known
// here through the kernel (the bytes arrived), which ThreadSanitizer does not see across two
// sockets: writing the next round's pattern over the same bytes was reported as a race (CI,
// tsan preset, once).
TEST_F(soft_large_frames_pair, large_reads_land_whole_in_their_buffers) {
  connect();
  constexpr std::size_t len = std::size_t{4} << 20;
  constexpr std::uint8_t rounds = 4;
  guarded& remote = guarded_memory(rounds * len);
  guarded& local = guarded_memory(len);
  auto* rmr = reg(b, remote.data(), remote.size());
  auto* lmr = reg(a, local.data(), local.size());
  for (std::uint8_t round = 1; round <= rounds; ++round) {
    const std::size_t n = round % 2 != 0 ? len : len / 4;
    std::uint8_t* from = remote.data() + (round - 1) * len;
    for (std::size_t i = 0; i < len; ++i) from[i] = static_cast<std::uint8_t>(i + round);
    std::fill(local.data(), local.data() + len, 0);
    ASSERT_FALSE(post(a, prov::wr_opcode::rdma_read, lmr, local.data(),
                      static_cast<std::uint32_t>(n), arpma::test::addr_of(from), soft.mr_rkey(rmr),
                      round));
    expect_wc(a.cq, round, prov::wc_status::success, prov::wc_opcode::rdma_read);
    EXPECT_TRUE(std::equal(from, from + n, local.data())) << int{round};
    EXPECT_TRUE(std::all_of(local.data() + n, local.data() + len, [](auto v) { return v == 0; }));
    EXPECT_TRUE(local.guards_intact());
  }
}

}  // namespace

}  // namespace soft_large_frames_test

// A large payload the socket does not take at once, on the sending side of a
// soft link: what is left waits in its registered memory and is read from
// there when the socket has room (docs/soft-provider.md, "Sending"), looked up
// again for every write, so a region deregistered meanwhile is never read.
#include "provider/soft/soft_provider.hpp"
#include "support/raw_peer.hpp"
#include "support/soft_pair.hpp"
#include "support/soft_raw_link.hpp"
#include "support/wait.hpp"

#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace soft_borrowed_tail_test {

namespace {

using namespace arpma::test::raw;  // NOLINT(google-build-using-namespace): the wire vocabulary
using arpma::test::eventually;
using arpma::test::guarded;
namespace prov = arpma::provider;

constexpr std::size_t header = 12;

/// The region's byte `i`: never 0xee, the bytes written after deregistering.
std::uint8_t pattern(std::size_t i) { return static_cast<std::uint8_t>(i % 199); }

/// Whether a response's payload, or its first part, holds the region's bytes.
bool as_written(const std::vector<std::uint8_t>& response) {
  for (std::size_t i = header; i < response.size(); ++i)
    if (response[i] != pattern(i - header)) return false;
  return true;
}

/// The test is the requester of READs on a raw socket, and reads their
/// responses when it chooses.
class soft_borrowed_tail : public arpma::test::soft_raw_link {
 protected:
  static constexpr std::size_t size = std::size_t{8} << 20;  // the largest message

  void SetUp() override {
    soft_raw_link::SetUp();
    for (std::size_t i = 0; i < size; ++i) region_.data()[i] = pattern(i);
    region_mr_ = reg(b, region_.data(), region_.size());
    handshake();
  }

  void ask_for_all() {
    ASSERT_TRUE(write_all(
        fd_, read_frame(soft.mr_rkey(region_mr_), arpma::test::addr_of(region_.data()), size)));
  }
  /// Bytes the link delivered to this end so far, not read yet.
  std::size_t arrived() const {
    int n = 0;
    return ::ioctl(fd_, FIONREAD, &n) == 0 ? static_cast<std::size_t>(n) : 0;
  }
  /// Reads until the provider closes the link (or `limit` bytes).
  std::vector<std::uint8_t> read_until_closed(std::size_t limit) {
    std::vector<std::uint8_t> out;
    std::vector<std::uint8_t> buf(1 << 16);
    while (out.size() < limit) {
      const ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
      if (n <= 0) break;
      out.insert(out.end(), buf.begin(), buf.begin() + n);
    }
    return out;
  }

  guarded region_{size, 0};
  prov::mr* region_mr_ = nullptr;
};

TEST_F(soft_borrowed_tail, a_response_larger_than_the_socket_takes_arrives_whole) {
  ask_for_all();
  const auto got = read_exact(fd_, header + size);
  ASSERT_EQ(got.size(), header + size);
  EXPECT_EQ(got[5], 25) << "a READ response";
  EXPECT_TRUE(as_written(got));
}

// A response waiting for room reads its region when it is written: a region
// deregistered meanwhile (and reused: here overwritten) is never sent, and
// the link fails instead, as the responder's QP would on a NIC.
TEST_F(soft_borrowed_tail, a_region_deregistered_while_its_response_waits_is_never_read) {
  ask_for_all();
  // Deregistering waits for the response to be queued (it is queued under
  // the lock deregistration takes), so from the first byte on it is either
  // in the socket already or waiting in the region.
  ASSERT_TRUE(eventually([&] { return arrived() > 0; }));
  ASSERT_FALSE(soft.dereg_mr(region_mr_));
  std::erase(b.mrs, region_mr_);
  std::memset(region_.data(), 0xee, size);
  const auto got = read_until_closed(header + size);
  EXPECT_LT(got.size(), header + size) << "the whole response was sent";
  ASSERT_GT(got.size(), header);
  EXPECT_TRUE(std::none_of(got.begin() + header, got.end(), [](auto v) { return v == 0xee; }))
      << "bytes written to the region after it was deregistered went out";
  EXPECT_TRUE(as_written(got));
  expect_disconnected();
}

class soft_borrowed_tail_pair : public arpma::test::soft_pair {
 protected:
  static constexpr std::size_t piece = std::size_t{1} << 20;
  static constexpr int count = 12;

  /// Posts WRITE `i` of `from`: piece `i` of `src` to the same piece of `dst`.
  void post_piece(arpma::test::side& from, prov::mr* smr, guarded& src, prov::mr* dmr, guarded& dst,
                  int i) {
    const std::size_t at = piece * static_cast<std::size_t>(i);
    ASSERT_FALSE(post(from, prov::wr_opcode::rdma_write, smr, src.data() + at,
                      static_cast<std::uint32_t>(piece), arpma::test::addr_of(dst.data() + at),
                      soft.mr_rkey(dmr), static_cast<std::uint64_t>(i)));
  }
  void expect_written(arpma::test::side& from, int i) {
    expect_wc(from.cq, static_cast<std::uint64_t>(i), prov::wc_status::success,
              prov::wc_opcode::rdma_write);
  }
};

// Writes posted faster than the socket drains them queue behind each other,
// each waiting in its own source region, and land whole and in order.
TEST_F(soft_borrowed_tail_pair, queued_large_writes_land_whole) {
  connect();
  guarded& src = guarded_memory(piece * count);
  guarded& dst = guarded_memory(piece * count);
  for (std::size_t i = 0; i < src.size(); ++i)
    src.data()[i] = static_cast<std::uint8_t>(i / piece + i * 13);
  auto* smr = reg(a, src.data(), src.size());
  auto* dmr = reg(b, dst.data(), dst.size());
  for (int i = 0; i < count; ++i) post_piece(a, smr, src, dmr, dst, i);
  for (int i = 0; i < count; ++i) expect_written(a, i);
  EXPECT_TRUE(std::equal(src.data(), src.data() + src.size(), dst.data()));
  EXPECT_TRUE(dst.guards_intact());
}

// Both ends writing at once: each post finds acknowledgements owed to the
// peer and, often, its socket full; the frame queued behind those ACKs keeps
// its payload (it used to lose it when the ACKs could not go out first).
TEST_F(soft_borrowed_tail_pair, large_writes_both_ways_at_once_land_whole) {
  connect();
  guarded& a_src = guarded_memory(piece * count);
  guarded& b_src = guarded_memory(piece * count);
  guarded& a_dst = guarded_memory(piece * count);
  guarded& b_dst = guarded_memory(piece * count);
  for (std::size_t i = 0; i < a_src.size(); ++i) {
    a_src.data()[i] = static_cast<std::uint8_t>(i % 251);
    b_src.data()[i] = static_cast<std::uint8_t>(i % 241 + 7);
  }
  auto* a_smr = reg(a, a_src.data(), a_src.size());
  auto* b_smr = reg(b, b_src.data(), b_src.size());
  auto* a_dmr = reg(a, a_dst.data(), a_dst.size());
  auto* b_dmr = reg(b, b_dst.data(), b_dst.size());
  for (int i = 0; i < count; ++i) {
    post_piece(a, a_smr, a_src, b_dmr, b_dst, i);
    post_piece(b, b_smr, b_src, a_dmr, a_dst, i);
  }
  for (int i = 0; i < count; ++i) {
    expect_written(a, i);
    expect_written(b, i);
  }
  EXPECT_TRUE(std::equal(a_src.data(), a_src.data() + a_src.size(), b_dst.data()));
  EXPECT_TRUE(std::equal(b_src.data(), b_src.data() + b_src.size(), a_dst.data()));
}

}  // namespace

}  // namespace soft_borrowed_tail_test

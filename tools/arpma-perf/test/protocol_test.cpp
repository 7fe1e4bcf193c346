#include "protocol.hpp"

#include "progress.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace {

using namespace arpma_perf;

TEST(ProtocolTest, RoundTrip) {
  hello h;
  h.op = op_kind::send;
  h.test = test_kind::bw;
  h.mode = poll_mode::busy_poll;
  h.max_size = 65536;
  h.qd = 256;
  h.conns = 3;
  h.run_id = 0x0123456789abcdefULL;
  const auto bytes = encode(h);
  static_assert(hello_size <= 56, "rdma_cm's private data limit");
  // Transports may pad the private data.
  std::vector<std::uint8_t> padded(bytes.begin(), bytes.end());
  padded.resize(56, 0);
  const auto back = decode(padded);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->op, h.op);
  EXPECT_EQ(back->test, h.test);
  EXPECT_EQ(back->mode, h.mode);
  EXPECT_EQ(back->max_size, h.max_size);
  EXPECT_EQ(back->qd, h.qd);
  EXPECT_EQ(back->conns, h.conns);
  EXPECT_EQ(back->run_id, h.run_id);
  EXPECT_EQ(bytes[8], 0x00);  // little-endian 65536
  EXPECT_EQ(bytes[10], 0x01);
}

TEST(ProtocolTest, RejectsWhatIsNotAHello) {
  hello h;
  h.max_size = 64;
  const auto good = encode(h);
  EXPECT_TRUE(decode(good));
  EXPECT_FALSE(decode({}));
  EXPECT_FALSE(decode(std::span(good).first(hello_size - 1)));
  auto bad = good;
  bad[0] = 'X';
  EXPECT_FALSE(decode(bad));
  bad = good;
  bad[4] = 2;  // version
  EXPECT_FALSE(decode(bad));
  bad = good;
  bad[5] = 9;  // op
  EXPECT_FALSE(decode(bad));
  h.max_size = 0;
  EXPECT_FALSE(decode(encode(h)));
  h.max_size = max_message_size + 1;
  EXPECT_FALSE(decode(encode(h)));
  h.max_size = 64;
  h.qd = max_queue_depth + 1;
  EXPECT_FALSE(decode(encode(h)));
  h.qd = 1;
  h.conns = 0;
  EXPECT_FALSE(decode(encode(h)));
}

TEST(ProgressTest, Line) {
  progress_sample s;
  s.size = 4096;
  s.size_index = 1;
  s.size_count = 3;
  s.done = 5000;
  s.target = 10000;
  s.elapsed_s = 1.0;
  s.rate = 2500;
  EXPECT_EQ(progress_line(s), "4096 B (2/3): 5000 ops, 2.5 kops/s, 1.0 s elapsed, ETA 2.0 s");
  s.target = 0;
  s.duration_s = 3;
  s.rate = 2.5e6;
  EXPECT_EQ(progress_line(s), "4096 B (2/3): 5000 ops, 2.50 Mops/s, 1.0 s elapsed, ETA 2.0 s");
  s.target = 10;
  s.rate = 0;
  EXPECT_EQ(progress_line(s), "4096 B (2/3): 5000 ops, 0 ops/s, 1.0 s elapsed, ETA ?");
}

}  // namespace

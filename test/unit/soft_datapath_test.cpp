// The soft provider's data path through the provider interface, over
// loopback: every operation, queue depths, CQ notification, RNR waits, flush
// ordering, access checks, hostile raw peers, two processes and a killed
// peer. Every wait is bounded.
#include "provider/soft/soft_provider.hpp"

#include "support/open_fds.hpp"
#include "support/peer_process.hpp"
#include "support/provider_events.hpp"
#include "support/raw_peer.hpp"
#include "support/soft_pair.hpp"
#include "support/soft_raw_link.hpp"
#include "support/wait.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace soft_datapath_test {

namespace {

namespace prov = arpma::provider;
using namespace arpma::test::raw;  // NOLINT(google-build-using-namespace): the wire vocabulary
using namespace std::chrono_literals;
using arpma::test::eventually;
using prov::cm_event_type;
using prov::wc_opcode;
using prov::wc_status;
using prov::wr_opcode;

using arpma::test::addr_of;
using arpma::test::all_access;
using arpma::test::cq_empty;
using arpma::test::guarded;
using arpma::test::loopback;
using arpma::test::next_wc;
using arpma::test::qp_shape;
using arpma::test::sa;
using arpma::test::side;

std::optional<prov::cm_event> next_event(prov::provider& p, prov::event_channel* channel,
                                         std::chrono::milliseconds limit = wait_limit) {
  return arpma::test::next_event(p, channel, limit);
}

class soft_datapath_test : public arpma::test::soft_pair {};

// ---- operations ------------------------------------------------------------------

TEST_F(soft_datapath_test, send_and_send_with_imm_land_in_posted_receives) {
  connect();
  std::array<char, 64> in{};
  std::array<char, 16> out{"hello"};
  prov::mr* rmr = reg(b, in.data(), in.size());
  prov::mr* smr = reg(a, out.data(), out.size());
  ASSERT_FALSE(recv(b, rmr, in.data(), 32, 70));
  ASSERT_FALSE(recv(b, rmr, in.data() + 32, 32, 71));
  ASSERT_FALSE(post(a, wr_opcode::send, smr, out.data(), 5, 0, 0, 10));
  ASSERT_FALSE(post(a, wr_opcode::send_with_imm, smr, out.data(), 3, 0, 0, 11));
  expect_wc(a.cq, 10, wc_status::success, wc_opcode::send);
  expect_wc(a.cq, 11, wc_status::success, wc_opcode::send);
  auto r1 = next_wc(soft, b.rcq);
  ASSERT_TRUE(r1);
  EXPECT_EQ(r1->wr_id, 70u);
  EXPECT_EQ(r1->opcode, wc_opcode::recv);
  EXPECT_EQ(r1->byte_len, 5u);
  EXPECT_FALSE(r1->with_imm);
  EXPECT_EQ(r1->qp_num, soft.qp_num(b.id));
  auto r2 = next_wc(soft, b.rcq);
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->wr_id, 71u);
  EXPECT_TRUE(r2->with_imm);
  EXPECT_EQ(r2->imm_data, 0xc0ffeeu);
  EXPECT_EQ(std::string(in.data(), 5), "hello");
  EXPECT_EQ(std::string(in.data() + 32, 3), "hel");
}

TEST_F(soft_datapath_test, write_read_and_write_with_imm) {
  connect();
  auto& target = memory(8192, 0);
  std::vector<std::uint8_t> src(4096);
  std::vector<std::uint8_t> back(4096, 0);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 7);
  prov::mr* tmr = reg(b, target.data(), target.size());
  prov::mr* smr = reg(a, src.data(), src.size());
  prov::mr* bmr = reg(a, back.data(), back.size());
  const std::uint32_t rkey = soft.mr_rkey(tmr);
  ASSERT_FALSE(
      post(a, wr_opcode::rdma_write, smr, src.data(), 4096, addr_of(&target[100]), rkey, 1));
  expect_wc(a.cq, 1, wc_status::success, wc_opcode::rdma_write);
  EXPECT_TRUE(std::equal(src.begin(), src.end(), target.begin() + 100));
  ASSERT_FALSE(
      post(a, wr_opcode::rdma_read, bmr, back.data(), 4096, addr_of(&target[100]), rkey, 2));
  expect_wc(a.cq, 2, wc_status::success, wc_opcode::rdma_read);
  EXPECT_EQ(back, src);

  std::array<std::uint8_t, 4> unused{};
  prov::mr* umr = reg(b, unused.data(), unused.size());
  ASSERT_FALSE(recv(b, umr, unused.data(), 0, 9));
  ASSERT_FALSE(
      post(a, wr_opcode::rdma_write_with_imm, smr, src.data(), 16, addr_of(&target[0]), rkey, 3));
  expect_wc(a.cq, 3, wc_status::success, wc_opcode::rdma_write);
  auto r = next_wc(soft, b.rcq);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->wr_id, 9u);
  EXPECT_EQ(r->opcode, wc_opcode::recv_rdma_with_imm);
  EXPECT_EQ(r->byte_len, 16u);
  EXPECT_TRUE(r->with_imm);
  EXPECT_EQ(r->imm_data, 0xc0ffeeu);
  EXPECT_TRUE(std::equal(src.begin(), src.begin() + 16, target.begin()));
}

// More READs than the initiator depth (16): the requester holds the rest
// and what follows them, in order, as a NIC stalls its send queue; the
// responder would refuse a 17th it had not answered yet.
TEST_F(soft_datapath_test, reads_past_the_initiator_depth_wait_their_turn_in_order) {
  connect({.max_send_wr = 64});
  constexpr std::size_t reads = 40;
  constexpr std::size_t piece = 1024;
  auto& target = memory(reads * piece);
  for (std::size_t i = 0; i < target.size(); ++i) target[i] = static_cast<std::uint8_t>(i * 13);
  auto& back = memory(target.size(), 0);
  auto& src = memory(piece, 0x77);
  prov::mr* tmr = reg(b, target.data(), target.size());
  prov::mr* bmr = reg(a, back.data(), back.size());
  prov::mr* smr = reg(a, src.data(), src.size());
  const std::uint32_t rkey = soft.mr_rkey(tmr);
  for (std::size_t i = 0; i < reads; ++i)
    ASSERT_FALSE(post(a, wr_opcode::rdma_read, bmr, &back[i * piece], piece,
                      addr_of(&target[i * piece]), rkey, i + 1));
  // A write behind the held reads lands after every one of them has read.
  ASSERT_FALSE(
      post(a, wr_opcode::rdma_write, smr, src.data(), piece, addr_of(&target[0]), rkey, reads + 1));
  for (std::size_t i = 0; i < reads; ++i)
    expect_wc(a.cq, i + 1, wc_status::success, wc_opcode::rdma_read);
  expect_wc(a.cq, reads + 1, wc_status::success, wc_opcode::rdma_write);
  for (std::size_t i = 0; i < back.size(); ++i)
    ASSERT_EQ(back[i], static_cast<std::uint8_t>(i * 13)) << i;
  EXPECT_EQ(target[0], 0x77);
}

// Messages larger than the socket buffers go out in pieces (what does not fit
// at once is queued for the progress thread): placed whole and in order.
TEST_F(soft_datapath_test, the_largest_messages_arrive_whole_and_larger_ones_are_einval) {
  connect();
  constexpr std::size_t max = std::size_t{8} << 20;
  auto& src = memory(max + 1);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 131 + 7);
  auto& target = memory(2 * max, 0);
  auto& back = memory(max, 0);
  prov::mr* smr = reg(a, src.data(), src.size());
  prov::mr* bmr = reg(a, back.data(), back.size());
  prov::mr* tmr = reg(b, target.data(), target.size());
  const std::uint32_t rkey = soft.mr_rkey(tmr);
  EXPECT_EQ(post(a, wr_opcode::rdma_write, smr, src.data(), max + 1, addr_of(target.data()), rkey),
            std::errc::invalid_argument);
  ASSERT_FALSE(
      post(a, wr_opcode::rdma_write, smr, src.data(), max, addr_of(target.data()), rkey, 1, false));
  ASSERT_FALSE(post(a, wr_opcode::rdma_write, smr, src.data() + 1, max,
                    addr_of(target.data() + max), rkey, 2));
  expect_wc(a.cq, 2, wc_status::success, wc_opcode::rdma_write);
  EXPECT_TRUE(std::equal(src.begin(), src.begin() + max, target.begin()));
  EXPECT_TRUE(std::equal(src.begin() + 1, src.end(), target.begin() + max));
  ASSERT_FALSE(
      post(a, wr_opcode::rdma_read, bmr, back.data(), max, addr_of(target.data() + max), rkey, 3));
  expect_wc(a.cq, 3, wc_status::success, wc_opcode::rdma_read);
  EXPECT_TRUE(std::equal(back.begin(), back.end(), src.begin() + 1));
}

// A stream of large writes, 16 in flight: their payloads are read straight
// into the target when they are in the socket whole, through the buffer
// otherwise; every byte lands where its write said, whichever way it went.
TEST_F(soft_datapath_test, a_stream_of_large_writes_places_every_byte) {
  connect({.max_send_wr = 16, .max_recv_wr = 16});
  constexpr std::size_t chunk = 64 << 10;
  constexpr std::size_t count = 96;
  auto& src = memory(16 * chunk);
  auto& target = memory(count * chunk, 0);
  prov::mr* smr = reg(a, src.data(), src.size());
  prov::mr* tmr = reg(b, target.data(), target.size());
  std::size_t posted = 0;
  std::size_t done = 0;
  auto post_next = [&] {
    std::uint8_t* slot = &src[(posted % 16) * chunk];
    for (std::size_t i = 0; i < chunk; ++i) slot[i] = static_cast<std::uint8_t>(posted + i / 4096);
    ASSERT_FALSE(post(a, wr_opcode::rdma_write, smr, slot, chunk, addr_of(&target[posted * chunk]),
                      soft.mr_rkey(tmr), posted));
    ++posted;
  };
  while (posted < 16) post_next();
  while (done < count) {
    expect_wc(a.cq, done, wc_status::success, wc_opcode::rdma_write);
    ++done;
    if (posted < count) post_next();
  }
  for (std::size_t w = 0; w < count; ++w)
    for (std::size_t i = 0; i < chunk; i += 512)
      ASSERT_EQ(target[w * chunk + i], static_cast<std::uint8_t>(w + i / 4096)) << w << " " << i;
}

TEST_F(soft_datapath_test, atomic_write_places_8_aligned_bytes_and_refuses_misaligned) {
  connect();
  alignas(8) std::array<std::uint8_t, 32> target{};
  prov::mr* tmr = reg(b, target.data(), target.size());
  prov::send_wr wr;
  wr.wr_id = 5;
  wr.opcode = wr_opcode::atomic_write;
  wr.remote_addr = addr_of(&target[8]);
  wr.rkey = soft.mr_rkey(tmr);
  wr.atomic_value = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_FALSE(soft.post_send(a.id, wr));
  expect_wc(a.cq, 5, wc_status::success, wc_opcode::atomic_write);
  EXPECT_TRUE(std::equal(wr.atomic_value.begin(), wr.atomic_value.end(), &target[8]));
  wr.wr_id = 6;
  wr.remote_addr = addr_of(&target[12]);
  ASSERT_FALSE(soft.post_send(a.id, wr));
  expect_wc(a.cq, 6, wc_status::rem_inv_req_err, wc_opcode::atomic_write);
  EXPECT_EQ(target[12], 5) << "untouched";
}

TEST_F(soft_datapath_test, flush_completes_after_the_writes_before_it_and_checks_access) {
  connect();
  auto& target = memory(1 << 20, 0);
  auto& src = memory(64 << 10, 0x42);
  prov::mr* tmr = reg(b, target.data(), target.size());
  prov::mr* smr = reg(a, src.data(), src.size());
  const std::uint32_t rkey = soft.mr_rkey(tmr);
  for (std::uint64_t i = 0; i < 8; ++i)
    ASSERT_FALSE(post(a, wr_opcode::rdma_write, smr, src.data(), 64 << 10,
                      addr_of(&target[i * (64 << 10)]), rkey, 100 + i, false));
  prov::send_wr flush;
  flush.wr_id = 200;
  flush.opcode = wr_opcode::flush;
  flush.remote_addr = addr_of(target.data());
  flush.flush_length = 8 * (64 << 10);
  flush.rkey = rkey;
  flush.flush = prov::flush_type::persistent;
  ASSERT_FALSE(soft.post_send(a.id, flush));
  expect_wc(a.cq, 200, wc_status::success, wc_opcode::flush);
  EXPECT_TRUE(std::all_of(target.begin(), target.begin() + 8 * (64 << 10), [](auto v) {
    return v == 0x42;
  })) << "every write before the flush is placed when it completes";
  EXPECT_TRUE(cq_empty(soft, a.cq)) << "unsignaled writes complete silently";

  std::array<std::uint8_t, 64> plain{};
  prov::mr* nmr = reg(b, plain.data(), plain.size(), prov::access::remote_write);
  flush.wr_id = 201;
  flush.rkey = soft.mr_rkey(nmr);
  flush.level = prov::flush_level::mr;
  ASSERT_FALSE(soft.post_send(a.id, flush));
  expect_wc(a.cq, 201, wc_status::rem_access_err, wc_opcode::flush);
}

TEST_F(soft_datapath_test, a_persistent_flush_that_cannot_write_back_completes_with_an_error) {
  connect();
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* mem = ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  prov::mr* tmr = reg(b, mem, 2 * page);
  prov::send_wr flush;
  flush.wr_id = 300;
  flush.opcode = wr_opcode::flush;
  flush.remote_addr = addr_of(mem);
  flush.flush_length = 2 * page;
  flush.rkey = soft.mr_rkey(tmr);
  flush.flush = prov::flush_type::persistent;
  ASSERT_FALSE(soft.post_send(a.id, flush));
  expect_wc(a.cq, 300, wc_status::success, wc_opcode::flush);
  // Unmapped under its registration, msync fails (ENOMEM) as it would on an
  // I/O error: the flush must not report the range persistent.
  ASSERT_EQ(::munmap(mem, 2 * page), 0);
  flush.wr_id = 301;
  ASSERT_FALSE(soft.post_send(a.id, flush));
  expect_wc(a.cq, 301, wc_status::rem_op_err, wc_opcode::flush);
}

// ---- queues and completions ------------------------------------------------------------

TEST_F(soft_datapath_test, queue_depths_are_enforced_and_a_send_waits_for_a_receive) {
  connect({.max_send_wr = 4, .max_recv_wr = 16}, {.max_send_wr = 4, .max_recv_wr = 3});
  std::array<char, 64> buf{};
  prov::mr* amr = reg(a, buf.data(), buf.size());
  std::array<char, 256> in{};
  prov::mr* bmr = reg(b, in.data(), in.size());
  for (std::uint64_t i = 0; i < 4; ++i)
    ASSERT_FALSE(post(a, wr_opcode::send, amr, buf.data(), 8, 0, 0, i));
  EXPECT_EQ(post(a, wr_opcode::send, amr, buf.data(), 8, 0, 0, 4), std::errc::not_enough_memory);
  // All four have reached b and are held there (each costs at least its 64 B of
  // bookkeeping; three cannot reach 256 B with 8 B payloads).
  ASSERT_TRUE(eventually([&] { return soft.held_bytes() >= 4 * 64; })) << soft.held_bytes();
  EXPECT_TRUE(cq_empty(soft, a.cq)) << "no receive posted: the sends wait (RNR)";

  for (std::uint64_t i = 0; i < 3; ++i) ASSERT_FALSE(recv(b, bmr, &in[i * 64], 64, 50 + i));
  EXPECT_EQ(recv(b, bmr, in.data(), 64, 99), std::errc::not_enough_memory);
  for (std::uint64_t i = 0; i < 3; ++i) expect_wc(a.cq, i, wc_status::success, wc_opcode::send);
  ASSERT_FALSE(recv(b, bmr, &in[192], 64, 53));
  expect_wc(a.cq, 3, wc_status::success, wc_opcode::send);
  for (std::uint64_t i = 0; i < 4; ++i)
    expect_wc(b.rcq, 50 + i, wc_status::success, wc_opcode::recv);
}

TEST_F(soft_datapath_test, a_send_nobody_receives_gives_rnr_retry_exceeded) {
  soft.set_rnr_timeout(300ms);
  connect();
  std::array<char, 8> buf{};
  prov::mr* amr = reg(a, buf.data(), buf.size());
  const auto start = std::chrono::steady_clock::now();
  ASSERT_FALSE(post(a, wr_opcode::send, amr, buf.data(), 8, 0, 0, 1));
  ASSERT_FALSE(post(a, wr_opcode::send, amr, buf.data(), 8, 0, 0, 2));
  expect_wc(a.cq, 1, wc_status::rnr_retry_exc_err, wc_opcode::send);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms);
  expect_wc(a.cq, 2, wc_status::wr_flush_err, wc_opcode::send);
  ASSERT_FALSE(post(a, wr_opcode::send, amr, buf.data(), 8, 0, 0, 3));
  expect_wc(a.cq, 3, wc_status::wr_flush_err, wc_opcode::send);
}

TEST_F(soft_datapath_test, a_waiting_send_does_not_hold_up_responses_the_other_way) {
  connect();
  std::array<char, 64> buf{};
  prov::mr* amr = reg(a, buf.data(), buf.size());
  std::array<char, 64> bbuf{};
  prov::mr* bmr = reg(b, bbuf.data(), bbuf.size());
  ASSERT_FALSE(post(a, wr_opcode::send, amr, buf.data(), 8, 0, 0, 1));  // waits at b
  // b writes to a; its acknowledgement travels on the link b is stalling.
  ASSERT_FALSE(post(b, wr_opcode::rdma_write, bmr, bbuf.data(), 8, addr_of(buf.data()),
                    soft.mr_rkey(amr), 2));
  expect_wc(b.cq, 2, wc_status::success, wc_opcode::rdma_write);
  ASSERT_FALSE(recv(b, bmr, bbuf.data(), 64, 3));
  expect_wc(a.cq, 1, wc_status::success, wc_opcode::send);
}

TEST_F(soft_datapath_test, a_cq_event_fires_once_per_arming) {
  connect();
  std::array<char, 8> buf{};
  prov::mr* amr = reg(a, buf.data(), buf.size());
  std::array<char, 8> target{};
  prov::mr* tmr = reg(b, target.data(), target.size());
  auto none = soft.get_cq_event(a.cc);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error(), std::errc::resource_unavailable_try_again);

  ASSERT_FALSE(post(a, wr_opcode::rdma_write, amr, buf.data(), 8, addr_of(target.data()),
                    soft.mr_rkey(tmr), 1));
  expect_wc(a.cq, 1, wc_status::success, wc_opcode::rdma_write);
  EXPECT_FALSE(soft.get_cq_event(a.cc)) << "not armed: no event";

  ASSERT_FALSE(soft.req_notify_cq(a.cq, false));
  for (std::uint64_t id = 2; id <= 3; ++id) {
    ASSERT_FALSE(post(a, wr_opcode::rdma_write, amr, buf.data(), 8, addr_of(target.data()),
                      soft.mr_rkey(tmr), id));
    expect_wc(a.cq, id, wc_status::success, wc_opcode::rdma_write);
  }
  pollfd ready{soft.comp_channel_fd(a.cc), POLLIN, 0};
  ASSERT_EQ(::poll(&ready, 1, 1000), 1);
  auto fired = soft.get_cq_event(a.cc);
  ASSERT_TRUE(fired);
  EXPECT_EQ(fired.value(), a.cq);
  soft.ack_cq_events(a.cq, 1);
  EXPECT_FALSE(soft.get_cq_event(a.cc)) << "one event per arming, however many completions";

  ASSERT_FALSE(soft.req_notify_cq(a.cq, false));
  ASSERT_FALSE(post(a, wr_opcode::rdma_write, amr, buf.data(), 8, addr_of(target.data()),
                    soft.mr_rkey(tmr), 4));
  ASSERT_EQ(::poll(&ready, 1, 1000), 1) << "re-armed: the next completion fires";
  EXPECT_TRUE(soft.get_cq_event(a.cc));
}

TEST_F(soft_datapath_test, a_shared_receive_queue_feeds_the_qp) {
  make_objects(b);  // the SRQ needs b's PD before the connection exists
  auto srq = soft.create_srq(b.pd, 2, 1);
  ASSERT_TRUE(srq);
  srq_ = srq.value();
  std::array<char, 64> in{};
  prov::mr* rmr = reg(b, in.data(), in.size());
  prov::recv_wr r;
  r.wr_id = 31;
  r.local = {addr_of(in.data()), 64, soft.mr_lkey(rmr)};
  ASSERT_FALSE(soft.post_srq_recv(srq_, r));
  ASSERT_FALSE(soft.post_srq_recv(srq_, r));
  EXPECT_EQ(soft.post_srq_recv(srq_, r), std::errc::not_enough_memory);
  connect({}, {.srq = srq_});
  EXPECT_EQ(recv(b, rmr, in.data(), 8), std::errc::invalid_argument) << "the QP has an SRQ";

  std::array<char, 8> out{"srq"};
  prov::mr* smr = reg(a, out.data(), out.size());
  ASSERT_FALSE(post(a, wr_opcode::send, smr, out.data(), 4, 0, 0, 1));
  expect_wc(b.rcq, 31, wc_status::success, wc_opcode::recv);
  EXPECT_STREQ(in.data(), "srq");
  EXPECT_EQ(soft.destroy_srq(srq_), std::errc::device_or_resource_busy);
}

TEST_F(soft_datapath_test, disconnect_flushes_outstanding_work_on_both_sides) {
  connect();
  std::array<char, 8> buf{};
  prov::mr* amr = reg(a, buf.data(), buf.size());
  std::array<char, 8> in{};
  prov::mr* bmr = reg(b, in.data(), in.size());
  ASSERT_FALSE(recv(a, amr, buf.data(), 8, 40));
  ASSERT_FALSE(post(b, wr_opcode::send, bmr, in.data(), 8, 0, 0, 41));
  expect_wc(b.cq, 41, wc_status::success, wc_opcode::send);
  expect_wc(a.rcq, 40, wc_status::success, wc_opcode::recv);
  for (std::uint64_t i = 0; i < 3; ++i)
    ASSERT_FALSE(post(a, wr_opcode::send, amr, buf.data(), 8, 0, 0, i));  // no receive at b
  ASSERT_FALSE(recv(a, amr, buf.data(), 8, 42));
  ASSERT_FALSE(soft.disconnect(a.id));
  for (std::uint64_t i = 0; i < 3; ++i)
    expect_wc(a.cq, i, wc_status::wr_flush_err, wc_opcode::send);
  expect_wc(a.rcq, 42, wc_status::wr_flush_err, wc_opcode::recv);
  auto e = next_event(soft, b.ch);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, cm_event_type::disconnected);
  ASSERT_FALSE(post(b, wr_opcode::send, bmr, in.data(), 8, 0, 0, 43));
  expect_wc(b.cq, 43, wc_status::wr_flush_err, wc_opcode::send);
}

// ---- access checks ---------------------------------------------------------------------

class soft_datapath_violation : public soft_datapath_test,
                                public ::testing::WithParamInterface<int> {};

// Each case: one forbidden access; REM_ACCESS_ERR, the QP in error, and not a
// byte of the target changed, inside or around the region.
TEST_P(soft_datapath_violation, gives_rem_access_err_and_touches_nothing) {
  connect();
  guarded target(256, 0x11);
  guarded readonly(256, 0x22);
  prov::mr* tmr = reg(b, target.data(), target.size());
  prov::mr* romr = reg(b, readonly.data(), readonly.size(), prov::access::remote_read);
  prov::mr* wonly = reg(b, readonly.data(), 16, prov::access::remote_write);
  std::vector<std::uint8_t> src(512, 0xee);
  prov::mr* smr = reg(a, src.data(), src.size());
  const std::uint64_t base = addr_of(target.data());
  const std::uint32_t rkey = soft.mr_rkey(tmr);
  wr_opcode op = wr_opcode::rdma_write;
  std::uint64_t remote = base;
  std::uint32_t key = rkey;
  std::uint32_t len = 16;
  switch (GetParam()) {
    case 0: key = rkey ^ 0x1u; break;               // forged rkey
    case 1: remote = base + 256 - 8; break;         // runs past the end
    case 2: remote = base - 8; break;               // starts before
    case 3: len = 257; break;                       // longer than the region
    case 4: remote = ~std::uint64_t{0} - 7; break;  // wraps around
    case 5:
      key = soft.mr_rkey(romr);
      remote = addr_of(readonly.data());
      break;  // no write access
    case 6:   // no read access
      op = wr_opcode::rdma_read;
      key = soft.mr_rkey(wonly);
      remote = addr_of(readonly.data());
      break;
    case 7: key = 0; break;  // key 0 is never handed out
    default: FAIL();
  }
  const auto target_before = target.bytes;
  const auto readonly_before = readonly.bytes;
  ASSERT_FALSE(post(a, op, smr, src.data(), len, remote, key, 1));
  ASSERT_FALSE(post(a, wr_opcode::rdma_write, smr, src.data(), 8, base, rkey, 2));
  expect_wc(a.cq, 1, wc_status::rem_access_err,
            op == wr_opcode::rdma_read ? wc_opcode::rdma_read : wc_opcode::rdma_write);
  expect_wc(a.cq, 2, wc_status::wr_flush_err, wc_opcode::rdma_write);
  EXPECT_EQ(target.bytes, target_before);
  EXPECT_EQ(readonly.bytes, readonly_before);
  EXPECT_TRUE(std::all_of(src.begin(), src.end(), [](auto v) { return v == 0xee; }));
}

INSTANTIATE_TEST_SUITE_P(cases, soft_datapath_violation, ::testing::Range(0, 8));

TEST_F(soft_datapath_test, an_unregistered_local_buffer_is_a_local_protection_error) {
  connect();
  std::array<char, 64> buf{};
  prov::mr* amr = reg(a, buf.data(), 32);
  ASSERT_FALSE(post(a, wr_opcode::send, amr, buf.data() + 16, 32, 0, 0, 1));  // past the MR
  expect_wc(a.cq, 1, wc_status::loc_prot_err, wc_opcode::send);
  ASSERT_FALSE(post(a, wr_opcode::send, amr, buf.data(), 8, 0, 0, 2));
  expect_wc(a.cq, 2, wc_status::wr_flush_err, wc_opcode::send);
}

TEST_F(soft_datapath_test, posting_before_the_connection_or_with_bad_arguments_is_einval) {
  make_objects(a);
  a.id = soft.create_id(a.ch, 2).value();
  const sockaddr_in to = loopback(9);
  ASSERT_FALSE(soft.resolve_addr(a.id, sa(to), 1000));
  ASSERT_TRUE(next_event(soft, a.ch));
  EXPECT_EQ(post(a, wr_opcode::send, nullptr, nullptr, 0), std::errc::invalid_argument) << "no QP";
  make_qp(a, {});
  EXPECT_EQ(post(a, wr_opcode::send, nullptr, nullptr, 0), std::errc::invalid_argument)
      << "not connected";
  EXPECT_FALSE(recv(a, nullptr, nullptr, 0)) << "receives may be posted before connecting";
  EXPECT_FALSE(soft.reg_mr(a.pd, nullptr, 8, all_access));
  std::array<char, 8> buf{};
  EXPECT_FALSE(soft.reg_mr(a.pd, buf.data(), 0, all_access));
  auto m1 = soft.reg_mr(a.pd, buf.data(), buf.size(), all_access);
  auto m2 = soft.reg_mr(a.pd, buf.data(), buf.size(), all_access);
  ASSERT_TRUE(m1 && m2);
  EXPECT_NE(soft.mr_rkey(m1.value()), soft.mr_rkey(m2.value()));
  EXPECT_EQ(soft.dealloc_pd(a.pd), std::errc::device_or_resource_busy);
  EXPECT_FALSE(soft.dereg_mr(m1.value()));
  EXPECT_FALSE(soft.dereg_mr(m2.value()));
}

// ---- the device handle ------------------------------------------------------------------

// Programs get the soft device's ibv_context from rpma_utils_get_ibv_context
// and may hand it to libibverbs: every verb fails, nothing crashes.
TEST_F(soft_datapath_test, verbs_called_directly_on_the_soft_device_fail_cleanly) {
  ibv_context* ctx = soft.find_device("127.0.0.1", false).value();
  ASSERT_NE(ctx, nullptr);
  ASSERT_NE(ctx->device, nullptr);
  EXPECT_STREQ(ibv_get_device_name(ctx->device), "arpma_soft");
  errno = 0;
  EXPECT_EQ(ibv_alloc_pd(ctx), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_device_attr attr{};
  EXPECT_NE(ibv_query_device(ctx, &attr), 0);
  ibv_device_attr_ex attr_ex{};
  EXPECT_NE(ibv_query_device_ex(ctx, nullptr, &attr_ex), 0);
  ibv_port_attr port{};
  EXPECT_NE(ibv_query_port(ctx, 1, &port), 0);
  if (ibv_comp_channel* channel = ibv_create_comp_channel(ctx)) {
    (void)ibv_destroy_comp_channel(channel);  // a plain fd is all it needs: fine either way
  }
  EXPECT_EQ(ibv_create_cq(ctx, 4, nullptr, nullptr, 0), nullptr);

  // The inline wrappers go through ctx->ops; objects that claim the context
  // reach the same failures.
  ibv_qp qp{};
  qp.context = ctx;
  ibv_send_wr swr{};
  ibv_send_wr* bad_send = nullptr;
  EXPECT_NE(ibv_post_send(&qp, &swr, &bad_send), 0);
  ibv_recv_wr rwr{};
  ibv_recv_wr* bad_recv = nullptr;
  EXPECT_NE(ibv_post_recv(&qp, &rwr, &bad_recv), 0);
  ibv_cq cq{};
  cq.context = ctx;
  ibv_wc wc{};
  EXPECT_LT(ibv_poll_cq(&cq, 1, &wc), 0);
  EXPECT_NE(ibv_req_notify_cq(&cq, 0), 0);
  ibv_srq srq{};
  srq.context = ctx;
  EXPECT_NE(ibv_post_srq_recv(&srq, &rwr, &bad_recv), 0);
}

// ---- hostile raw peers -----------------------------------------------------------------

/// A raw TCP peer that got through the handshake to a passive id with a QP
/// and a guarded target region.
class soft_datapath_hostile : public arpma::test::soft_raw_link {};

TEST_F(soft_datapath_hostile, forged_keys_and_bad_ranges_get_a_nak_and_nothing_after_runs) {
  handshake();
  const auto before = target_.bytes;
  ASSERT_TRUE(write_all(fd_, write_frame(rkey_ ^ 0x80000000u, base(), 16)));
  EXPECT_EQ(read_exact(fd_, 16), nak_access);
  // The QP is in error now: even a valid write is not executed. Frames are
  // taken in order, so once our end of stream has been read, so was the write.
  ASSERT_TRUE(write_all(fd_, write_frame(rkey_, base(), 16)));
  ASSERT_EQ(::shutdown(fd_, SHUT_WR), 0);
  expect_disconnected();
  EXPECT_EQ(target_.bytes, before);
}

TEST_F(soft_datapath_hostile, each_out_of_bounds_request_is_refused) {
  const std::vector<std::vector<std::uint8_t>> requests = {
      write_frame(rkey_, base() + 250, 16),            // runs past the end
      write_frame(rkey_, base() - 1, 2),               // starts before
      write_frame(rkey_, ~std::uint64_t{0} - 3, 16),   // wraps around
      read_frame(rkey_, base() + 1, 256),              // one byte too many
      read_frame(rkey_, ~std::uint64_t{0} - 7, 4096),  // wraps around
      read_frame(0x12345678, base(), 8),               // forged
      wire_frame(21,
                 [&] {  // atomic write before the MR
                   auto p = remote(rkey_, base() - 8);
                   p.insert(p.end(), 8, 0xcc);
                   return p;
                 }()),
      wire_frame(22,
                 [&] {  // flush past the end
                   auto p = remote(rkey_, base());
                   put_be(p, 257, 8);
                   p.push_back(0);
                   p.push_back(0);
                   return p;
                 }()),
  };
  const auto before = target_.bytes;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(i);
    handshake();
    ASSERT_TRUE(write_all(fd_, requests[i]));
    EXPECT_EQ(read_exact(fd_, 16), nak_access);
    EXPECT_EQ(target_.bytes, before);
    soft.destroy_qp(b.id);
    EXPECT_FALSE(soft.destroy_id(b.id));
    b.id = nullptr;
    ::close(fd_);
    fd_ = -1;
  }
}

TEST_F(soft_datapath_hostile, malformed_frames_close_the_connection) {
  const std::vector<std::vector<std::uint8_t>> frames = {
      read_frame(rkey_, base(), 0xffffffffu),              // absurd read length
      wire_frame(18, remote(rkey_, base()), 0xfffffff0u),  // absurd write length
      wire_frame(18, {1, 2, 3}),                           // too short for a write
      wire_frame(23, {0, 0, 0, 1}),                        // ACK of nothing
      wire_frame(23, {0, 0, 0, 0}),                        // ACK of zero
      wire_frame(24, {0, 0, 0, 10}),                       // NAK of nothing
      wire_frame(25, {1, 2, 3}),                           // read response unasked
      wire_frame(22,
                 [&] {  // unknown flush type
                   auto p = remote(rkey_, base());
                   put_be(p, 8, 8);
                   p.push_back(7);
                   p.push_back(0);
                   return p;
                 }()),
      wire_frame(40, {}),                   // unknown type
      std::vector<std::uint8_t>(32, 0xab),  // garbage
  };
  const auto before = target_.bytes;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    SCOPED_TRACE(i);
    handshake();
    ASSERT_TRUE(write_all(fd_, frames[i]));
    EXPECT_TRUE(closed_by_peer(fd_));
    expect_disconnected();
    EXPECT_EQ(target_.bytes, before);
    soft.destroy_qp(b.id);
    EXPECT_FALSE(soft.destroy_id(b.id));
    b.id = nullptr;
    while (next_event(soft, b.ch, 100ms)) {
    }
    ::close(fd_);
    fd_ = -1;
  }
}

TEST_F(soft_datapath_hostile, a_bad_frame_closes_a_link_its_poller_holds_without_a_leak) {
  handshake();
  // b busy-polls (an empty CQ: the peer's WRITEs complete nothing here)
  // while the peer writes, until b's progress thread leaves it the link.
  const auto poll_a_while = [&] {
    for (int i = 0; i < 200; ++i) {
      std::array<prov::work_completion, 1> wc{};
      ASSERT_TRUE(soft.poll_cq(b.cq, wc));
    }
  };
  for (int i = 0; i < 2000 && soft.parks() == 0; ++i) {
    ASSERT_TRUE(write_all(fd_, write_frame(rkey_, base(), 16)));
    poll_a_while();
  }
  ASSERT_GT(soft.parks(), 0u);
  const std::size_t before = arpma::test::open_fds();
  ASSERT_TRUE(write_all(fd_, wire_frame(40, {})));  // an unknown type
  const auto deadline = std::chrono::steady_clock::now() + wait_limit;
  std::optional<prov::cm_event> event;
  while (!event && std::chrono::steady_clock::now() < deadline) {
    poll_a_while();
    prov::cm_event e;
    if (!soft.get_cm_event_nonblocking(b.ch, e)) event = e;
  }
  ASSERT_TRUE(event);
  EXPECT_EQ(event->type, cm_event_type::disconnected);
  EXPECT_TRUE(closed_by_peer(fd_));
  EXPECT_TRUE(arpma::test::eventually([&] { return arpma::test::open_fds() == before - 1; }))
      << "b's socket is closed: " << arpma::test::open_fds() << " open, " << before << " before";
}

TEST_F(soft_datapath_hostile, a_truncated_write_then_eof_places_nothing) {
  handshake();
  const auto before = target_.bytes;
  auto f = write_frame(rkey_, base(), 64);
  f.resize(f.size() - 10);
  ASSERT_TRUE(write_all(fd_, f));
  ::shutdown(fd_, SHUT_WR);
  expect_disconnected();
  EXPECT_EQ(target_.bytes, before);
}

// ---- two processes ---------------------------------------------------------------------

int wait_child(pid_t pid, std::chrono::milliseconds limit = 10000ms) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(10ms);
  }
  ::kill(pid, SIGKILL);
  (void)::waitpid(pid, &status, 0);
  return -1;
}

struct region_desc {
  std::uint64_t addr;
  std::uint32_t rkey;
};

/// The child's side of a connection to 127.0.0.1:port: a QP, a 4 KiB region
/// of its own (offered in the connect's private data) and one to read into.
struct child_end {
  prov::soft_provider p;
  prov::event_channel* ch = nullptr;
  prov::cm_id* id = nullptr;
  prov::pd* pd = nullptr;
  prov::cq* cq = nullptr;
  std::vector<std::uint8_t> mine = std::vector<std::uint8_t>(4096);
  std::vector<std::uint8_t> back = std::vector<std::uint8_t>(4096, 0);
  prov::mr* mr = nullptr;
  prov::mr* bmr = nullptr;
  region_desc theirs{};

  /// 0 when connected, else the exit status that says where it stopped.
  int connect(std::uint16_t port) {
    prov::device* dev = p.find_device("127.0.0.1", true).value();
    ch = p.create_event_channel().value();
    id = p.create_id(ch, 1).value();
    const sockaddr_in to = loopback(port);
    if (p.resolve_addr(id, sa(to), 1000) || !next_event(p, ch)) return 10;
    if (p.resolve_route(id, 1000) || !next_event(p, ch)) return 11;
    pd = p.alloc_pd(dev).value();
    cq = p.create_cq(dev, 64, nullptr).value();
    prov::qp_config config;
    config.send_cq = config.recv_cq = cq;
    config.max_send_wr = 32;
    if (p.create_qp(id, pd, config)) return 12;
    for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<std::uint8_t>(i ^ 0x5a);
    mr = p.reg_mr(pd, mine.data(), mine.size(), all_access).value();
    bmr = p.reg_mr(pd, back.data(), back.size(), all_access).value();
    region_desc offer{addr_of(mine.data()), p.mr_rkey(mr)};
    prov::conn_param param;
    param.private_data = &offer;
    param.private_data_len = sizeof offer;
    if (p.connect(id, param)) return 13;
    auto e = next_event(p, ch);
    if (!e || e->type != cm_event_type::established) return 14;
    std::memcpy(&theirs, e->private_data.data(), sizeof theirs);
    return 0;
  }

  /// Posts `wr` and waits for its successful completion.
  bool run(const prov::send_wr& wr) {
    if (p.post_send(id, wr)) return false;
    auto wc = next_wc(p, cq);
    return wc && wc->status == wc_status::success;
  }

  int close() {
    auto e = next_event(p, ch);
    if (!e || e->type != cm_event_type::disconnected) return 20;
    p.destroy_qp(id);
    if (p.destroy_id(id) || p.dereg_mr(mr) || p.dereg_mr(bmr) || p.destroy_cq(cq) ||
        p.dealloc_pd(pd))
      return 21;
    p.destroy_event_channel(ch);
    return 0;
  }
};

/// Mode 0: write a pattern into the parent's region (from the accept's
/// private data), send "done" with an immediate, read the region back, send
/// "read back", wait for the parent's disconnect. Mode 1: say ready on `ready_fd`, then write
/// to the parent forever (until killed).
int child_active_side(std::uint16_t port, int mode, int ready_fd) {
  child_end c;
  if (const int failed = c.connect(port)) return failed;
  prov::send_wr wr;
  wr.opcode = wr_opcode::rdma_write;
  wr.local = {addr_of(c.mine.data()), 4096, c.p.mr_lkey(c.mr)};
  wr.remote_addr = c.theirs.addr;
  wr.rkey = c.theirs.rkey;
  if (mode == 1) {
    const char one = 1;
    (void)!::write(ready_fd, &one, 1);
    wr.signaled = false;
    for (;;) {
      (void)c.p.post_send(c.id, wr);
      std::array<prov::work_completion, 8> wcs{};
      (void)c.p.poll_cq(c.cq, wcs);
    }
  }
  if (!c.run(wr)) return 16;
  wr.opcode = wr_opcode::send_with_imm;
  wr.imm = 4096;
  wr.local.length = 4;
  if (!c.run(wr)) return 17;
  wr.opcode = wr_opcode::rdma_read;
  wr.local = {addr_of(c.back.data()), 4096, c.p.mr_lkey(c.bmr)};
  if (!c.run(wr)) return 18;
  if (c.back != c.mine) return 19;
  wr.opcode = wr_opcode::send;
  wr.local = {addr_of(c.mine.data()), 4, c.p.mr_lkey(c.mr)};
  if (!c.run(wr)) return 22;
  return c.close();
}

pid_t spawn_active_side(std::uint16_t port, int mode, int ready_fd) {
  std::string spec = "ARPMA_SOFT_DP_CHILD=" + std::to_string(port) + ":" + std::to_string(mode) +
                     ":" + std::to_string(ready_fd);
  return arpma::test::spawn_with("/proc/self/exe", std::move(spec), ready_fd);
}

// The re-executed test binary plays the child before gtest's main runs.
const bool child_ran = [] {
  const char* spec = std::getenv("ARPMA_SOFT_DP_CHILD");  // NOLINT(concurrency-mt-unsafe)
  if (spec == nullptr) return false;
  unsigned port = 0;
  int mode = 0;
  int ready_fd = -1;
  if (std::sscanf(spec, "%u:%d:%d", &port, &mode, &ready_fd) != 3) ::_exit(2);
  ::_exit(child_active_side(static_cast<std::uint16_t>(port), mode, ready_fd));
}();

class soft_datapath_processes : public soft_datapath_test {
 protected:
  /// Listens on an ephemeral port and spawns the child (mode, ready_fd).
  pid_t listen_and_spawn(int mode, int ready_fd) {
    listener_ = soft.create_id(b.ch, 1).value();
    const sockaddr_in any = loopback(0);
    EXPECT_FALSE(soft.bind_addr(listener_, sa(any)));
    EXPECT_FALSE(soft.listen(listener_, 4));
    return spawn_active_side(soft.local_port(listener_), mode, ready_fd);
  }
  void TearDown() override {
    if (listener_ != nullptr) {
      EXPECT_FALSE(soft.destroy_id(listener_));
    }
    soft_datapath_test::TearDown();
  }
  prov::cm_id* listener_ = nullptr;
};

TEST_F(soft_datapath_processes, write_send_and_read_across_two_processes) {
  guarded& target = guarded_memory(4096);
  std::array<char, 16> in{};
  make_objects(b);
  prov::mr* tmr = reg(b, target.data(), target.size());
  region_desc mine{addr_of(target.data()), soft.mr_rkey(tmr)};
  const pid_t pid = listen_and_spawn(0, -1);
  ASSERT_GT(pid, 0);
  auto req = next_event(soft, b.ch);
  ASSERT_TRUE(req && req->type == cm_event_type::connect_request) << "no request from the child";
  b.id = req->id;
  make_qp(b, {});
  prov::mr* imr = reg(b, in.data(), in.size());
  ASSERT_FALSE(recv(b, imr, in.data(), 8, 77));
  ASSERT_FALSE(recv(b, imr, in.data() + 8, 8, 78));
  prov::conn_param param;
  param.private_data = &mine;
  param.private_data_len = sizeof mine;
  ASSERT_FALSE(soft.accept(b.id, param));
  auto est = next_event(soft, b.ch);
  ASSERT_TRUE(est && est->type == cm_event_type::established);
  auto wc = next_wc(soft, b.rcq);
  ASSERT_TRUE(wc) << "no send from the child";
  EXPECT_EQ(wc->wr_id, 77u);
  EXPECT_TRUE(wc->with_imm);
  EXPECT_EQ(wc->imm_data, 4096u);
  for (std::size_t i = 0; i < 4096; ++i)
    ASSERT_EQ(target.data()[i], static_cast<std::uint8_t>(i ^ 0x5a)) << i;
  EXPECT_TRUE(target.guards_intact());
  auto read_back = next_wc(soft, b.rcq);  // the child's READ of the region is done
  ASSERT_TRUE(read_back) << "no second send from the child";
  EXPECT_EQ(read_back->wr_id, 78u);
  ASSERT_FALSE(soft.disconnect(b.id));
  EXPECT_EQ(wait_child(pid), 0) << "the child's exit status says where it stopped";
}

TEST_F(soft_datapath_processes, a_peer_killed_mid_transfer_flushes_and_disconnects) {
  guarded& target = guarded_memory(4096);
  make_objects(b);
  prov::mr* tmr = reg(b, target.data(), target.size());
  region_desc mine{addr_of(target.data()), soft.mr_rkey(tmr)};
  std::array<int, 2> ready{};
  ASSERT_EQ(::pipe2(ready.data(), O_CLOEXEC), 0);
  const pid_t pid = listen_and_spawn(1, ready[1]);
  ASSERT_GT(pid, 0);
  ::close(ready[1]);
  auto req = next_event(soft, b.ch);
  ASSERT_TRUE(req && req->type == cm_event_type::connect_request);
  region_desc theirs{};
  std::memcpy(&theirs, req->private_data.data(), sizeof theirs);
  b.id = req->id;
  make_qp(b, {});
  prov::conn_param param;
  param.private_data = &mine;
  param.private_data_len = sizeof mine;
  ASSERT_FALSE(soft.accept(b.id, param));
  auto est = next_event(soft, b.ch);
  ASSERT_TRUE(est && est->type == cm_event_type::established);
  pollfd child_ready{ready[0], POLLIN, 0};
  ASSERT_EQ(::poll(&child_ready, 1, 5000), 1) << "the child is writing";
  ::close(ready[0]);
  // Outstanding work of ours: sends the child never receives, reads of its region.
  std::vector<std::uint8_t> buf(4096);
  prov::mr* bmr = reg(b, buf.data(), buf.size());
  for (std::uint64_t i = 0; i < 4; ++i)
    ASSERT_FALSE(post(b, wr_opcode::send, bmr, buf.data(), 64, 0, 0, i));
  std::this_thread::sleep_for(50ms);

  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  const auto killed = std::chrono::steady_clock::now();
  auto e = next_event(soft, b.ch);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, cm_event_type::disconnected) << prov::to_string(e->type);
  for (std::uint64_t i = 0; i < 4; ++i)
    expect_wc(b.cq, i, wc_status::wr_flush_err, wc_opcode::send);
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 2s);
  EXPECT_TRUE(target.guards_intact());
  EXPECT_EQ(wait_child(pid), 128 + SIGKILL);
  (void)theirs;
}

}  // namespace

}  // namespace soft_datapath_test

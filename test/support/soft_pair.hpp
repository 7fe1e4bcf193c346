// Two ends of a soft provider connection over loopback, through the provider
// interface, with the helpers the soft provider's data-path tests share:
// posting, completions within a bound, MRs freed with the connection.
#pragma once

#include "provider/soft/soft_provider.hpp"
#include "support/provider_events.hpp"
#include "support/raw_peer.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

namespace arpma::test {

namespace prov = arpma::provider;
using raw::wait_limit;

inline constexpr int all_access = prov::access::local_write | prov::access::remote_write |
                                  prov::access::remote_read | prov::access::remote_atomic |
                                  prov::access::flush_global | prov::access::flush_persistent;

// ---- helpers -------------------------------------------------------------------

inline sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

inline const sockaddr* sa(const sockaddr_in& a) { return reinterpret_cast<const sockaddr*>(&a); }

inline std::optional<prov::cm_event> next_cm_event(prov::provider& p, prov::event_channel* channel,
                                                   std::chrono::milliseconds limit = wait_limit) {
  return next_event(p, channel, limit);
}

/// The next completion of `cq` within `limit`.
inline std::optional<prov::work_completion> next_wc(prov::provider& p, prov::cq* cq,
                                                    std::chrono::milliseconds limit = wait_limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    std::array<prov::work_completion, 1> wc{};
    auto got = p.poll_cq(cq, wc);
    if (!got) return std::nullopt;
    if (got.value() == 1) return wc[0];
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

inline bool cq_empty(prov::provider& p, prov::cq* cq) {
  std::array<prov::work_completion, 1> wc{};
  auto got = p.poll_cq(cq, wc);
  return got && got.value() == 0;
}

inline std::uint64_t addr_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

/// A buffer with guard bytes on both sides; only the middle is registered.
struct guarded {
  static constexpr std::size_t guard = 64;
  explicit guarded(std::size_t n, std::uint8_t fill = 0) : bytes(n + 2 * guard, 0x5a) {
    std::fill(bytes.begin() + guard, bytes.end() - guard, fill);
  }
  std::uint8_t* data() { return bytes.data() + guard; }
  std::size_t size() const { return bytes.size() - 2 * guard; }
  bool guards_intact() const {
    return std::all_of(bytes.begin(), bytes.begin() + guard, [](auto b) { return b == 0x5a; }) &&
           std::all_of(bytes.end() - guard, bytes.end(), [](auto b) { return b == 0x5a; });
  }
  std::vector<std::uint8_t> bytes;
};

/// One end of a connection: the id, its verbs objects and its MRs.
struct side {
  prov::event_channel* ch = nullptr;
  prov::cm_id* id = nullptr;
  prov::pd* pd = nullptr;
  prov::comp_channel* cc = nullptr;
  prov::cq* cq = nullptr;   ///< send CQ
  prov::cq* rcq = nullptr;  ///< receive CQ
  std::vector<prov::mr*> mrs;
};

struct qp_shape {
  std::uint32_t max_send_wr = 16;
  std::uint32_t max_recv_wr = 16;
  prov::srq* srq = nullptr;
};

// ---- fixture ---------------------------------------------------------------------

/// Two ends of a soft connection on loopback: `a` active, `b` passive.

class soft_pair : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = soft.find_device("127.0.0.1", false);
    ASSERT_TRUE(dev);
    dev_ = dev.value();
  }

  void TearDown() override {
    for (side* s : {&a, &b}) {
      if (s->id != nullptr) {
        soft.destroy_qp(s->id);
        EXPECT_FALSE(soft.destroy_id(s->id));
      }
      for (prov::mr* m : s->mrs) EXPECT_FALSE(soft.dereg_mr(m));
      if (s->cq != nullptr) {
        EXPECT_FALSE(soft.destroy_cq(s->cq));
      }
      if (s->rcq != nullptr) {
        EXPECT_FALSE(soft.destroy_cq(s->rcq));
      }
      if (s->cc != nullptr) {
        EXPECT_FALSE(soft.destroy_comp_channel(s->cc));
      }
    }
    if (srq_ != nullptr) {
      EXPECT_FALSE(soft.destroy_srq(srq_));
    }
    for (side* s : {&a, &b}) {
      if (s->pd != nullptr) {
        EXPECT_FALSE(soft.dealloc_pd(s->pd));
      }
      if (s->ch != nullptr) soft.destroy_event_channel(s->ch);
    }
  }

  void make_objects(side& s) {
    s.ch = soft.create_event_channel().value();
    s.pd = soft.alloc_pd(dev_).value();
    s.cc = soft.create_comp_channel(dev_).value();
    // Read as the core's loop reads them (tests that want them blocking say so).
    EXPECT_TRUE(set_nonblocking(soft.event_channel_fd(s.ch)));
    EXPECT_TRUE(set_nonblocking(soft.comp_channel_fd(s.cc)));
    s.cq = soft.create_cq(dev_, 64, s.cc).value();
    s.rcq = soft.create_cq(dev_, 64, s.cc).value();
  }

  void make_qp(side& s, const qp_shape& shape) {
    prov::qp_config config;
    config.send_cq = s.cq;
    config.recv_cq = s.rcq;
    config.max_send_wr = shape.max_send_wr;
    config.max_recv_wr = shape.max_recv_wr;
    config.shared_rq = shape.srq;
    ASSERT_FALSE(soft.create_qp(s.id, s.pd, config));
  }

  /// Connects `a` (active) to `b` (passive), each with a QP; objects made
  /// beforehand (b's PD for an SRQ) are kept.
  void connect(qp_shape shape_a = {}, qp_shape shape_b = {}) {
    if (a.pd == nullptr) make_objects(a);
    if (b.pd == nullptr) make_objects(b);
    prov::cm_id* listener = soft.create_id(b.ch, 1).value();
    const sockaddr_in any = loopback(0);
    ASSERT_FALSE(soft.bind_addr(listener, sa(any)));
    ASSERT_FALSE(soft.listen(listener, 4));
    const sockaddr_in to = loopback(soft.local_port(listener));
    a.id = soft.create_id(a.ch, 2).value();
    ASSERT_FALSE(soft.resolve_addr(a.id, sa(to), 1000));
    ASSERT_TRUE(next_cm_event(soft, a.ch));
    ASSERT_FALSE(soft.resolve_route(a.id, 1000));
    ASSERT_TRUE(next_cm_event(soft, a.ch));
    make_qp(a, shape_a);
    ASSERT_FALSE(soft.connect(a.id, {}));
    auto req = next_cm_event(soft, b.ch);
    ASSERT_TRUE(req && req->type == prov::cm_event_type::connect_request);
    b.id = req->id;
    make_qp(b, shape_b);
    ASSERT_FALSE(soft.accept(b.id, {}));
    auto ea = next_cm_event(soft, a.ch);
    ASSERT_TRUE(ea && ea->type == prov::cm_event_type::established);
    auto eb = next_cm_event(soft, b.ch);
    ASSERT_TRUE(eb && eb->type == prov::cm_event_type::established);
    ASSERT_FALSE(soft.destroy_id(listener));
  }

  /// A poll lease longer than any wait of a test: a parked progress thread
  /// stays parked until the lease is ended.
  void long_lease() {
    prov::soft_provider::limits l;
    l.poll_lease = std::chrono::seconds(60);
    soft.set_limits(l);
  }

  /// `n` bytes of `fill` owned by the fixture, for regions of large
  /// transfers: they outlive TearDown's deregistration, as RDMA asks of
  /// registered memory. A test's own vector dies first, and the progress
  /// thread may still be in the send() that carried a completed operation's
  /// payload: the kernel has copied it, but ASan checks the range after the
  /// call returns, and only deregistration waits for that (it takes the MR
  /// table's lock, which the sender holds).
  std::vector<std::uint8_t>& memory(std::size_t n, std::uint8_t fill = 0) {
    return memory_.emplace_back(n, fill);
  }
  /// The same, with guard bytes around it.
  guarded& guarded_memory(std::size_t n, std::uint8_t fill = 0) {
    return guarded_.emplace_back(n, fill);
  }

  prov::mr* reg(side& s, void* p, std::size_t n, int access = all_access) {
    auto m = soft.reg_mr(s.pd, p, n, access);
    EXPECT_TRUE(m) << m.error().message();
    s.mrs.push_back(m.value());
    return m.value();
  }

  std::error_code post(side& s, prov::wr_opcode op, prov::mr* local, const void* p,
                       std::uint32_t len, std::uint64_t remote = 0, std::uint32_t rkey = 0,
                       std::uint64_t wr_id = 1, bool signaled = true) {
    prov::send_wr wr;
    wr.wr_id = wr_id;
    wr.opcode = op;
    wr.signaled = signaled;
    wr.local = {addr_of(p), len, local != nullptr ? soft.mr_lkey(local) : 0};
    wr.remote_addr = remote;
    wr.rkey = rkey;
    wr.imm = 0xc0ffee;
    return soft.post_send(s.id, wr);
  }

  std::error_code recv(side& s, prov::mr* m, void* p, std::uint32_t len, std::uint64_t wr_id = 7) {
    prov::recv_wr wr;
    wr.wr_id = wr_id;
    wr.local = {addr_of(p), len, m != nullptr ? soft.mr_lkey(m) : 0};
    return soft.post_recv(s.id, wr);
  }

  /// The next completion of `cq` must be (wr_id, status, opcode).
  void expect_wc(prov::cq* cq, std::uint64_t wr_id, prov::wc_status status,
                 prov::wc_opcode opcode) {
    auto wc = next_wc(soft, cq);
    ASSERT_TRUE(wc) << "no completion for wr " << wr_id;
    EXPECT_EQ(wc->wr_id, wr_id);
    EXPECT_EQ(wc->status, status) << static_cast<int>(wc->status);
    if (status == prov::wc_status::success) {
      EXPECT_EQ(wc->opcode, opcode);
    }
  }

  prov::soft_provider soft;
  side a;
  side b;
  prov::srq* srq_ = nullptr;

 private:
  prov::device* dev_ = nullptr;
  std::deque<std::vector<std::uint8_t>> memory_;  // deques: references stay valid
  std::deque<guarded> guarded_;
};

}  // namespace arpma::test

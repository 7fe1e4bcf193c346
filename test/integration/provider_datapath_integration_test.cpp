// The data path of the provider the environment chooses, through the provider
// interface: the soft provider on loopback here, rdma-core's verbs provider
// in the Soft-RoCE guest (ARPMA_PROVIDER=verbs ARPMA_TEST_ADDR=$RXE_VM_IP),
// where it checks the ibv_* wrappers against real rdma-core. Same test, same
// expectations: that is the point of the soft provider.
#include "provider/provider.hpp"
#include "support/provider_events.hpp"
#include "support/test_addr.hpp"
#include "support/transport.hpp"
#include "support/wait.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace provider_datapath_integration_test {

using arpma::test::test_addr;
namespace {

namespace prov = arpma::provider;
using namespace std::chrono_literals;

std::optional<prov::cm_event> next_event(prov::provider& p, prov::event_channel* ch) {
  return arpma::test::next_event(p, ch, 5s);
}

std::optional<prov::work_completion> next_wc(prov::provider& p, prov::cq* cq) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < deadline) {
    std::array<prov::work_completion, 1> wc{};
    auto got = p.poll_cq(cq, wc);
    if (!got) return std::nullopt;
    if (got.value() == 1) return wc[0];
    std::this_thread::sleep_for(100us);
  }
  return std::nullopt;
}

std::uint64_t addr_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

struct end {
  prov::event_channel* ch = nullptr;
  prov::cm_id* id = nullptr;
  prov::pd* pd = nullptr;
  prov::cq* cq = nullptr;
  prov::mr* mr = nullptr;
  std::vector<std::uint8_t> buf = std::vector<std::uint8_t>(8192, 0);
};

class provider_datapath_integration : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = p.find_device(addr.c_str(), false);
    ASSERT_TRUE(dev) << addr << ": " << dev.error().message();
    dev_ = dev.value();
  }

  void TearDown() override {
    for (end* e : {&a, &b}) {
      if (e->id != nullptr) {
        p.destroy_qp(e->id);
        EXPECT_FALSE(p.destroy_id(e->id));
      }
      if (e->mr != nullptr) {
        EXPECT_FALSE(p.dereg_mr(e->mr));
      }
      if (e->cq != nullptr) {
        EXPECT_FALSE(p.destroy_cq(e->cq));
      }
      if (e->pd != nullptr) {
        EXPECT_FALSE(p.dealloc_pd(e->pd));
      }
      if (e->ch != nullptr) p.destroy_event_channel(e->ch);
    }
  }

  void objects(end& e) {
    e.pd = p.alloc_pd(dev_).value();
    e.cq = p.create_cq(dev_, 16, nullptr).value();
    auto mr = p.reg_mr(
        e.pd, e.buf.data(), e.buf.size(),
        prov::access::local_write | prov::access::remote_write | prov::access::remote_read);
    ASSERT_TRUE(mr) << mr.error().message();
    e.mr = mr.value();
  }

  void make_qp(end& e) {
    prov::qp_config config;
    config.send_cq = config.recv_cq = e.cq;
    ASSERT_FALSE(p.create_qp(e.id, e.pd, config));
  }

  /// The test address (IPv4 or IPv6) with `port`.
  sockaddr_storage address(std::uint16_t port) const {
    sockaddr_storage out{};
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&out);
    if (inet_pton(AF_INET6, addr.c_str(), &in6->sin6_addr) == 1) {
      in6->sin6_family = AF_INET6;
      in6->sin6_port = htons(port);
      return out;
    }
    auto* in = reinterpret_cast<sockaddr_in*>(&out);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    EXPECT_EQ(inet_pton(AF_INET, addr.c_str(), &in->sin_addr), 1) << addr;
    return out;
  }

  /// a (active) connected to b (passive), each with a QP; b has one receive posted.
  void connect() {
    for (end* e : {&a, &b}) {
      e->ch = p.create_event_channel().value();
      objects(*e);
    }
    prov::cm_id* listener = p.create_id(b.ch, 1).value();
    const sockaddr_storage any = address(0);
    ASSERT_FALSE(p.bind_addr(listener, reinterpret_cast<const sockaddr*>(&any)));
    ASSERT_FALSE(p.listen(listener, 4));
    const sockaddr_storage to = address(p.local_port(listener));
    a.id = p.create_id(a.ch, 2).value();
    ASSERT_FALSE(p.resolve_addr(a.id, reinterpret_cast<const sockaddr*>(&to), 1000));
    ASSERT_TRUE(next_event(p, a.ch));
    ASSERT_FALSE(p.resolve_route(a.id, 1000));
    ASSERT_TRUE(next_event(p, a.ch));
    make_qp(a);
    ASSERT_FALSE(p.connect(a.id, {}));
    auto req = next_event(p, b.ch);
    ASSERT_TRUE(req && req->type == prov::cm_event_type::connect_request);
    b.id = req->id;
    make_qp(b);
    prov::recv_wr r;
    r.wr_id = 50;
    r.local = {addr_of(b.buf.data()), 64, p.mr_lkey(b.mr)};
    ASSERT_FALSE(p.post_recv(b.id, r));
    ASSERT_FALSE(p.accept(b.id, {}));
    auto ea = next_event(p, a.ch);
    ASSERT_TRUE(ea && ea->type == prov::cm_event_type::established);
    auto eb = next_event(p, b.ch);
    ASSERT_TRUE(eb && eb->type == prov::cm_event_type::established);
    ASSERT_FALSE(p.destroy_id(listener));
  }

  prov::send_wr wr_to_b(prov::wr_opcode op, std::size_t local_off, std::size_t remote_off,
                        std::uint32_t len, std::uint64_t wr_id) {
    prov::send_wr wr;
    wr.wr_id = wr_id;
    wr.opcode = op;
    wr.local = {addr_of(a.buf.data() + local_off), len, p.mr_lkey(a.mr)};
    wr.remote_addr = addr_of(b.buf.data() + remote_off);
    wr.rkey = p.mr_rkey(b.mr);
    wr.imm = 0x1234;
    return wr;
  }

  void expect_success(prov::cq* cq, std::uint64_t wr_id, prov::wc_opcode opcode) {
    auto wc = next_wc(p, cq);
    ASSERT_TRUE(wc) << "no completion for " << wr_id;
    EXPECT_EQ(wc->wr_id, wr_id);
    EXPECT_EQ(wc->status, prov::wc_status::success) << static_cast<int>(wc->status);
    EXPECT_EQ(wc->opcode, opcode);
  }

  /// Whether `len` bytes at `at` become `expected` within 10 s. A write's completion says the
  /// data left; on iWARP not that it landed (RDMAP does not acknowledge a write): with 2 ms of
  /// netem delay on the guest's loopback, siw's writes completed before their bytes were here.
  static bool landed(const std::uint8_t* at, const void* expected, std::size_t len) {
    return arpma::test::eventually([&] { return std::memcmp(at, expected, len) == 0; });
  }

  prov::provider& p = prov::default_provider();
  std::string addr = test_addr();
  end a;
  end b;

 private:
  prov::device* dev_ = nullptr;
};

TEST_F(provider_datapath_integration, send_write_and_read) {
  connect();
  for (std::size_t i = 0; i < 4096; ++i) a.buf[i] = static_cast<std::uint8_t>(i * 3);

  const bool imm = p.caps(p.id_device(a.id)).immediate_data;
  EXPECT_EQ(imm, !arpma::test::iwarp()) << "the provider sees what the device is";
  if (imm) {
    ASSERT_FALSE(p.post_send(a.id, wr_to_b(prov::wr_opcode::send_with_imm, 0, 0, 16, 1)));
  } else {
    // iWARP: the device refuses the opcode at the post, nothing goes out.
    EXPECT_EQ(p.post_send(a.id, wr_to_b(prov::wr_opcode::send_with_imm, 0, 0, 16, 1)),
              std::errc::invalid_argument);
    ASSERT_FALSE(p.post_send(a.id, wr_to_b(prov::wr_opcode::send, 0, 0, 16, 1)));
  }
  expect_success(a.cq, 1, prov::wc_opcode::send);
  auto r = next_wc(p, b.cq);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->wr_id, 50u);
  EXPECT_EQ(r->opcode, prov::wc_opcode::recv);
  EXPECT_EQ(r->byte_len, 16u);
  EXPECT_EQ(r->with_imm, imm);
  if (imm) {
    EXPECT_EQ(r->imm_data, 0x1234u);
  }
  EXPECT_EQ(std::memcmp(b.buf.data(), a.buf.data(), 16), 0);

  ASSERT_FALSE(p.post_send(a.id, wr_to_b(prov::wr_opcode::rdma_write, 0, 4096, 4096, 2)));
  expect_success(a.cq, 2, prov::wc_opcode::rdma_write);
  EXPECT_TRUE(landed(b.buf.data() + 4096, a.buf.data(), 4096));

  ASSERT_FALSE(p.post_send(a.id, wr_to_b(prov::wr_opcode::rdma_read, 4096, 4096, 4096, 3)));
  expect_success(a.cq, 3, prov::wc_opcode::rdma_read);
  EXPECT_EQ(std::memcmp(a.buf.data() + 4096, a.buf.data(), 4096), 0);
}

// Native on the soft device; on rdma-core only where the device and kernel
// have it (EOPNOTSUPP otherwise, never a crash or a silent no-op).
// Native where the device has it; elsewhere librpma's fallback, an inline
// 8-byte RDMA write, which completes as a write.
TEST_F(provider_datapath_integration, atomic_write_native_or_inline) {
  connect();
  auto wr = wr_to_b(prov::wr_opcode::atomic_write, 0, 64, 0, 4);
  wr.atomic_value = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::error_code ec = p.post_send(a.id, wr);
  ASSERT_FALSE(ec) << ec.message();
  const bool native = p.caps(p.id_device(a.id)).native_atomic_write;
  expect_success(a.cq, 4, native ? prov::wc_opcode::atomic_write : prov::wc_opcode::rdma_write);
  EXPECT_TRUE(landed(b.buf.data() + 64, wr.atomic_value.data(), 8));
}

TEST_F(provider_datapath_integration, a_forged_rkey_is_a_remote_access_error) {
  connect();
  // An iWARP write completes once sent (RDMAP does not acknowledge it); a read, which
  // the responder must answer, meets the forged key there.
  const bool iwarp = arpma::test::iwarp();
  auto wr = wr_to_b(iwarp ? prov::wr_opcode::rdma_read : prov::wr_opcode::rdma_write, 0, 0, 64, 9);
  wr.rkey ^= 0x00ff00ffu;
  ASSERT_FALSE(p.post_send(a.id, wr));
  auto wc = next_wc(p, a.cq);
  ASSERT_TRUE(wc);
  // siw's responder terminates the connection; the read is flushed.
  EXPECT_EQ(wc->status, iwarp ? prov::wc_status::wr_flush_err : prov::wc_status::rem_access_err)
      << static_cast<int>(wc->status);
  EXPECT_EQ(b.buf[0], 0) << "nothing placed";
}

}  // namespace

}  // namespace provider_datapath_integration_test

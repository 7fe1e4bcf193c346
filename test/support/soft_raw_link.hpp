// A soft provider's passive end whose peer is the test itself, speaking the
// wire protocol by hand (docs/soft-provider.md): for what only a hostile or
// a deliberately slow peer can do to a link.
#pragma once

#include "support/provider_events.hpp"
#include "support/raw_peer.hpp"
#include "support/soft_pair.hpp"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace arpma::test {

/// b listens; handshake() connects a raw socket (fd_) to it and accepts.
class soft_raw_link : public soft_pair {
 protected:
  void SetUp() override {
    soft_pair::SetUp();
    make_objects(b);
    soft.set_limits(link_limits());  // before the listener: its links take its limits
    listener_ = soft.create_id(b.ch, 1).value();
    const sockaddr_in any = loopback(0);
    ASSERT_FALSE(soft.bind_addr(listener_, sa(any)));
    ASSERT_FALSE(soft.listen(listener_, 4));
    tmr_ = reg(b, target_.data(), target_.size());
    rkey_ = soft.mr_rkey(tmr_);
  }
  void TearDown() override {
    if (fd_ >= 0) ::close(fd_);
    EXPECT_FALSE(soft.destroy_id(listener_));
    soft_pair::TearDown();
  }

  /// The provider's limits for the links the test makes (the defaults).
  virtual prov::soft_provider::limits link_limits() { return {}; }

  /// REQ, REP, RTU by hand; the passive id becomes b.id.
  void handshake() {
    fd_ = raw::raw_connect(soft.local_port(listener_));
    ASSERT_GE(fd_, 0);
    ASSERT_TRUE(raw::write_all(fd_, raw::wire_frame(1, {0xff, 0xff, 7, 7, 0, 0, 0, 1})));
    auto req = next_event(soft, b.ch, raw::wait_limit);
    ASSERT_TRUE(req && req->type == provider::cm_event_type::connect_request);
    b.id = req->id;
    make_qp(b, {});
    ASSERT_FALSE(soft.accept(b.id, {}));
    ASSERT_EQ(raw::read_exact(fd_, 12 + 8).size(), 20u);
    ASSERT_TRUE(raw::write_all(fd_, raw::wire_frame(4, {})));
    auto est = next_event(soft, b.ch, raw::wait_limit);
    ASSERT_TRUE(est && est->type == provider::cm_event_type::established);
  }

  void expect_disconnected() {
    auto e = next_event(soft, b.ch, raw::wait_limit);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->type, provider::cm_event_type::disconnected) << prov::to_string(e->type);
  }

  std::uint64_t base() { return addr_of(target_.data()); }

  /// Bytes [p, p + n) as they are now, read by the kernel: the provider may
  /// be placing into them meanwhile (as a NIC's DMA), unordered with this thread.
  static std::vector<std::uint8_t> bytes_now(const std::uint8_t* p, std::size_t n) {
    std::vector<std::uint8_t> out(n);
    const iovec local{out.data(), out.size()};
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): process_vm_readv only reads it
    const iovec remote{const_cast<std::uint8_t*>(p), n};
    EXPECT_EQ(::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0), static_cast<ssize_t>(n));
    return out;
  }
  /// How many of the first `n` bytes at `p` hold a payload of 0xcc by now.
  static std::size_t placed_at(const std::uint8_t* p, std::size_t n) {
    const auto now = bytes_now(p, n);
    return static_cast<std::size_t>(
        std::find_if(now.begin(), now.end(), [](auto v) { return v != 0xcc; }) - now.begin());
  }
  /// Nothing (no ACK, no NAK) has come back on the raw link.
  [[nodiscard]] bool nothing_to_read() const {
    pollfd ready{fd_, POLLIN, 0};
    return ::poll(&ready, 1, 0) == 0;
  }

  guarded target_{256, 0x11};
  prov::mr* tmr_ = nullptr;
  std::uint32_t rkey_ = 0;
  int fd_ = -1;

 private:
  prov::cm_id* listener_ = nullptr;
};

}  // namespace arpma::test

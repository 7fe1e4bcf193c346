// The soft provider's connection manager, driven directly through the provider
// interface over loopback: listen, connect, accept, reject, disconnect,
// migration, hostile peers, and two processes. Every wait is bounded.
#include "provider/soft/soft_provider.hpp"

#include "support/peer_process.hpp"
#include "support/provider_events.hpp"
#include "support/raw_peer.hpp"
#include "support/wait.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
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
#include <future>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace soft_cm_test {

namespace {

namespace prov = arpma::provider;
using namespace std::chrono_literals;
using arpma::test::eventually;
using arpma::test::raw::closed_by_peer;
using arpma::test::raw::read_exact;
using arpma::test::raw::wait_limit;
using arpma::test::raw::write_all;
using prov::cm_event_type;

// ---- helpers -------------------------------------------------------------------

sockaddr_storage address(const char* ip, std::uint16_t port) {
  sockaddr_storage out{};
  if (std::string_view(ip).find(':') != std::string_view::npos) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&out);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    (void)inet_pton(AF_INET6, ip, &a->sin6_addr);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&out);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    (void)inet_pton(AF_INET, ip, &a->sin_addr);
  }
  return out;
}

const sockaddr* sa(const sockaddr_storage& s) { return reinterpret_cast<const sockaddr*>(&s); }

/// The next event of `channel`, waiting at most `limit` (poll on its fd).
std::optional<prov::cm_event> next_event(prov::provider& p, prov::event_channel* channel,
                                         std::chrono::milliseconds limit = wait_limit) {
  return arpma::test::next_event(p, channel, limit);
}

/// Whether `channel`'s fd becomes readable within `limit`, consuming nothing.
bool readable(prov::provider& p, prov::event_channel* channel, std::chrono::milliseconds limit) {
  pollfd ready{p.event_channel_fd(channel), POLLIN, 0};
  return ::poll(&ready, 1, static_cast<int>(limit.count())) == 1;
}

std::string pdata(const prov::cm_event& e) {
  return {reinterpret_cast<const char*>(e.private_data.data()), e.private_data_len};
}

prov::conn_param param_with(std::string_view data) {
  prov::conn_param param;
  param.private_data = data.data();
  param.private_data_len = static_cast<std::uint8_t>(data.size());
  return param;
}

/// A port nobody listens on (bound, then released).
std::uint16_t closed_port(const char* ip) {
  const sockaddr_storage any = address(ip, 0);
  const int fd = ::socket(any.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  socklen_t len = any.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  (void)::bind(fd, sa(any), len);
  sockaddr_storage bound{};
  len = sizeof bound;
  (void)::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  ::close(fd);
  return ntohs(any.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                         : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

/// A raw TCP client for hostile-peer tests.
int raw_connect(const char* ip, std::uint16_t port) {
  const sockaddr_storage to = address(ip, port);
  const int fd = ::socket(to.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const socklen_t len = to.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (::connect(fd, sa(to), len) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// A frame as docs/soft-provider.md specifies it, built independently of the
/// provider so the test pins the wire format.
std::vector<std::uint8_t> wire_frame(std::uint8_t type, const std::vector<std::uint8_t>& payload,
                                     std::uint32_t magic = 0x4152504d, std::uint8_t version = 1) {
  std::vector<std::uint8_t> out = {static_cast<std::uint8_t>(magic >> 24),
                                   static_cast<std::uint8_t>(magic >> 16),
                                   static_cast<std::uint8_t>(magic >> 8),
                                   static_cast<std::uint8_t>(magic),
                                   version,
                                   type,
                                   0,
                                   0};
  const auto len = static_cast<std::uint32_t>(payload.size());
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<std::uint8_t>(len >> shift));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

std::vector<std::uint8_t> req_payload(std::string_view data) {
  // Sized up front: GCC 12 at -O2 misreports insert() after an initializer
  // list as out of bounds (-Warray-bounds).
  std::vector<std::uint8_t> p(8 + data.size(), 0);
  p[0] = p[1] = 0xff;
  p[2] = p[3] = 7;
  std::copy(data.begin(), data.end(), p.begin() + 8);
  return p;
}

// ---- fixture ---------------------------------------------------------------------

class soft_cm_test : public ::testing::Test {
 protected:
  void TearDown() override {
    for (prov::cm_id* id : ids_) EXPECT_FALSE(soft.destroy_id(id)) << "destroy_id";
    for (prov::event_channel* ch : channels_) soft.destroy_event_channel(ch);
  }

  prov::event_channel* channel() {
    auto ch = soft.create_event_channel();
    EXPECT_TRUE(ch);
    channels_.push_back(ch.value());
    return ch.value();
  }

  /// Tracks an id so TearDown destroys it; `forget` when a test destroys it.
  prov::cm_id* track(prov::cm_id* id) {
    ids_.push_back(id);
    return id;
  }
  void forget(prov::cm_id* id) { std::erase(ids_, id); }
  void destroy(prov::cm_id* id) {
    forget(id);
    EXPECT_FALSE(soft.destroy_id(id));
  }

  prov::cm_id* new_id(prov::event_channel* ch, std::uint64_t context) {
    auto id = soft.create_id(ch, context);
    EXPECT_TRUE(id);
    return track(id.value());
  }

  /// A listening id on `ip`, port 0; its port in `port`.
  prov::cm_id* listener(prov::event_channel* ch, const char* ip, std::uint16_t& port,
                        std::uint64_t context = 1000) {
    prov::cm_id* id = new_id(ch, context);
    const sockaddr_storage local = address(ip, 0);
    EXPECT_FALSE(soft.bind_addr(id, sa(local)));
    EXPECT_FALSE(soft.listen(id, 16));
    port = soft.local_port(id);
    EXPECT_NE(port, 0);
    return id;
  }

  /// An active id with its route resolved to ip:port.
  prov::cm_id* resolved(prov::event_channel* ch, const char* ip, std::uint16_t port,
                        std::uint64_t context = 2000) {
    prov::cm_id* id = new_id(ch, context);
    const sockaddr_storage remote = address(ip, port);
    EXPECT_FALSE(soft.resolve_addr(id, sa(remote), 1000));
    auto e = next_event(soft, ch);
    EXPECT_TRUE(e && e->type == cm_event_type::addr_resolved);
    EXPECT_FALSE(soft.resolve_route(id, 1000));
    e = next_event(soft, ch);
    EXPECT_TRUE(e && e->type == cm_event_type::route_resolved);
    return id;
  }

  /// Connects `active` and returns the passive id of the CONNECT_REQUEST.
  prov::cm_id* request(prov::cm_id* active, prov::event_channel* listen_ch,
                       std::string_view data = {}) {
    EXPECT_FALSE(soft.connect(active, param_with(data)));
    auto e = next_event(soft, listen_ch);
    EXPECT_TRUE(e) << "no CONNECT_REQUEST";
    if (!e) return nullptr;
    EXPECT_EQ(e->type, cm_event_type::connect_request);
    EXPECT_EQ(pdata(*e), data);
    return track(e->id);
  }

  struct pair {
    prov::cm_id* active;
    prov::cm_id* passive;
  };

  /// A request waiting at a listener on loopback: CONNECT_REQUEST consumed.
  struct pending {
    prov::event_channel* listen_ch;
    prov::event_channel* active_ch;
    prov::cm_id* active;
    prov::cm_id* passive;
  };
  pending pending_request() {
    pending out{channel(), channel(), nullptr, nullptr};
    std::uint16_t port = 0;
    listener(out.listen_ch, "127.0.0.1", port);
    out.active = resolved(out.active_ch, "127.0.0.1", port);
    out.passive = request(out.active, out.listen_ch);
    return out;
  }

  /// A connection over `ip`: ESTABLISHED consumed on both sides.
  pair establish(const char* ip, prov::event_channel* active_ch, prov::event_channel* passive_ch) {
    std::uint16_t port = 0;
    prov::cm_id* lid = listener(passive_ch, ip, port);
    prov::cm_id* active = resolved(active_ch, ip, port);
    prov::cm_id* passive = request(active, passive_ch, "hi");
    EXPECT_FALSE(soft.accept(passive, param_with("ok")));
    auto a = next_event(soft, active_ch);
    EXPECT_TRUE(a && a->type == cm_event_type::established);
    auto p = next_event(soft, passive_ch);
    EXPECT_TRUE(p && p->type == cm_event_type::established);
    destroy(lid);
    return {active, passive};
  }

  void expect_closed_pair(prov::event_channel* ch, prov::cm_id* id, const char* side) {
    auto e = next_event(soft, ch);
    ASSERT_TRUE(e) << side;
    EXPECT_EQ(e->type, cm_event_type::disconnected) << side << ": " << prov::to_string(e->type);
    EXPECT_EQ(e->id, id) << side;
    e = next_event(soft, ch);
    ASSERT_TRUE(e) << side;
    EXPECT_EQ(e->type, cm_event_type::timewait_exit) << side << ": " << prov::to_string(e->type);
    EXPECT_EQ(e->id, id) << side;
  }

  prov::soft_provider soft;

 private:
  std::vector<prov::cm_id*> ids_;
  std::vector<prov::event_channel*> channels_;
};

class soft_cm_family : public soft_cm_test, public ::testing::WithParamInterface<const char*> {};

INSTANTIATE_TEST_SUITE_P(loopback, soft_cm_family, ::testing::Values("127.0.0.1", "::1"),
                         [](const auto& param_info) {
                           return std::string(param_info.param) == "::1" ? "ipv6" : "ipv4";
                         });

// ---- passive side ----------------------------------------------------------------

TEST_P(soft_cm_family, listen_on_an_ephemeral_port) {
  prov::event_channel* ch = channel();
  std::uint16_t port = 0;
  prov::cm_id* id = listener(ch, GetParam(), port);
  EXPECT_NE(soft.id_device(id), nullptr) << "bound to a local address";
  EXPECT_EQ(soft.listen(id, 1), std::errc::invalid_argument) << "already listening";
  const sockaddr_storage again = address(GetParam(), port);
  EXPECT_EQ(soft.bind_addr(id, sa(again)), std::errc::invalid_argument) << "already bound";

  prov::cm_id* other = new_id(ch, 1);
  EXPECT_EQ(soft.bind_addr(other, sa(again)), std::errc::address_in_use);
  EXPECT_EQ(soft.local_port(other), 0);
  EXPECT_FALSE(readable(soft, ch, 0ms));
}

TEST_F(soft_cm_test, a_wildcard_bind_has_no_device_until_a_request_arrives) {
  prov::event_channel* ch = channel();
  prov::cm_id* id = new_id(ch, 1);
  const sockaddr_storage any = address("0.0.0.0", 0);
  ASSERT_FALSE(soft.bind_addr(id, sa(any)));
  EXPECT_EQ(soft.id_device(id), nullptr);
  ASSERT_FALSE(soft.listen(id, 0));
  const std::uint16_t port = soft.local_port(id);
  prov::cm_id* active = resolved(ch, "127.0.0.1", port);
  prov::cm_id* passive = request(active, ch);
  ASSERT_NE(passive, nullptr);
  EXPECT_NE(soft.id_device(passive), nullptr);
}

TEST_F(soft_cm_test, listen_without_bind_binds_the_wildcard_address) {
  prov::event_channel* ch = channel();
  prov::cm_id* id = new_id(ch, 1);
  ASSERT_FALSE(soft.listen(id, 4));
  EXPECT_NE(soft.local_port(id), 0);
}

TEST_F(soft_cm_test, lifecycle_calls_in_the_wrong_state_are_einval) {
  prov::event_channel* ch = channel();
  prov::cm_id* id = new_id(ch, 1);
  EXPECT_EQ(soft.connect(id, {}), std::errc::invalid_argument) << "no route";
  EXPECT_EQ(soft.accept(id, {}), std::errc::invalid_argument) << "no request";
  EXPECT_EQ(soft.reject(id, nullptr, 0), std::errc::invalid_argument) << "no request";
  EXPECT_EQ(soft.disconnect(id), std::errc::invalid_argument) << "not connected";
  EXPECT_EQ(soft.bind_addr(id, nullptr), std::errc::invalid_argument);
  EXPECT_EQ(soft.migrate_id(id, nullptr), std::errc::invalid_argument);
  const sockaddr_storage remote = address("127.0.0.1", 9);
  ASSERT_FALSE(soft.resolve_addr(id, sa(remote), 100));
  EXPECT_EQ(soft.connect(id, {}), std::errc::invalid_argument) << "address but no route";
  EXPECT_EQ(soft.bind_addr(id, sa(remote)), std::errc::invalid_argument) << "resolved";
}

// ---- connect, accept, reject -----------------------------------------------------

TEST_P(soft_cm_family, accept_establishes_both_sides_with_private_data) {
  prov::event_channel* lch = channel();
  prov::event_channel* ach = channel();
  std::uint16_t port = 0;
  prov::cm_id* lid = listener(lch, GetParam(), port, 4242);
  prov::cm_id* active = resolved(ach, GetParam(), port, 17);

  ASSERT_FALSE(soft.connect(active, param_with("hello from the client")));
  auto req = next_event(soft, lch);
  ASSERT_TRUE(req);
  ASSERT_EQ(req->type, cm_event_type::connect_request);
  prov::cm_id* passive = track(req->id);
  EXPECT_NE(passive, lid) << "a new id";
  EXPECT_EQ(req->context, 4242u) << "the listener's context";
  EXPECT_EQ(req->status, 0);
  EXPECT_EQ(pdata(*req), "hello from the client");
  EXPECT_EQ(soft.local_port(passive), port);

  // The passive id is bound to the soft device: a QP can be created on it.
  ASSERT_NE(soft.id_device(passive), nullptr);
  auto pd = soft.alloc_pd(soft.id_device(passive));
  ASSERT_TRUE(pd);
  auto cq = soft.create_cq(soft.id_device(passive), 10, nullptr);
  ASSERT_TRUE(cq);
  prov::qp_config config;
  config.send_cq = cq.value();
  config.recv_cq = cq.value();
  ASSERT_FALSE(soft.create_qp(passive, pd.value(), config));
  EXPECT_NE(soft.qp_num(passive), 0u);
  soft.set_context(passive, 99);

  EXPECT_FALSE(readable(soft, ach, 50ms)) << "nothing before the answer";
  ASSERT_FALSE(soft.accept(passive, param_with("welcome")));
  auto est = next_event(soft, ach);
  ASSERT_TRUE(est);
  EXPECT_EQ(est->type, cm_event_type::established);
  EXPECT_EQ(est->id, active);
  EXPECT_EQ(est->context, 17u);
  EXPECT_EQ(pdata(*est), "welcome");
  EXPECT_NE(soft.local_port(active), 0);

  auto pest = next_event(soft, lch);
  ASSERT_TRUE(pest);
  EXPECT_EQ(pest->type, cm_event_type::established);
  EXPECT_EQ(pest->id, passive);
  EXPECT_EQ(pest->context, 99u) << "set_context applies to later events";
  EXPECT_EQ(pest->private_data_len, 0);
  EXPECT_EQ(soft.accept(passive, {}), std::errc::invalid_argument) << "answered already";

  EXPECT_EQ(soft.destroy_id(passive), std::errc::device_or_resource_busy) << "QP first";
  soft.destroy_qp(passive);
  EXPECT_FALSE(soft.destroy_cq(cq.value()));
  EXPECT_FALSE(soft.dealloc_pd(pd.value()));
}

// The listener is tuned once and the kernel copies its options into every socket it accepts
// (no setsockopt per accepted link): both ends of a link must still have them.
TEST_P(soft_cm_family, both_ends_of_a_link_have_nodelay_and_keepalive) {
  prov::event_channel* lch = channel();
  prov::event_channel* ach = channel();
  std::uint16_t port = 0;
  listener(lch, GetParam(), port);
  prov::cm_id* active = resolved(ach, GetParam(), port);
  prov::cm_id* passive = request(active, lch);
  ASSERT_NE(passive, nullptr);
  ASSERT_FALSE(soft.accept(passive, {}));
  auto est = next_event(soft, ach);
  ASSERT_TRUE(est && est->type == cm_event_type::established);

  auto port_of = [](const sockaddr_storage& a) {
    return ntohs(a.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6&>(a).sin6_port
                                         : reinterpret_cast<const sockaddr_in&>(a).sin_port);
  };
  auto option = [](int fd, int level, int name) {
    int value = -1;
    socklen_t len = sizeof value;
    return ::getsockopt(fd, level, name, &value, &len) == 0 ? value : -1;
  };
  int ends = 0;
  for (int fd = 0; fd < 4096; ++fd) {
    sockaddr_storage local{};
    sockaddr_storage remote{};
    socklen_t llen = sizeof local;
    socklen_t rlen = sizeof remote;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &llen) != 0) continue;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &rlen) != 0) continue;
    if (port_of(local) != port && port_of(remote) != port) continue;
    ++ends;
    SCOPED_TRACE(port_of(local) == port ? "accepted end" : "connecting end");
    EXPECT_EQ(option(fd, IPPROTO_TCP, TCP_NODELAY), 1);
    EXPECT_EQ(option(fd, SOL_SOCKET, SO_KEEPALIVE), 1);
    EXPECT_EQ(option(fd, IPPROTO_TCP, TCP_KEEPIDLE), 5);
    EXPECT_EQ(option(fd, IPPROTO_TCP, TCP_KEEPINTVL), 1);
    EXPECT_EQ(option(fd, IPPROTO_TCP, TCP_KEEPCNT), 5);
  }
  EXPECT_EQ(ends, 2) << "both ends of the link, in this process";
}

TEST_P(soft_cm_family, reject_gives_rejected_with_the_consumer_reason_and_private_data) {
  prov::event_channel* lch = channel();
  prov::event_channel* ach = channel();
  std::uint16_t port = 0;
  listener(lch, GetParam(), port);
  prov::cm_id* active = resolved(ach, GetParam(), port);
  prov::cm_id* passive = request(active, lch, "may I?");
  ASSERT_NE(passive, nullptr);
  const std::string_view no = "no, busy";
  ASSERT_FALSE(soft.reject(passive, no.data(), static_cast<std::uint8_t>(no.size())));
  auto e = next_event(soft, ach);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, cm_event_type::rejected) << prov::to_string(e->type);
  EXPECT_EQ(e->id, active);
  EXPECT_EQ(e->status, 28) << "IB_CM_REJ_CONSUMER_DEFINED";
  EXPECT_EQ(pdata(*e), no);
  EXPECT_EQ(soft.reject(passive, nullptr, 0), std::errc::invalid_argument) << "answered already";
  EXPECT_EQ(soft.accept(passive, {}), std::errc::invalid_argument);
  EXPECT_FALSE(readable(soft, lch, 100ms)) << "no event on the passive side";
}

TEST_P(soft_cm_family, connect_to_a_closed_port_is_rejected_as_rdma_cm_rejects_it) {
  prov::event_channel* ch = channel();
  prov::cm_id* active = resolved(ch, GetParam(), closed_port(GetParam()));
  ASSERT_FALSE(soft.connect(active, param_with("anyone?")));
  auto e = next_event(soft, ch);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, cm_event_type::rejected) << prov::to_string(e->type);
  EXPECT_EQ(e->id, active);
  EXPECT_EQ(e->status, 8) << "IB_CM_REJ_INVALID_SERVICE_ID, as rdma_cm reports it on rxe";
  EXPECT_EQ(e->private_data_len, 0);
  EXPECT_EQ(soft.connect(active, {}), std::errc::invalid_argument) << "one attempt per id";
  EXPECT_EQ(soft.disconnect(active), std::errc::invalid_argument);
}

TEST_F(soft_cm_test, too_long_private_data_is_einval_and_sends_nothing) {
  prov::event_channel* lch = channel();
  prov::event_channel* ach = channel();
  std::uint16_t port = 0;
  listener(lch, "127.0.0.1", port);
  prov::cm_id* active = resolved(ach, "127.0.0.1", port);
  const std::string big(255, 'x');

  EXPECT_EQ(soft.connect(active, param_with(std::string_view(big).substr(0, 57))),
            std::errc::invalid_argument);
  prov::conn_param null_data;
  null_data.private_data_len = 4;
  EXPECT_EQ(soft.connect(active, null_data), std::errc::invalid_argument);
  EXPECT_FALSE(readable(soft, lch, 200ms)) << "no request was sent";

  // The id is unharmed: the longest allowed private data goes through.
  const std::string max_req(56, 'r');
  prov::cm_id* passive = request(active, lch, max_req);
  ASSERT_NE(passive, nullptr);

  EXPECT_EQ(soft.accept(passive, param_with(std::string_view(big).substr(0, 197))),
            std::errc::invalid_argument);
  EXPECT_EQ(soft.reject(passive, big.data(), 149), std::errc::invalid_argument);
  EXPECT_EQ(soft.reject(passive, nullptr, 1), std::errc::invalid_argument);
  EXPECT_FALSE(readable(soft, ach, 200ms)) << "no answer was sent";

  const std::string max_rep(196, 'a');
  ASSERT_FALSE(soft.accept(passive, param_with(max_rep)));
  auto e = next_event(soft, ach);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, cm_event_type::established);
  EXPECT_EQ(pdata(*e), max_rep);
}

TEST_F(soft_cm_test, the_longest_reject_private_data_arrives_whole) {
  const auto [lch, ach, active, passive] = pending_request();
  ASSERT_NE(passive, nullptr);
  const std::string max_rej(148, 'j');
  ASSERT_FALSE(soft.reject(passive, max_rej.data(), 148));
  auto e = next_event(soft, ach);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, cm_event_type::rejected);
  EXPECT_EQ(pdata(*e), max_rej);
}

// ---- disconnect ------------------------------------------------------------------

TEST_P(soft_cm_family, disconnect_from_the_active_side_closes_both) {
  prov::event_channel* ach = channel();
  prov::event_channel* pch = channel();
  const auto [active, passive] = establish(GetParam(), ach, pch);
  ASSERT_FALSE(soft.disconnect(active));
  expect_closed_pair(ach, active, "active");
  expect_closed_pair(pch, passive, "passive");
  EXPECT_FALSE(soft.disconnect(active)) << "again: nothing to do";
  EXPECT_FALSE(soft.disconnect(passive)) << "the answering side, as librpma's server does";
  EXPECT_FALSE(readable(soft, ach, 100ms));
  EXPECT_FALSE(readable(soft, pch, 0ms));
}

TEST_P(soft_cm_family, disconnect_from_the_passive_side_closes_both) {
  prov::event_channel* ach = channel();
  prov::event_channel* pch = channel();
  const auto [active, passive] = establish(GetParam(), ach, pch);
  ASSERT_FALSE(soft.disconnect(passive));
  expect_closed_pair(pch, passive, "passive");
  expect_closed_pair(ach, active, "active");
  EXPECT_FALSE(soft.disconnect(active));
  EXPECT_FALSE(readable(soft, ach, 100ms));
  EXPECT_FALSE(readable(soft, pch, 0ms));
}

TEST_F(soft_cm_test, disconnects_crossing_give_one_pair_of_events_per_side) {
  prov::event_channel* ach = channel();
  prov::event_channel* pch = channel();
  const auto [active, passive] = establish("127.0.0.1", ach, pch);
  ASSERT_FALSE(soft.disconnect(active));
  ASSERT_FALSE(soft.disconnect(passive));
  expect_closed_pair(ach, active, "active");
  expect_closed_pair(pch, passive, "passive");
  EXPECT_FALSE(readable(soft, ach, 200ms));
  EXPECT_FALSE(readable(soft, pch, 0ms));
}

TEST_F(soft_cm_test, destroying_a_connected_id_disconnects_the_peer) {
  prov::event_channel* ach = channel();
  prov::event_channel* pch = channel();
  const auto [active, passive] = establish("127.0.0.1", ach, pch);
  destroy(active);
  expect_closed_pair(pch, passive, "passive");
  EXPECT_FALSE(readable(soft, ach, 0ms)) << "nothing for a destroyed id";
}

// ---- migration and context -------------------------------------------------------

TEST_F(soft_cm_test, migrate_id_moves_pending_events_in_order) {
  prov::event_channel* ach = channel();
  prov::event_channel* lch = channel();
  prov::event_channel* conn_ch = channel();
  std::uint16_t port = 0;
  listener(lch, "127.0.0.1", port);
  prov::cm_id* active = resolved(ach, "127.0.0.1", port);
  prov::cm_id* passive = request(active, lch, "x");
  ASSERT_NE(passive, nullptr);

  // librpma's server order: accept, then migrate; ESTABLISHED may already be
  // waiting on the listener's channel and must follow the id.
  ASSERT_FALSE(soft.accept(passive, {}));
  auto est = next_event(soft, ach);
  ASSERT_TRUE(est && est->type == cm_event_type::established);
  ASSERT_TRUE(readable(soft, lch, wait_limit)) << "ESTABLISHED queued on the old channel";
  // Another id's event on the same channel stays there.
  prov::cm_id* bystander = new_id(lch, 5);
  const sockaddr_storage somewhere = address("127.0.0.1", 9);
  ASSERT_FALSE(soft.resolve_addr(bystander, sa(somewhere), 100));

  ASSERT_FALSE(soft.migrate_id(passive, conn_ch));
  auto moved = next_event(soft, conn_ch);
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->type, cm_event_type::established);
  EXPECT_EQ(moved->id, passive);
  auto stayed = next_event(soft, lch, 0ms);
  ASSERT_TRUE(stayed);
  EXPECT_EQ(stayed->id, bystander);
  EXPECT_EQ(stayed->type, cm_event_type::addr_resolved);
  EXPECT_FALSE(readable(soft, lch, 0ms)) << "the fd counts only what is left";

  // Two queued events move together and keep their order; the new context
  // applies to events that come after set_context.
  ASSERT_FALSE(soft.disconnect(active));
  ASSERT_TRUE(readable(soft, conn_ch, wait_limit));
  prov::event_channel* final_ch = channel();
  ASSERT_FALSE(soft.migrate_id(passive, final_ch));
  EXPECT_FALSE(readable(soft, conn_ch, 0ms));
  expect_closed_pair(final_ch, passive, "passive");
  EXPECT_FALSE(soft.migrate_id(passive, final_ch)) << "to its own channel: nothing to do";
  expect_closed_pair(ach, active, "active");
}

TEST_F(soft_cm_test, migrating_a_listener_takes_its_untaken_requests) {
  prov::event_channel* lch = channel();
  prov::event_channel* ach = channel();
  prov::event_channel* new_ch = channel();
  std::uint16_t port = 0;
  prov::cm_id* lid = listener(lch, "127.0.0.1", port);
  prov::cm_id* active = resolved(ach, "127.0.0.1", port);
  ASSERT_FALSE(soft.connect(active, param_with("q")));
  ASSERT_TRUE(readable(soft, lch, wait_limit));
  ASSERT_FALSE(soft.migrate_id(lid, new_ch));
  EXPECT_FALSE(readable(soft, lch, 0ms));
  auto req = next_event(soft, new_ch, 0ms);
  ASSERT_TRUE(req);
  EXPECT_EQ(req->type, cm_event_type::connect_request);
  prov::cm_id* passive = track(req->id);
  ASSERT_FALSE(soft.accept(passive, {}));
  auto est = next_event(soft, new_ch);
  ASSERT_TRUE(est);
  EXPECT_EQ(est->type, cm_event_type::established) << "the child lives on the new channel";
  EXPECT_EQ(est->id, passive);
}

TEST_F(soft_cm_test, set_context_changes_the_context_of_later_events) {
  prov::event_channel* ach = channel();
  prov::event_channel* pch = channel();
  const auto [active, passive] = establish("127.0.0.1", ach, pch);
  soft.set_context(passive, 0xfeedu);
  soft.set_context(active, 0xbeefu);
  ASSERT_FALSE(soft.disconnect(active));
  auto a = next_event(soft, ach);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->context, 0xbeefu);
  auto p = next_event(soft, pch);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->context, 0xfeedu);
}

// ---- ids destroyed with work in flight ---------------------------------------------

TEST_F(soft_cm_test, destroying_an_unanswered_passive_id_rejects_the_active_side) {
  prov::event_channel* lch = channel();
  prov::event_channel* ach = channel();
  std::uint16_t port = 0;
  listener(lch, "127.0.0.1", port);
  prov::cm_id* active = resolved(ach, "127.0.0.1", port);
  prov::cm_id* passive = request(active, lch, "hello?");
  ASSERT_NE(passive, nullptr);
  destroy(passive);
  auto e = next_event(soft, ach);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, cm_event_type::rejected) << prov::to_string(e->type);
  EXPECT_EQ(e->status, 28);
  EXPECT_EQ(e->private_data_len, 0);
}

TEST_F(soft_cm_test, destroying_a_listener_rejects_the_requests_nobody_took) {
  prov::event_channel* lch = channel();
  prov::event_channel* ach = channel();
  std::uint16_t port = 0;
  prov::cm_id* lid = listener(lch, "127.0.0.1", port);
  prov::cm_id* active = resolved(ach, "127.0.0.1", port);
  ASSERT_FALSE(soft.connect(active, {}));
  ASSERT_TRUE(readable(soft, lch, wait_limit)) << "CONNECT_REQUEST queued";
  destroy(lid);
  EXPECT_FALSE(readable(soft, lch, 0ms)) << "its requests went with it";
  auto e = next_event(soft, ach);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, cm_event_type::rejected) << prov::to_string(e->type);
  EXPECT_EQ(e->status, 28);
}

TEST_F(soft_cm_test, accepting_after_the_active_side_left_is_unreachable) {
  const auto [lch, ach, active, passive] = pending_request();
  ASSERT_NE(passive, nullptr);
  const std::size_t failures = soft.link_failures();
  destroy(active);
  // The passive side has seen its link fail before the accept.
  ASSERT_TRUE(eventually([&] { return soft.link_failures() > failures; }));
  ASSERT_FALSE(soft.accept(passive, {}));
  auto e = next_event(soft, lch);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, cm_event_type::unreachable) << prov::to_string(e->type);
  EXPECT_EQ(e->id, passive);
  EXPECT_LT(e->status, 0);
  EXPECT_FALSE(readable(soft, ach, 0ms));
}

// The other order: the accept goes out first. Either the active side is gone
// before the REP reaches it (no RTU comes: UNREACHABLE), or the handshake
// finished first (ESTABLISHED, then DISCONNECTED when it leaves); never
// nothing, and never anything else (measured: the second under TSan).
TEST_F(soft_cm_test, the_active_side_leaving_after_the_accept_ends_the_passive_side) {
  const auto [lch, ach, active, passive] = pending_request();
  ASSERT_NE(passive, nullptr);
  ASSERT_FALSE(soft.accept(passive, {}));
  destroy(active);
  auto e = next_event(soft, lch);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->id, passive);
  if (e->type == cm_event_type::established) {
    e = next_event(soft, lch);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->type, cm_event_type::disconnected) << prov::to_string(e->type);
  } else {
    EXPECT_EQ(e->type, cm_event_type::unreachable) << prov::to_string(e->type);
  }
}

TEST_F(soft_cm_test, ids_destroyed_mid_handshake_leave_no_events_and_no_leaks) {
  prov::event_channel* lch = channel();
  std::uint16_t port = 0;
  listener(lch, "127.0.0.1", port);
  for (int round = 0; round < 40; ++round) {
    prov::event_channel* ach = channel();
    prov::cm_id* active = resolved(ach, "127.0.0.1", port);
    ASSERT_FALSE(soft.connect(active, param_with("r")));
    if (round % 4 == 1) std::this_thread::sleep_for(1ms);
    destroy(active);
    EXPECT_FALSE(readable(soft, ach, 0ms)) << "round " << round;
    // Requests that made it: answer some, drop the others.
    while (auto e = next_event(soft, lch, 0ms)) {
      ASSERT_EQ(e->type, cm_event_type::connect_request);
      if (round % 2 == 0) (void)soft.accept(e->id, {});
      EXPECT_FALSE(soft.destroy_id(e->id));
    }
  }
  // Requests still on their way are destroyed as they come, until only the
  // listener is alive: every other id, active or passive, was freed.
  const bool only_the_listener = eventually([&] {
    while (auto e = next_event(soft, lch, 0ms)) {
      if (e->type == cm_event_type::connect_request) {
        EXPECT_FALSE(soft.destroy_id(e->id));
      }
    }
    return soft.live_ids() == 1;
  });
  EXPECT_TRUE(only_the_listener) << soft.live_ids() << " ids alive";
}

TEST(soft_cm_lifetime, a_provider_with_links_still_closing_is_destroyed_promptly) {
  const auto start = std::chrono::steady_clock::now();
  {
    prov::soft_provider p;
    auto lch = p.create_event_channel();
    auto ach = p.create_event_channel();
    ASSERT_TRUE(lch && ach);
    auto lid = p.create_id(lch.value(), 1);
    auto aid = p.create_id(ach.value(), 2);
    ASSERT_TRUE(lid && aid);
    const sockaddr_storage local = address("127.0.0.1", 0);
    ASSERT_FALSE(p.bind_addr(lid.value(), sa(local)));
    ASSERT_FALSE(p.listen(lid.value(), 1));
    const sockaddr_storage remote = address("127.0.0.1", p.local_port(lid.value()));
    ASSERT_FALSE(p.resolve_addr(aid.value(), sa(remote), 100));
    ASSERT_FALSE(p.resolve_route(aid.value(), 100));
    ASSERT_FALSE(p.connect(aid.value(), {}));
    auto e = next_event(p, lch.value());
    while (e && e->type != cm_event_type::connect_request) e = next_event(p, lch.value());
    ASSERT_TRUE(e);
    EXPECT_FALSE(p.destroy_id(e->id));  // a REJ on its way
    EXPECT_FALSE(p.destroy_id(aid.value()));
    EXPECT_FALSE(p.destroy_id(lid.value()));
    p.destroy_event_channel(lch.value());
    p.destroy_event_channel(ach.value());
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST_F(soft_cm_test, a_channel_fd_starts_blocking_and_get_cm_event_waits_on_it) {
  prov::event_channel* ch = channel();
  const int fd = soft.event_channel_fd(ch);
  const int flags = ::fcntl(fd, F_GETFL);
  ASSERT_EQ(flags & O_NONBLOCK, 0) << "as rdma_create_event_channel makes it";
  prov::cm_id* id = new_id(ch, 3);
  auto waiter = std::async(std::launch::async, [&] {
    prov::cm_event e;
    const std::error_code ec = soft.get_cm_event(ch, e);
    return ec ? cm_event_type::other : e.type;
  });
  EXPECT_EQ(waiter.wait_for(100ms), std::future_status::timeout) << "waits for an event";
  const sockaddr_storage remote = address("127.0.0.1", 9);
  ASSERT_FALSE(soft.resolve_addr(id, sa(remote), 100));
  const bool woke = waiter.wait_for(wait_limit) == std::future_status::ready;
  EXPECT_TRUE(woke);
  if (!woke) (void)soft.resolve_addr(id, sa(remote), 100);  // free the waiter
  EXPECT_EQ(waiter.get(), cm_event_type::addr_resolved);
  ASSERT_EQ(::fcntl(fd, F_SETFL, flags | O_NONBLOCK), 0);
  prov::cm_event e;
  EXPECT_EQ(soft.get_cm_event(ch, e), std::errc::resource_unavailable_try_again);
}

TEST_F(soft_cm_test, get_cm_event_nonblocking_never_waits_whatever_the_fds_mode) {
  // A drain ends on an EAGAIN; the queue knows it is empty without asking
  // the fd's mode (no fcntl per drain), and a blocking fd must not make it wait.
  prov::event_channel* ch = channel();  // blocking, as it starts
  prov::cm_id* id = new_id(ch, 4);
  const sockaddr_storage remote = address("127.0.0.1", 9);
  auto empty = std::async(std::launch::async, [&] {
    prov::cm_event e;
    return soft.get_cm_event_nonblocking(ch, e);
  });
  const bool returned = empty.wait_for(wait_limit) == std::future_status::ready;
  EXPECT_TRUE(returned) << "waited on an empty channel";
  if (!returned) (void)soft.resolve_addr(id, sa(remote), 100);  // free it
  EXPECT_EQ(empty.get(), std::errc::resource_unavailable_try_again);
  ASSERT_FALSE(soft.resolve_addr(id, sa(remote), 100));
  prov::cm_event e;
  ASSERT_FALSE(soft.get_cm_event_nonblocking(ch, e));
  EXPECT_EQ(e.type, cm_event_type::addr_resolved);
  EXPECT_EQ(e.context, 4U);
  // The event's token left with it: the fd is not readable any more.
  pollfd p{soft.event_channel_fd(ch), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0);
}

TEST(soft_cm_lifetime, a_forked_child_destroys_its_copy_of_a_running_provider_at_once) {
  std::optional<prov::soft_provider> p(std::in_place);
  auto ch = p->create_event_channel();
  ASSERT_TRUE(ch);
  auto id = p->create_id(ch.value(), 1);
  ASSERT_TRUE(id);
  const sockaddr_storage local = address("127.0.0.1", 0);
  ASSERT_FALSE(p->bind_addr(id.value(), sa(local)));  // the progress thread runs now
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    p.reset();  // as at exit: must neither hang nor touch the parent's sockets
    ::_exit(0);
  }
  int status = -1;
  const auto deadline = std::chrono::steady_clock::now() + wait_limit;
  while (::waitpid(pid, &status, WNOHANG) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  if (std::chrono::steady_clock::now() >= deadline) {
    ::kill(pid, SIGKILL);
    (void)::waitpid(pid, &status, 0);
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  // The parent's provider still works: a request reaches its listener.
  ASSERT_FALSE(p->listen(id.value(), 1));
  auto active = p->create_id(ch.value(), 2);
  ASSERT_TRUE(active);
  const sockaddr_storage remote = address("127.0.0.1", p->local_port(id.value()));
  ASSERT_FALSE(p->resolve_addr(active.value(), sa(remote), 100));
  ASSERT_FALSE(p->resolve_route(active.value(), 100));
  ASSERT_FALSE(p->connect(active.value(), {}));
  std::optional<prov::cm_event> e;
  do e = next_event(*p, ch.value());
  while (e && e->type != cm_event_type::connect_request);
  ASSERT_TRUE(e) << "no CONNECT_REQUEST after the child's exit";
  EXPECT_FALSE(p->destroy_id(e->id));
  EXPECT_FALSE(p->destroy_id(active.value()));
  EXPECT_FALSE(p->destroy_id(id.value()));
  p->destroy_event_channel(ch.value());
}

TEST_F(soft_cm_test, running_out_of_descriptors_fails_only_the_connections_it_hits) {
  prov::event_channel* lch = channel();
  prov::event_channel* ach = channel();
  std::uint16_t port = 0;
  listener(lch, "127.0.0.1", port);
  constexpr int count = 8;
  std::vector<prov::cm_id*> active;
  for (int i = 0; i < count; ++i) active.push_back(resolved(ach, "127.0.0.1", port, 100 + i));
  {
    // Take the error paths once with descriptors to spare: UBSan's first
    // check of a dynamic type needs a pipe, which it cannot get below.
    prov::event_channel* warm_ch = channel();
    prov::cm_id* warm = resolved(warm_ch, "127.0.0.1", closed_port("127.0.0.1"));
    ASSERT_FALSE(soft.connect(warm, {}));
    auto e = next_event(soft, warm_ch);
    ASSERT_TRUE(e && e->type == cm_event_type::rejected);
  }

  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  int open_fds = 0;
  for (int fd = 0; fd < 4096; ++fd) open_fds += ::fcntl(fd, F_GETFD) != -1 ? 1 : 0;
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(open_fds + 4);  // room for two connections
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  struct restore {
    rlimit limit;
    ~restore() { (void)::setrlimit(RLIMIT_NOFILE, &limit); }
  } const restore_at_exit{saved};
  for (prov::cm_id* id : active) EXPECT_FALSE(soft.connect(id, {}));
  // Each active id ends in UNREACHABLE (-EMFILE: its socket could not be
  // opened) or ESTABLISHED (the listener retries its accept once descriptors
  // are back); the passive side accepts every request that arrives.
  int emfile = 0;
  int established = 0;
  bool restored = false;
  const auto start = std::chrono::steady_clock::now();
  while (emfile + established < count && std::chrono::steady_clock::now() - start < wait_limit) {
    if (!restored && std::chrono::steady_clock::now() - start > 300ms) {
      EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
      restored = true;
    }
    if (auto e = next_event(soft, ach, 10ms)) {
      if (e->type == cm_event_type::unreachable) {
        EXPECT_EQ(e->status, -EMFILE);
        ++emfile;
      } else {
        EXPECT_EQ(e->type, cm_event_type::established) << prov::to_string(e->type);
        ++established;
      }
    }
    while (auto e = next_event(soft, lch, 0ms)) {
      if (e->type == cm_event_type::connect_request) {
        EXPECT_FALSE(soft.accept(track(e->id), {}));
      } else {
        EXPECT_EQ(e->type, cm_event_type::established) << prov::to_string(e->type);
      }
    }
  }
  EXPECT_EQ(emfile + established, count);
  EXPECT_GT(emfile, 0) << "the limit was hit";
  EXPECT_GT(established, 0) << "the others went through";
}

// ---- hostile peers -----------------------------------------------------------------

TEST_F(soft_cm_test, garbage_and_vanishing_peers_leave_the_listener_working) {
  prov::event_channel* lch = channel();
  std::uint16_t port = 0;
  listener(lch, "127.0.0.1", port);

  // Connects and leaves at once.
  int fd = raw_connect("127.0.0.1", port);
  ASSERT_GE(fd, 0);
  ::close(fd);

  const std::vector<std::vector<std::uint8_t>> hostile = {
      std::vector<std::uint8_t>(64, 0xab),                              // no magic
      wire_frame(1, req_payload("x"), 0x12345678),                      // wrong magic
      wire_frame(1, req_payload("x"), 0x4152504d, 2),                   // unknown version
      wire_frame(1, req_payload(std::string(57, 'l'))),                 // REQ too long
      wire_frame(1, {1, 2, 3}),                                         // REQ too short
      wire_frame(2, req_payload("")),                                   // REP first
      wire_frame(9, {}),                                                // unknown type
      {0x41, 0x52, 0x50, 0x4d, 1, 1, 0, 0, 0xff, 0xff, 0xff, 0xff},     // absurd length
      {0x41, 0x52, 0x50, 0x4d, 1, 1, 0x80, 0, 0, 0, 0, 8, 0, 0, 0, 0},  // flags set
  };
  for (std::size_t i = 0; i < hostile.size(); ++i) {
    fd = raw_connect("127.0.0.1", port);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(write_all(fd, hostile[i]));
    EXPECT_TRUE(closed_by_peer(fd)) << "hostile frame " << i << " closes that connection";
    ::close(fd);
  }
  // A truncated REQ, then the peer goes away.
  fd = raw_connect("127.0.0.1", port);
  ASSERT_GE(fd, 0);
  auto truncated = wire_frame(1, req_payload("half"));
  truncated.resize(truncated.size() - 2);
  ASSERT_TRUE(write_all(fd, truncated));
  ::close(fd);

  EXPECT_FALSE(readable(soft, lch, 200ms)) << "no request from any of them";
  prov::event_channel* ach = channel();
  prov::cm_id* active = resolved(ach, "127.0.0.1", port);
  prov::cm_id* passive = request(active, lch, "real");
  ASSERT_NE(passive, nullptr);
  ASSERT_FALSE(soft.accept(passive, {}));
  auto e = next_event(soft, ach);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, cm_event_type::established);
}

TEST_F(soft_cm_test, a_raw_peer_speaking_the_documented_protocol_then_garbage) {
  prov::event_channel* lch = channel();
  std::uint16_t port = 0;
  listener(lch, "127.0.0.1", port, 7);
  const int fd = raw_connect("127.0.0.1", port);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(write_all(fd, wire_frame(1, req_payload("raw"))));
  auto req = next_event(soft, lch);
  ASSERT_TRUE(req);
  ASSERT_EQ(req->type, cm_event_type::connect_request);
  EXPECT_EQ(pdata(*req), "raw");
  prov::cm_id* passive = track(req->id);

  ASSERT_FALSE(soft.accept(passive, param_with("rep")));
  const auto rep = read_exact(fd, 12 + 8 + 3);
  ASSERT_EQ(rep.size(), 23u);
  EXPECT_EQ(std::vector<std::uint8_t>(rep.begin(), rep.begin() + 12),
            (std::vector<std::uint8_t>{0x41, 0x52, 0x50, 0x4d, 1, 2, 0, 0, 0, 0, 0, 11}));
  EXPECT_EQ(std::string(rep.begin() + 20, rep.end()), "rep");

  ASSERT_TRUE(write_all(fd, wire_frame(4, {})));  // RTU
  auto est = next_event(soft, lch);
  ASSERT_TRUE(est);
  EXPECT_EQ(est->type, cm_event_type::established);

  ASSERT_TRUE(write_all(fd, std::vector<std::uint8_t>(20, 0xee)));
  expect_closed_pair(lch, passive, "passive");
  EXPECT_TRUE(closed_by_peer(fd));
  ::close(fd);
}

TEST_F(soft_cm_test, a_garbage_answer_makes_the_active_side_unreachable) {
  // A fake server: accepts, reads the REQ, answers with garbage.
  const sockaddr_storage local = address("127.0.0.1", 0);
  const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::bind(server, sa(local), sizeof(sockaddr_in)), 0);
  ASSERT_EQ(::listen(server, 1), 0);
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  ASSERT_EQ(::getsockname(server, reinterpret_cast<sockaddr*>(&bound), &len), 0);

  prov::event_channel* ach = channel();
  prov::cm_id* active = resolved(ach, "127.0.0.1", ntohs(bound.sin_port));
  ASSERT_FALSE(soft.connect(active, param_with("abc")));
  pollfd ready{server, POLLIN, 0};
  ASSERT_EQ(::poll(&ready, 1, 5000), 1);
  const int fd = ::accept(server, nullptr, nullptr);
  ASSERT_GE(fd, 0);
  const auto req = read_exact(fd, 12 + 8 + 3);
  ASSERT_EQ(req.size(), 23u);
  EXPECT_EQ(req[5], 1) << "REQ";
  EXPECT_EQ(std::string(req.begin() + 20, req.end()), "abc");
  ASSERT_TRUE(write_all(fd, wire_frame(2, std::vector<std::uint8_t>(300, 1))));  // REP too long
  auto e = next_event(soft, ach);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, cm_event_type::unreachable) << prov::to_string(e->type);
  EXPECT_EQ(e->status, -EPROTO);
  EXPECT_TRUE(closed_by_peer(fd));
  ::close(fd);
  ::close(server);
}

// ---- two processes -----------------------------------------------------------------

/// Waits for `pid` at most `limit`; kills it past that. Its exit status, or -1.
int wait_child(pid_t pid, std::chrono::milliseconds limit = 10000ms) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(10ms);
  }
  ::kill(pid, SIGKILL);
  (void)::waitpid(pid, &status, 0);
  return -1;
}

/// The child's active side: connect to 127.0.0.1:port with "child", expect
/// the parent's "parent"; then either wait for the parent's disconnect
/// (`stay` false) or sleep until killed. Returns the exit status.
int child_active_side(std::uint16_t port, bool stay, int ready_fd) {
  prov::soft_provider p;
  auto ch = p.create_event_channel();
  if (!ch) return 10;
  auto id = p.create_id(ch.value(), 1);
  if (!id) return 11;
  const sockaddr_storage remote = address("127.0.0.1", port);
  if (p.resolve_addr(id.value(), sa(remote), 1000)) return 12;
  auto e = next_event(p, ch.value());
  if (!e || e->type != cm_event_type::addr_resolved) return 13;
  if (p.resolve_route(id.value(), 1000)) return 14;
  e = next_event(p, ch.value());
  if (!e || e->type != cm_event_type::route_resolved) return 15;
  if (p.connect(id.value(), param_with("child"))) return 16;
  e = next_event(p, ch.value());
  if (!e || e->type != cm_event_type::established) return 17;
  if (pdata(*e) != "parent") return 18;
  if (stay) {
    const char one = 1;
    (void)!::write(ready_fd, &one, 1);
    for (;;) ::pause();
  }
  e = next_event(p, ch.value());
  if (!e || e->type != cm_event_type::disconnected) return 19;
  e = next_event(p, ch.value());
  if (!e || e->type != cm_event_type::timewait_exit) return 20;
  if (p.destroy_id(id.value())) return 21;
  p.destroy_event_channel(ch.value());
  return 0;
}

/// Runs this test binary again as the active side: fork, then exec at once,
/// so the child starts single-threaded with a provider of its own (nothing
/// but async-signal-safe calls between fork and exec). Its stdout goes nowhere.
pid_t spawn_active_side(std::uint16_t port, bool stay, int ready_fd) {
  std::string spec = "ARPMA_SOFT_CM_CHILD=" + std::to_string(port) + ":" + (stay ? "1" : "0") +
                     ":" + std::to_string(ready_fd);
  return arpma::test::spawn_with("/proc/self/exe", std::move(spec), ready_fd);
}

// The child of the two-process tests: the same binary, re-executed with
// ARPMA_SOFT_CM_CHILD set, plays the active side before gtest's main runs.
const bool child_ran = [] {
  const char* spec = std::getenv("ARPMA_SOFT_CM_CHILD");  // NOLINT(concurrency-mt-unsafe)
  if (spec == nullptr) return false;
  unsigned port = 0;
  int stay = 0;
  int ready_fd = -1;
  if (std::sscanf(spec, "%u:%d:%d", &port, &stay, &ready_fd) != 3) ::_exit(2);
  ::_exit(child_active_side(static_cast<std::uint16_t>(port), stay != 0, ready_fd));
}();

TEST_F(soft_cm_test, across_two_processes) {
  prov::event_channel* lch = channel();
  std::uint16_t port = 0;
  listener(lch, "127.0.0.1", port);
  const pid_t pid = spawn_active_side(port, false, -1);
  ASSERT_GT(pid, 0);

  auto req = next_event(soft, lch);
  ASSERT_TRUE(req) << "no request from the child";
  ASSERT_EQ(req->type, cm_event_type::connect_request);
  EXPECT_EQ(pdata(*req), "child");
  prov::cm_id* passive = track(req->id);
  ASSERT_FALSE(soft.accept(passive, param_with("parent")));
  auto est = next_event(soft, lch);
  ASSERT_TRUE(est);
  EXPECT_EQ(est->type, cm_event_type::established);
  ASSERT_FALSE(soft.disconnect(passive));
  expect_closed_pair(lch, passive, "parent");
  EXPECT_EQ(wait_child(pid), 0) << "the child's exit status says where it stopped";
}

TEST_F(soft_cm_test, a_peer_killed_after_established_gives_disconnected) {
  prov::event_channel* lch = channel();
  std::uint16_t port = 0;
  listener(lch, "127.0.0.1", port);
  std::array<int, 2> ready{};
  ASSERT_EQ(::pipe2(ready.data(), O_CLOEXEC), 0);
  const pid_t pid = spawn_active_side(port, true, ready[1]);
  ASSERT_GT(pid, 0);
  ::close(ready[1]);

  auto req = next_event(soft, lch);
  ASSERT_TRUE(req) << "no request from the child";
  ASSERT_EQ(req->type, cm_event_type::connect_request);
  prov::cm_id* passive = track(req->id);
  ASSERT_FALSE(soft.accept(passive, param_with("parent")));
  auto est = next_event(soft, lch);
  ASSERT_TRUE(est);
  EXPECT_EQ(est->type, cm_event_type::established);
  pollfd child_ready{ready[0], POLLIN, 0};
  EXPECT_EQ(::poll(&child_ready, 1, 5000), 1) << "the child saw ESTABLISHED";
  ::close(ready[0]);

  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  const auto killed = std::chrono::steady_clock::now();
  expect_closed_pair(lch, passive, "survivor");
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 2s);
  EXPECT_EQ(wait_child(pid), 128 + SIGKILL);
}

}  // namespace

}  // namespace soft_cm_test

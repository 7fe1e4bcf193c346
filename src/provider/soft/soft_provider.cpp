// The soft provider's façade: the provider interface over the connection
// manager (soft_cm.cpp), the links (soft_link_*.cpp), the data path
// (soft_datapath*.cpp) and the progress engine (soft_engine.hpp).
#include "provider/soft/soft_provider.hpp"

#include "provider/handle_cast.hpp"
#include "provider/soft/soft_cm.hpp"
#include "provider/soft/soft_device.hpp"
#include "provider/soft/soft_engine.hpp"
#include "provider/soft/soft_id.hpp"
#include "provider/soft/soft_link.hpp"
#include "support/log.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/post.hpp>

#include <chrono>
#include <cstdlib>
#include <random>
#include <vector>

namespace arpma::provider {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using soft_cm::accept_next;
using soft_cm::await_rtu;
using soft_cm::make_conn_frame;
using soft_cm::make_rej_frame;
using soft_cm::private_data_ok;
using soft_cm::rej_consumer_defined;
using soft_cm::start_connect;
using soft_cm::teardown;
using soft_dp::soft_cq;
using soft_dp::soft_pd;
using soft_dp::soft_qp;
using soft_link::conn_state;
using soft_link::finish_link;
using soft_link::flush_qp_locked;
using soft_link::id_ptr;
using soft_link::send_frame;
using soft_link::soft_channel;
using soft_link::soft_id;
using soft_link::sys;
using soft_wire::frame;
using soft_wire::frame_type;

// The device handle: a real ibv_context (soft_device.hpp).
struct soft_provider::device_storage {
  soft_device device;
};

namespace {

socklen_t length_of(const sockaddr* addr) noexcept {
  return addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

tcp::endpoint endpoint_of(const sockaddr* addr) noexcept {
  tcp::endpoint ep;
  std::memcpy(ep.data(), addr, length_of(addr));
  return ep;
}

// What the kernel's route lookup would say about reaching `dst`; a UDP
// connect sends nothing.
std::error_code route_to(const sockaddr* dst) noexcept {
  if (dst->sa_family != AF_INET && dst->sa_family != AF_INET6) return sys(EAFNOSUPPORT);
  const int fd = ::socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return sys(errno);
  sockaddr_storage probe{};
  std::memcpy(&probe, dst, length_of(dst));
  // Port 0 cannot be connected to; the port plays no part in routing.
  if (probe.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&probe)->sin_port = htons(9);
  else
    reinterpret_cast<sockaddr_in6*>(&probe)->sin6_port = htons(9);
  const int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&probe), length_of(dst));
  const int err = rc != 0 ? errno : 0;
  ::close(fd);
  return err != 0 ? sys(err) : std::error_code{};
}

// A local address is one a socket can be bound to.
std::error_code bindable(const sockaddr* addr) noexcept {
  const int fd = ::socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return sys(errno);
  sockaddr_storage any_port{};
  std::memcpy(&any_port, addr, length_of(addr));
  const int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&any_port), length_of(addr));
  const int err = rc != 0 ? errno : 0;
  ::close(fd);
  return err != 0 ? sys(err) : std::error_code{};
}

}  // namespace

namespace {

/// ARPMA_SOFT_PROGRESS_SPIN_US (0..1000000) in place of the default spin, for
/// machines where a spinning progress thread costs more than it saves.
std::chrono::microseconds progress_spin_from_env(std::chrono::microseconds fallback) {
  const char* env = std::getenv("ARPMA_SOFT_PROGRESS_SPIN_US");  // NOLINT(concurrency-mt-unsafe)
  if (env == nullptr || *env == '\0') return fallback;
  char* end = nullptr;
  const long us = std::strtol(env, &end, 10);
  if (*end != '\0' || us < 0 || us > 1000000) {
    ARPMA_LOG(log_level::warning, "ARPMA_SOFT_PROGRESS_SPIN_US=%s ignored (0..1000000)", env);
    return fallback;
  }
  return std::chrono::microseconds(us);
}

}  // namespace

soft_provider::soft_provider()
    : device_(std::make_unique<device_storage>()),
      next_qp_num_(std::random_device{}() & 0x7fffffu) {
  limits_.progress_spin = progress_spin_from_env(limits_.progress_spin);
}

soft_provider::~soft_provider() {
  const std::lock_guard lock(engine_mutex_);
  // In a forked child the parent's progress thread does not exist: joining it
  // would hang and tearing down its io_context would unregister the parent's
  // sockets from their shared epoll instance. Leave it (the process is ending).
  if (engine_ && !engine_->ours()) (void)engine_.release();
  engine_.reset();
}

soft_provider::engine& soft_provider::progress() {
  const std::lock_guard lock(engine_mutex_);
  if (!engine_) {
    engine_ = std::make_unique<engine>();
    engine_->set_spin(limits_.progress_spin);
  }
  return *engine_;
}

void soft_provider::set_limits(const limits& l) noexcept {
  const std::lock_guard lock(engine_mutex_);
  limits_ = l;
  if (engine_) engine_->set_spin(l.progress_spin);
}

bool soft_provider::owns(const device* dev) const noexcept {
  return dev != nullptr && dev == device_->device.context();
}

result<device*> soft_provider::find_device(const char* addr, bool remote) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = remote ? 0 : AI_PASSIVE;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(addr, nullptr, &hints, &found); rc != 0) {
    const std::error_code ec =
        rc == EAI_SYSTEM ? sys(errno) : std::make_error_code(std::errc::address_not_available);
    ARPMA_LOG(log_level::error, "getaddrinfo(%s): %s", addr, gai_strerror(rc));
    return ec;
  }
  const std::error_code ec = remote ? route_to(found->ai_addr) : bindable(found->ai_addr);
  ::freeaddrinfo(found);
  if (ec) {
    ARPMA_LOG_FAILURE(remote ? "no route to the address" : "not a local address", ec);
    return ec;
  }
  return device_->device.context();
}

// ---- connection manager ----------------------------------------------------

result<event_channel*> soft_provider::create_event_channel() {
  // Running out of descriptors is common enough to report without throwing.
  std::error_code ec;
  auto channel = std::make_unique<soft_channel>(ec);
  if (ec) return ec;
  return handle<event_channel>(channel.release());
}

void soft_provider::destroy_event_channel(event_channel* channel) noexcept {
  delete as<soft_channel>(channel);
}

int soft_provider::event_channel_fd(const event_channel* channel) const noexcept {
  return as<const soft_channel>(channel)->queue.fd();
}

std::error_code soft_provider::get_cm_event(event_channel* channel, cm_event& out) {
  return as<soft_channel>(channel)->queue.pop(out);
}

std::error_code soft_provider::get_cm_event_nonblocking(event_channel* channel, cm_event& out) {
  // The queue knows when it is empty: no fcntl for the fd's mode.
  if (as<soft_channel>(channel)->queue.try_pop(out)) return {};
  return sys(EAGAIN);
}

result<cm_id*> soft_provider::create_id(event_channel* channel, std::uint64_t context) {
  if (channel == nullptr) return sys(EINVAL);  // no synchronous ids here
  auto id = std::make_shared<soft_id>();
  id->channel = as<soft_channel>(channel);
  id->context = context;
  id->rnr_timeout = rnr_timeout_;
  id->limits = limits_;
  id->count_in(totals_);
  id->self = id;
  return handle<cm_id>(id.get());
}

std::error_code soft_provider::destroy_id(cm_id* h) noexcept {
  auto* id = as<soft_id>(h);
  if (id->qp) return sys(EBUSY);  // rdma_destroy_id wants the QP gone first
  id_ptr keep;
  conn_state state = conn_state::idle;
  bool peer_gone = false;
  std::vector<cm_event> dropped;
  {
    const std::lock_guard lock(id->mutex);
    id->destroyed = true;
    keep = std::move(id->self);
    state = id->state;
    peer_gone = id->peer_gone;
    // As rdma_cm: events of the id still queued go with it, and so do the
    // connection requests of a listener nobody has taken yet (their ids die
    // with it, which rejects them).
    dropped = id->channel->queue.extract([id](const cm_event& e) {
      return e.id == handle<cm_id>(id) || (e.type == cm_event_type::connect_request &&
                                           e.id != nullptr && as<soft_id>(e.id)->listener == id);
    });
  }
  for (const cm_event& e : dropped)
    if (e.id != h) (void)destroy_id(e.id);
  if (id->io != nullptr) {
    asio::post(*id->io,
               [keep = std::move(keep), state, peer_gone] { teardown(keep, state, peer_gone); });
  }
  return {};
}

std::error_code soft_provider::resolve_addr(cm_id* h, const sockaddr* dst, int /*timeout_ms*/) {
  auto* id = as<soft_id>(h);
  if (dst == nullptr) return sys(EINVAL);
  if (dst->sa_family != AF_INET && dst->sa_family != AF_INET6) return sys(EAFNOSUPPORT);
  const std::lock_guard lock(id->mutex);
  if (id->state != conn_state::idle) return sys(EINVAL);
  std::memcpy(&id->dst, dst, length_of(dst));
  // The route lookup answers at once; its verdict arrives as an event, as
  // rdma_cm reports it.
  if (const std::error_code ec = route_to(dst)) {
    id->push_locked(cm_event_type::addr_error, -ec.value());
  } else {
    id->addr_resolved = true;
    id->push_locked(cm_event_type::addr_resolved);
  }
  return {};
}

std::error_code soft_provider::resolve_route(cm_id* h, int /*timeout_ms*/) {
  auto* id = as<soft_id>(h);
  const std::lock_guard lock(id->mutex);
  if (!id->addr_resolved || id->state != conn_state::idle) return sys(EINVAL);
  id->route_resolved = true;
  id->push_locked(cm_event_type::route_resolved);
  return {};
}

device* soft_provider::id_device(const cm_id* h) const noexcept {
  const auto* id = as<const soft_id>(h);
  const std::lock_guard lock(id->mutex);
  return id->addr_resolved || id->on_device ? device_->device.context() : nullptr;
}

// ---- connection lifecycle ----------------------------------------------------

std::error_code soft_provider::bind_addr(cm_id* h, const sockaddr* addr) {
  auto* id = as<soft_id>(h);
  if (addr == nullptr) return sys(EINVAL);
  if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) return sys(EAFNOSUPPORT);
  {
    const std::lock_guard lock(id->mutex);
    if (id->state != conn_state::idle || id->addr_resolved) return sys(EINVAL);
  }
  try {
    engine& eng = progress();
    const tcp::endpoint ep = endpoint_of(addr);
    tcp::acceptor acceptor(eng.io());
    boost::system::error_code ec;
    if (acceptor.open(ep.protocol(), ec); ec) return sys(ec);
    acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (acceptor.bind(ep, ec); ec) return sys(ec);
    const std::uint16_t port = acceptor.local_endpoint(ec).port();
    if (ec) return sys(ec);
    const std::lock_guard lock(id->mutex);
    id->io = &eng.io();
    id->acceptor.emplace(std::move(acceptor));
    id->timer.emplace(eng.io());
    id->port = port;
    id->on_device = !ep.address().is_unspecified();
    id->state = conn_state::bound;
    return {};
  } catch (const std::system_error& e) {  // no thread
    return e.code();
  } catch (const boost::system::system_error& e) {  // no epoll or eventfd for the loop
    return sys(e.code());
  } catch (const std::bad_alloc&) {
    return sys(ENOMEM);
  }
}

std::error_code soft_provider::listen(cm_id* h, int backlog) {
  auto* id = as<soft_id>(h);
  bool unbound = false;
  {
    const std::lock_guard lock(id->mutex);
    unbound = id->state == conn_state::idle && !id->addr_resolved;
  }
  if (unbound) {
    // rdma_listen binds an unbound id to the wildcard address first.
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_ANY);
    if (const auto ec = bind_addr(h, reinterpret_cast<const sockaddr*>(&any))) return ec;
  }
  const std::lock_guard lock(id->mutex);
  if (id->state != conn_state::bound) return sys(EINVAL);
  soft_cm::tune(id->acceptor->native_handle());
  boost::system::error_code ec;
  id->acceptor->listen(backlog > 0 ? backlog : asio::socket_base::max_listen_connections, ec);
  if (ec) return sys(ec);
  id->state = conn_state::listening;
  try {
    asio::post(*id->io, [listener = id->shared_from_this()] { accept_next(listener); });
  } catch (const std::bad_alloc&) {
    id->state = conn_state::bound;
    return sys(ENOMEM);
  }
  return {};
}

std::uint16_t soft_provider::local_port(const cm_id* h) const noexcept {
  const auto* id = as<const soft_id>(h);
  const std::lock_guard lock(id->mutex);
  return id->port;
}

std::error_code soft_provider::connect(cm_id* h, const conn_param& param) {
  auto* id = as<soft_id>(h);
  if (!private_data_ok(param.private_data, param.private_data_len, max_connect_private_data))
    return sys(EINVAL);
  {
    const std::lock_guard lock(id->mutex);
    if (!id->route_resolved || id->state != conn_state::idle) return sys(EINVAL);
  }
  try {
    engine& eng = progress();
    frame request = make_conn_frame(frame_type::req, param, id->qp ? id->qp->num : 0);
    const tcp::endpoint peer = endpoint_of(reinterpret_cast<const sockaddr*>(&id->dst));
    const std::lock_guard lock(id->mutex);
    id->io = &eng.io();
    id->own_resources = param.responder_resources;
    id->own_depth = param.initiator_depth;
    asio::post(eng.io(),
               [id = id->shared_from_this(), peer, request = std::move(request)]() mutable {
                 start_connect(id, peer, std::move(request));
               });
    id->state = conn_state::connecting;
    return {};
  } catch (const std::system_error& e) {  // no thread
    return e.code();
  } catch (const boost::system::system_error& e) {  // no epoll or eventfd for the loop
    return sys(e.code());
  } catch (const std::bad_alloc&) {
    return sys(ENOMEM);
  }
}

std::error_code soft_provider::accept(cm_id* h, const conn_param& param) {
  auto* id = as<soft_id>(h);
  if (!private_data_ok(param.private_data, param.private_data_len, max_accept_private_data))
    return sys(EINVAL);
  try {
    frame reply = make_conn_frame(frame_type::rep, param, id->qp ? id->qp->num : 0);
    const std::lock_guard lock(id->mutex);
    if (id->state != conn_state::req_received) return sys(EINVAL);
    if (id->peer_gone) {
      // The active side left: the answer cannot arrive (IB CM: REP timeout).
      id->state = conn_state::closed;
      id->push_locked(cm_event_type::unreachable, -id->peer_gone_status);
      return {};
    }
    id->own_resources = param.responder_resources;
    id->own_depth = param.initiator_depth;
    asio::post(*id->io, [id = id->shared_from_this(), reply = std::move(reply)]() mutable {
      send_frame(id, std::move(reply));
      await_rtu(id);
    });
    id->state = conn_state::rep_sent;
    return {};
  } catch (const std::bad_alloc&) {
    return sys(ENOMEM);
  }
}

std::error_code soft_provider::reject(cm_id* h, const void* private_data, std::uint8_t len) {
  auto* id = as<soft_id>(h);
  if (!private_data_ok(private_data, len, max_reject_private_data)) return sys(EINVAL);
  try {
    frame answer = make_rej_frame(rej_consumer_defined, private_data, len);
    const std::lock_guard lock(id->mutex);
    if (id->state != conn_state::req_received) return sys(EINVAL);
    asio::post(*id->io, [id = id->shared_from_this(), gone = id->peer_gone,
                         answer = std::move(answer)]() mutable {
      if (!gone) send_frame(id, std::move(answer));
      finish_link(id, false);
    });
    id->state = conn_state::closed;
    return {};
  } catch (const std::bad_alloc&) {
    return sys(ENOMEM);
  }
}

std::error_code soft_provider::disconnect(cm_id* h) {
  auto* id = as<soft_id>(h);
  try {
    const std::lock_guard lock(id->mutex);
    if (id->state == conn_state::disconnected) return {};  // the peer (or we) did already
    if (id->state != conn_state::established) return sys(EINVAL);
    asio::post(*id->io, [id = id->shared_from_this()] {
      send_frame(id, make_frame(frame_type::dreq, nullptr, 0, nullptr, 0));
      finish_link(id, false);
    });
    // rdma_cm reports the disconnect on the caller's side too.
    id->state = conn_state::disconnected;
    flush_qp_locked(*id);
    id->push_locked(cm_event_type::disconnected);
    id->push_locked(cm_event_type::timewait_exit);
    return {};
  } catch (const std::bad_alloc&) {
    return sys(ENOMEM);
  }
}

std::error_code soft_provider::migrate_id(cm_id* h, event_channel* channel) {
  auto* id = as<soft_id>(h);
  if (channel == nullptr) return sys(EINVAL);  // no synchronous mode
  auto* to = as<soft_channel>(channel);
  std::vector<soft_id*> children;
  const std::lock_guard lock(id->mutex);
  soft_channel* from = id->channel;
  if (from == to) return {};
  // Pending events of the id (and a listener's untaken connection requests)
  // move with it, in order, behind what the new channel already holds.
  const auto moved = from->queue.extract([id](const cm_event& e) {
    return e.id == handle<cm_id>(id) || (e.type == cm_event_type::connect_request &&
                                         e.id != nullptr && as<soft_id>(e.id)->listener == id);
  });
  for (const cm_event& e : moved) {
    to->queue.push(e);
    if (e.id != h) children.push_back(as<soft_id>(e.id));
  }
  id->channel = to;
  for (soft_id* child : children) {
    const std::lock_guard child_lock(child->mutex);
    child->channel = to;
  }
  return {};
}

void soft_provider::set_context(cm_id* h, std::uint64_t context) noexcept {
  auto* id = as<soft_id>(h);
  const std::lock_guard lock(id->mutex);
  id->context = context;
}

// ---- verbs (the objects without a link are in soft_datapath_objects.cpp) ----

std::error_code soft_provider::create_qp(cm_id* h, pd* p, const qp_config& config) {
  auto* id = as<soft_id>(h);
  // An id has a device once its address is resolved (active) or it is bound
  // to a local address (passive, and the ids of CONNECT_REQUESTs).
  if (id->qp || p == nullptr || config.send_cq == nullptr || config.recv_cq == nullptr ||
      id_device(h) == nullptr || config.max_send_wr == 0)
    return sys(EINVAL);
  auto qp = std::make_shared<soft_qp>();
  qp->pd = as<soft_pd>(p);
  qp->send_cq = as<soft_cq>(config.send_cq);
  qp->recv_cq = as<soft_cq>(config.recv_cq);
  qp->srq = as<soft_dp::soft_srq>(config.shared_rq);
  qp->caps = config;
  qp->num = next_qp_num_.fetch_add(1) & 0xffffffu;  // QP numbers are 24 bits
  ++qp->pd->users;
  ++qp->send_cq->qps;
  ++qp->recv_cq->qps;
  if (qp->srq != nullptr) ++qp->srq->qps;
  soft_dp::attach(qp);
  const std::lock_guard lock(id->mutex);
  id->qp = std::move(qp);
  return {};
}

void soft_provider::destroy_qp(cm_id* h) noexcept {
  auto* id = as<soft_id>(h);
  std::shared_ptr<soft_qp> qp;
  {
    const std::lock_guard lock(id->mutex);
    qp = std::move(id->qp);
  }
  if (!qp) return;
  // The progress thread may hold a reference; from here on it produces nothing.
  soft_dp::destroy(*qp);
  soft_dp::detach(qp);
  --qp->pd->users;
  --qp->send_cq->qps;
  --qp->recv_cq->qps;
  if (qp->srq != nullptr) --qp->srq->qps;
}

std::uint32_t soft_provider::qp_num(const cm_id* h) const noexcept {
  const auto* id = as<const soft_id>(h);
  return id->qp ? id->qp->num : 0;
}

std::error_code soft_provider::post_send(cm_id* h, const send_wr& wr) {
  auto* id = as<soft_id>(h);
  if (!id->qp) return sys(EINVAL);
  return soft_dp::post_send(*id->qp, wr);
}

std::error_code soft_provider::post_recv(cm_id* h, const recv_wr& wr) {
  auto* id = as<soft_id>(h);
  if (!id->qp) return sys(EINVAL);
  return soft_dp::post_recv(*id->qp, wr);
}

}  // namespace arpma::provider

#include "provider/soft/soft_provider.hpp"

#include "core/log_internal.hpp"
#include "provider/event_queue.hpp"

#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>

namespace arpma::provider {

// A real ibv_context allocation, so the handle has the layout programs expect.
struct soft_provider::device_storage {
  ibv_context context{};
};

namespace {

struct soft_channel {
  event_queue queue;
  std::atomic<int> ids{0};
};

struct soft_pd {
  std::atomic<int> qps{0};
};

struct soft_comp_channel {
  int fd = -1;
  std::atomic<int> cqs{0};
  ~soft_comp_channel() {
    if (fd >= 0) ::close(fd);
  }
};

struct soft_cq {
  soft_comp_channel* channel = nullptr;
  int cqe = 0;
  bool armed = false;
  std::atomic<int> qps{0};
};

struct soft_qp {
  soft_pd* pd = nullptr;
  soft_cq* send_cq = nullptr;
  soft_cq* recv_cq = nullptr;
  qp_config caps;
  std::uint32_t num = 0;
};

struct soft_id {
  soft_channel* channel = nullptr;
  std::uint64_t context = 0;
  sockaddr_storage dst{};
  bool addr_resolved = false;
  std::unique_ptr<soft_qp> qp;
};

template <class T, class H>
T* as(H* handle) noexcept {
  return reinterpret_cast<T*>(handle);
}

template <class H, class T>
H* handle(T* object) noexcept {
  return reinterpret_cast<H*>(object);
}

std::error_code sys(int err) noexcept { return {err, std::system_category()}; }

socklen_t length_of(const sockaddr* addr) noexcept {
  return addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
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

soft_provider::soft_provider()
    : device_(std::make_unique<device_storage>()),
      next_qp_num_(std::random_device{}() & 0x7fffffu) {}

soft_provider::~soft_provider() = default;

bool soft_provider::owns(const device* dev) const noexcept {
  return dev != nullptr && dev == &device_->context;
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
  return &device_->context;
}

// ---- connection manager ----------------------------------------------------

result<event_channel*> soft_provider::create_event_channel() {
  try {
    return handle<event_channel>(new soft_channel);
  } catch (const std::system_error& e) {
    return e.code();
  }
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

result<cm_id*> soft_provider::create_id(event_channel* channel, std::uint64_t context) {
  if (channel == nullptr) return sys(EINVAL);  // no synchronous ids here
  auto* id = new soft_id;
  id->channel = as<soft_channel>(channel);
  id->context = context;
  ++id->channel->ids;
  return handle<cm_id>(id);
}

std::error_code soft_provider::destroy_id(cm_id* h) noexcept {
  auto* id = as<soft_id>(h);
  if (id->qp) return sys(EBUSY);  // rdma_destroy_id wants the QP gone first
  --id->channel->ids;
  delete id;
  return {};
}

std::error_code soft_provider::resolve_addr(cm_id* h, const sockaddr* dst, int /*timeout_ms*/) {
  auto* id = as<soft_id>(h);
  if (dst == nullptr) return sys(EINVAL);
  if (dst->sa_family != AF_INET && dst->sa_family != AF_INET6) return sys(EAFNOSUPPORT);
  std::memcpy(&id->dst, dst, length_of(dst));
  cm_event event;
  event.id = h;
  event.context = id->context;
  // The route lookup answers at once; its verdict arrives as an event, as
  // rdma_cm reports it.
  if (const std::error_code ec = route_to(dst)) {
    event.type = cm_event_type::addr_error;
    event.status = -ec.value();
  } else {
    event.type = cm_event_type::addr_resolved;
    id->addr_resolved = true;
  }
  id->channel->queue.push(event);
  return {};
}

std::error_code soft_provider::resolve_route(cm_id* h, int /*timeout_ms*/) {
  auto* id = as<soft_id>(h);
  if (!id->addr_resolved) return sys(EINVAL);
  cm_event event;
  event.type = cm_event_type::route_resolved;
  event.id = h;
  event.context = id->context;
  id->channel->queue.push(event);
  return {};
}

device* soft_provider::id_device(const cm_id* h) const noexcept {
  return as<const soft_id>(h)->addr_resolved ? &device_->context : nullptr;
}

// ---- verbs ------------------------------------------------------------------

result<pd*> soft_provider::alloc_pd(device* dev) {
  if (!owns(dev)) return sys(EINVAL);
  return handle<pd>(new soft_pd);
}

std::error_code soft_provider::dealloc_pd(pd* h) noexcept {
  auto* p = as<soft_pd>(h);
  if (p->qps > 0) return sys(EBUSY);
  delete p;
  return {};
}

result<comp_channel*> soft_provider::create_comp_channel(device* dev) {
  if (!owns(dev)) return sys(EINVAL);
  auto* channel = new soft_comp_channel;
  channel->fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (channel->fd < 0) {
    const auto ec = sys(errno);
    delete channel;
    return ec;
  }
  return handle<comp_channel>(channel);
}

std::error_code soft_provider::destroy_comp_channel(comp_channel* h) noexcept {
  auto* channel = as<soft_comp_channel>(h);
  if (channel->cqs > 0) return sys(EBUSY);
  delete channel;
  return {};
}

int soft_provider::comp_channel_fd(const comp_channel* h) const noexcept {
  return as<const soft_comp_channel>(h)->fd;
}

result<cq*> soft_provider::create_cq(device* dev, int cqe, comp_channel* channel) {
  if (!owns(dev) || cqe <= 0) return sys(EINVAL);
  auto* c = new soft_cq;
  c->channel = as<soft_comp_channel>(channel);
  c->cqe = cqe;
  if (c->channel != nullptr) ++c->channel->cqs;
  return handle<cq>(c);
}

std::error_code soft_provider::destroy_cq(cq* h) noexcept {
  auto* c = as<soft_cq>(h);
  if (c->qps > 0) return sys(EBUSY);
  if (c->channel != nullptr) --c->channel->cqs;
  delete c;
  return {};
}

std::error_code soft_provider::req_notify_cq(cq* h, bool /*solicited_only*/) {
  as<soft_cq>(h)->armed = true;
  return {};
}

std::error_code soft_provider::create_qp(cm_id* h, pd* p, const qp_config& config) {
  auto* id = as<soft_id>(h);
  if (id->qp || p == nullptr || config.send_cq == nullptr || config.recv_cq == nullptr ||
      !id->addr_resolved)
    return sys(EINVAL);
  auto qp = std::make_unique<soft_qp>();
  qp->pd = as<soft_pd>(p);
  qp->send_cq = as<soft_cq>(config.send_cq);
  qp->recv_cq = as<soft_cq>(config.recv_cq);
  qp->caps = config;
  qp->num = next_qp_num_.fetch_add(1) & 0xffffffu;  // QP numbers are 24 bits
  ++qp->pd->qps;
  ++qp->send_cq->qps;
  ++qp->recv_cq->qps;
  id->qp = std::move(qp);
  return {};
}

void soft_provider::destroy_qp(cm_id* h) noexcept {
  auto* id = as<soft_id>(h);
  if (!id->qp) return;
  --id->qp->pd->qps;
  --id->qp->send_cq->qps;
  --id->qp->recv_cq->qps;
  id->qp.reset();
}

std::uint32_t soft_provider::qp_num(const cm_id* h) const noexcept {
  const auto* id = as<const soft_id>(h);
  return id->qp ? id->qp->num : 0;
}

}  // namespace arpma::provider

#include "fake/fake_provider.hpp"

#include "fake/fake_objects.hpp"

#include "provider/event_queue.hpp"
#include "provider/handle_cast.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <deque>

namespace arpma::test {

using prov::cm_event;
using prov::cm_event_type;

namespace {

using prov::as;
using prov::handle;

std::error_code sys(int err) { return {err, std::system_category()}; }

}  // namespace

fake_provider::fake_provider()
    : dev_(reinterpret_cast<prov::device*>(new std::uint64_t[8]{})),
      addr_events_{{cm_event_type::addr_resolved}},
      route_events_{{cm_event_type::route_resolved}},
      connect_events_{{cm_event_type::established}},
      accept_events_{{cm_event_type::established}},
      disconnect_events_{{cm_event_type::disconnected}},
      timer_([this] { timer_loop(); }) {}

fake_provider::~fake_provider() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  timer_.join();
  delete[] reinterpret_cast<std::uint64_t*>(dev_);
}

void fake_provider::fail(const std::string& call, int err, int nth) {
  const std::lock_guard lock(mutex_);
  failures_[call][counts_[call] + nth] = err;
}

void fake_provider::stall(const std::string& call, std::chrono::milliseconds duration, int nth) {
  const std::lock_guard lock(mutex_);
  stalls_[call][counts_[call] + nth] = duration;
}

void fake_provider::linger(const char* call) {
  std::optional<std::chrono::milliseconds> duration;
  {
    const std::lock_guard lock(mutex_);
    duration = take_scripted(stalls_, call, counts_[call]);
  }
  if (duration) std::this_thread::sleep_for(*duration);
}

void fake_provider::on_resolve_addr(std::vector<response> events) {
  const std::lock_guard lock(mutex_);
  addr_events_ = std::move(events);
}

void fake_provider::on_resolve_route(std::vector<response> events) {
  const std::lock_guard lock(mutex_);
  route_events_ = std::move(events);
}

void fake_provider::on_connect(std::vector<response> events) {
  const std::lock_guard lock(mutex_);
  connect_events_ = std::move(events);
}

void fake_provider::on_accept(std::vector<response> events) {
  const std::lock_guard lock(mutex_);
  accept_events_ = std::move(events);
}

void fake_provider::on_disconnect(std::vector<response> events) {
  const std::lock_guard lock(mutex_);
  disconnect_events_ = std::move(events);
}

void fake_provider::context_at_read(bool at_read) {
  const std::lock_guard lock(mutex_);
  context_at_read_ = at_read;
}

std::error_code fake_provider::enter(const char* call) {
  const std::lock_guard lock(mutex_);
  calls_.emplace_back(call);
  const int count = ++counts_[call];
  const auto err = take_scripted(failures_, call, count);
  return err ? sys(*err) : std::error_code{};
}

void fake_provider::violation(std::string what) {
  const std::lock_guard lock(mutex_);
  violations_.push_back(std::move(what));
}

std::vector<std::string> fake_provider::calls() const {
  const std::lock_guard lock(mutex_);
  return calls_;
}

std::vector<std::string> fake_provider::take_calls() {
  const std::lock_guard lock(mutex_);
  std::vector<std::string> out(calls_.begin() + static_cast<std::ptrdiff_t>(taken_), calls_.end());
  taken_ = calls_.size();
  return out;
}

std::size_t fake_provider::live_objects() const {
  const std::lock_guard lock(mutex_);
  std::size_t qps = 0;
  for (const id* i : ids_) qps += i->has_qp ? 1 : 0;
  return channels_.size() + ids_.size() + pds_.size() + comps_.size() + cqs_.size() + srqs_.size() +
         mrs_.size() + qps;
}

std::vector<std::string> fake_provider::violations() const {
  const std::lock_guard lock(mutex_);
  return violations_;
}

std::vector<fake_provider::sent> fake_provider::sent_data() const {
  const std::lock_guard lock(mutex_);
  return sent_;
}

bool fake_provider::alive(const id* i) const {
  return std::find(ids_.begin(), ids_.end(), i) != ids_.end();
}

prov::event_channel* fake_provider::channel_of(const prov::cm_id* h) const {
  const std::lock_guard lock(mutex_);
  const id* i = as<const id>(h);
  return alive(i) ? handle<prov::event_channel>(i->owner) : nullptr;
}

std::uint64_t fake_provider::context_of(const prov::cm_id* h) const {
  const std::lock_guard lock(mutex_);
  return as<const id>(h)->context;
}

std::size_t fake_provider::queued(const prov::event_channel* h) const {
  return as<const channel>(h)->queue.size();
}

int fake_provider::event_channels_created() const {
  const std::lock_guard lock(mutex_);
  return channels_created_;
}

std::vector<prov::cm_id*> fake_provider::ids() const {
  const std::lock_guard lock(mutex_);
  std::vector<prov::cm_id*> out;
  for (id* i : ids_) out.push_back(handle<prov::cm_id>(i));
  return out;
}

std::unique_ptr<fake_provider::qp_info> fake_provider::qp_of(const prov::cm_id* h) const {
  const std::lock_guard lock(mutex_);
  const id* i = as<const id>(h);
  if (std::find(ids_.begin(), ids_.end(), i) == ids_.end() || !i->has_qp) return nullptr;
  auto info = std::make_unique<qp_info>();
  const auto* send = as<cq_obj>(i->qp.send_cq);
  const auto* recv = as<cq_obj>(i->qp.recv_cq);
  info->send_cqe = send->cqe;
  info->recv_cqe = recv->cqe;
  info->same_cq = send == recv;
  info->cqs_armed = send->armed && recv->armed;
  info->shared_comp_channel = !info->same_cq && send->channel == recv->channel;
  info->config = i->qp;
  return info;
}

// ---- events ----------------------------------------------------------------

void fake_provider::push(const std::shared_ptr<channel>& target, const cm_event& event) {
  target->queue.push(event);
}

void fake_provider::schedule(id* target, const std::vector<response>& events) {
  const auto now = std::chrono::steady_clock::now();
  const std::shared_ptr<channel> ch = channels_.at(target->owner);
  bool delayed = false;
  for (const auto& r : events) {
    cm_event ev;
    ev.type = r.type;
    ev.status = r.status;
    ev.id = handle<prov::cm_id>(target);
    ev.context = target->context;
    ev.private_data_len =
        static_cast<std::uint8_t>(std::min<std::size_t>(r.private_data.size(), 255));
    std::copy_n(r.private_data.begin(), ev.private_data_len, ev.private_data.begin());
    if (r.delay.count() == 0) {
      push(ch, ev);
    } else {
      delayed_.push_back({now + r.delay, ch, ev});
      delayed = true;
    }
  }
  if (delayed) wake_.notify_all();
}

void fake_provider::deliver(prov::cm_id* h, cm_event_type type, int status) {
  const std::lock_guard lock(mutex_);
  if (type == cm_event_type::disconnected) as<id>(h)->peer_disconnected = true;
  schedule(as<id>(h), {{type, status}});
}

void fake_provider::deliver(prov::cm_id* h, const response& event) {
  const std::lock_guard lock(mutex_);
  if (event.type == cm_event_type::disconnected) as<id>(h)->peer_disconnected = true;
  schedule(as<id>(h), {event});
}

prov::cm_id* fake_provider::incoming(prov::cm_id* listener_h, std::vector<std::uint8_t> pdata,
                                     std::chrono::milliseconds delay) {
  const std::lock_guard lock(mutex_);
  auto* listener = as<id>(listener_h);
  if (!alive(listener) || !listener->listening) {
    violations_.emplace_back("incoming request on an id that is not listening");
    return nullptr;
  }
  auto* born = new id;
  born->owner = listener->owner;
  born->context = listener->context;
  born->listener = listener;
  born->addr_requested = true;  // on the listener's device
  ++born->owner->ids;
  ids_.push_back(born);
  schedule(born, {{cm_event_type::connect_request, 0, delay, std::move(pdata)}});
  return handle<prov::cm_id>(born);
}

void fake_provider::forget_events(id* target) {
  const auto about = [this, target](const cm_event& ev) {
    auto* subject = as<id>(ev.id);
    if (subject == target) return true;
    // A listener's unread CONNECT_REQUESTs go with it.
    return ev.type == cm_event_type::connect_request && alive(subject) &&
           subject->listener == target;
  };
  std::vector<cm_event> dropped;
  for (auto& [raw, ch] : channels_) {
    auto taken = ch->queue.extract(about);
    dropped.insert(dropped.end(), taken.begin(), taken.end());
  }
  for (auto it = delayed_.begin(); it != delayed_.end();) {
    if (about(it->event)) {
      dropped.push_back(it->event);
      it = delayed_.erase(it);
    } else {
      ++it;
    }
  }
  // The kernel destroys the ids of requests nobody read (ucma_cleanup_ctx_events).
  for (const auto& ev : dropped) {
    auto* subject = as<id>(ev.id);
    if (ev.type != cm_event_type::connect_request || subject == target || !alive(subject)) continue;
    if (subject->has_qp) continue;  // cannot happen: nobody knew the id
    --subject->owner->ids;
    std::erase(ids_, subject);
    delete subject;
  }
  for (id* i : ids_)
    if (i->listener == target) i->listener = nullptr;
}

void fake_provider::record_sent(const char* call, prov::cm_id* h, const void* data,
                                std::uint8_t len, const prov::conn_param& param) {
  sent record{call, h, {}, param};
  record.param.private_data = nullptr;
  if (data != nullptr) {
    const auto* bytes = static_cast<const std::uint8_t*>(data);
    record.private_data.assign(bytes, bytes + len);
  }
  sent_.push_back(std::move(record));
}

void fake_provider::timer_loop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (delayed_.empty()) {
      wake_.wait(lock);
      continue;
    }
    auto next = std::min_element(delayed_.begin(), delayed_.end(),
                                 [](const auto& a, const auto& b) { return a.due < b.due; });
    if (const auto due = next->due; due > std::chrono::steady_clock::now()) {
      wake_.wait_until(lock, due);  // a copy: the vector may grow while we wait
      continue;
    }
    push(next->target, next->event);
    delayed_.erase(next);
  }
}

// ---- provider: connection manager ------------------------------------------

result<prov::device*> fake_provider::find_device(const char* /*addr*/, bool /*remote*/) {
  if (auto ec = enter("find_device")) return ec;
  return dev_;
}

result<prov::event_channel*> fake_provider::create_event_channel() {
  if (auto ec = enter("create_event_channel")) return ec;
  auto ch = std::make_shared<channel>();
  const std::lock_guard lock(mutex_);
  ++channels_created_;
  channels_[ch.get()] = ch;
  return handle<prov::event_channel>(ch.get());
}

void fake_provider::destroy_event_channel(prov::event_channel* h) noexcept {
  (void)enter("destroy_event_channel");
  const std::lock_guard lock(mutex_);
  auto it = channels_.find(as<channel>(h));
  if (it == channels_.end()) {
    violations_.emplace_back("destroy of unknown event channel");
    return;
  }
  if (it->second->ids > 0) violations_.emplace_back("event channel destroyed with live ids");
  it->second->queue.close();
  channels_.erase(it);  // delayed events may still hold it; they are dropped
}

int fake_provider::event_channel_fd(const prov::event_channel* h) const noexcept {
  return as<const channel>(h)->queue.fd();
}

std::error_code fake_provider::get_cm_event(prov::event_channel* h, cm_event& out) {
  if (auto ec = as<channel>(h)->queue.pop(out)) return ec;  // may block: not under the mutex
  const std::lock_guard lock(mutex_);
  auto* subject = as<id>(out.id);
  if (!alive(subject)) return {};
  if (out.type == cm_event_type::connect_request) {
    subject->request_read = true;
    // rdma-core gives the new id its listener's context as the event is read.
    if (context_at_read_ && subject->listener != nullptr)
      subject->context = subject->listener->context;
  }
  if (context_at_read_) out.context = subject->context;
  return {};
}

result<prov::cm_id*> fake_provider::create_id(prov::event_channel* h, std::uint64_t context) {
  if (auto ec = enter("create_id")) return ec;
  const std::lock_guard lock(mutex_);
  auto* i = new id;
  i->owner = as<channel>(h);
  i->context = context;
  ++i->owner->ids;
  ids_.push_back(i);
  return handle<prov::cm_id>(i);
}

std::error_code fake_provider::destroy_id(prov::cm_id* h) noexcept {
  const auto scripted = enter("destroy_id");
  const std::lock_guard lock(mutex_);
  auto* i = as<id>(h);
  auto it = std::find(ids_.begin(), ids_.end(), i);
  if (it == ids_.end()) {
    violations_.emplace_back("destroy of unknown id");
    return sys(EINVAL);
  }
  if (i->has_qp) violations_.emplace_back("id destroyed before its QP");
  forget_events(i);
  --i->owner->ids;
  ids_.erase(it);
  delete i;
  return scripted;  // rdma_destroy_id frees the id even when it reports an error
}

std::error_code fake_provider::resolve_addr(prov::cm_id* h, const sockaddr* /*dst*/,
                                            int /*timeout_ms*/) {
  if (auto ec = enter("resolve_addr")) return ec;
  {
    const std::lock_guard lock(mutex_);
    as<id>(h)->addr_requested = true;
    schedule(as<id>(h), addr_events_);
  }
  linger("resolve_addr");
  return {};
}

std::error_code fake_provider::resolve_route(prov::cm_id* h, int /*timeout_ms*/) {
  if (auto ec = enter("resolve_route")) return ec;
  {
    const std::lock_guard lock(mutex_);
    schedule(as<id>(h), route_events_);
  }
  linger("resolve_route");
  return {};
}

prov::device* fake_provider::id_device(const prov::cm_id* h) const noexcept {
  return as<const id>(h)->addr_requested ? dev_ : nullptr;
}

// ---- provider: connection lifecycle ----------------------------------------

std::error_code fake_provider::bind_addr(prov::cm_id* h, const sockaddr* addr) {
  if (auto ec = enter("bind_addr")) return ec;
  const std::lock_guard lock(mutex_);
  auto* i = as<id>(h);
  if (i->port != 0 || addr == nullptr) return sys(EINVAL);
  std::uint16_t port = 0;
  if (addr->sa_family == AF_INET)
    port = ntohs(reinterpret_cast<const sockaddr_in*>(addr)->sin_port);
  else if (addr->sa_family == AF_INET6)
    port = ntohs(reinterpret_cast<const sockaddr_in6*>(addr)->sin6_port);
  else
    return sys(EAFNOSUPPORT);
  i->port = port != 0 ? port : next_port_++;
  i->addr_requested = true;  // bound to the device
  return {};
}

std::error_code fake_provider::listen(prov::cm_id* h, int /*backlog*/) {
  if (auto ec = enter("listen")) return ec;
  const std::lock_guard lock(mutex_);
  auto* i = as<id>(h);
  if (i->port == 0) return sys(EINVAL);
  i->listening = true;
  return {};
}

std::uint16_t fake_provider::local_port(const prov::cm_id* h) const noexcept {
  const std::lock_guard lock(mutex_);
  return as<const id>(h)->port;
}

std::error_code fake_provider::connect(prov::cm_id* h, const prov::conn_param& param) {
  if (auto ec = enter("connect")) return ec;
  const std::lock_guard lock(mutex_);
  auto* i = as<id>(h);
  if (i->listener != nullptr || i->listening || !i->addr_requested) return sys(EINVAL);
  if (param.private_data_len > prov::max_connect_private_data) return sys(EINVAL);
  record_sent("connect", h, param.private_data, param.private_data_len, param);
  schedule(i, connect_events_);
  return {};
}

std::error_code fake_provider::accept(prov::cm_id* h, const prov::conn_param& param) {
  if (auto ec = enter("accept")) return ec;
  const std::lock_guard lock(mutex_);
  auto* i = as<id>(h);
  if (!i->request_read || i->rejected) return sys(EINVAL);  // not an incoming request
  if (param.private_data_len > prov::max_accept_private_data) return sys(EINVAL);
  record_sent("accept", h, param.private_data, param.private_data_len, param);
  schedule(i, accept_events_);
  return {};
}

std::error_code fake_provider::reject(prov::cm_id* h, const void* data, std::uint8_t len) {
  if (auto ec = enter("reject")) return ec;
  const std::lock_guard lock(mutex_);
  auto* i = as<id>(h);
  if (!i->request_read || i->rejected) return sys(EINVAL);
  if (len > prov::max_reject_private_data) return sys(EINVAL);
  i->rejected = true;
  record_sent("reject", h, data, len, {});
  return {};
}

std::error_code fake_provider::disconnect(prov::cm_id* h) {
  if (auto ec = enter("disconnect")) return ec;
  const std::lock_guard lock(mutex_);
  // Answering the peer's DREQ (a DREP) ends the connection without a second
  // DISCONNECTED, as in rdma_cm; only a disconnect we start produces one.
  if (!as<id>(h)->peer_disconnected) schedule(as<id>(h), disconnect_events_);
  return {};
}

std::error_code fake_provider::migrate_id(prov::cm_id* h, prov::event_channel* to_h) {
  if (auto ec = enter("migrate_id")) return ec;
  const std::lock_guard lock(mutex_);
  auto* i = as<id>(h);
  auto found = channels_.find(as<channel>(to_h));
  if (found == channels_.end()) return sys(EINVAL);
  const std::shared_ptr<channel> to = found->second;
  const std::shared_ptr<channel> from = channels_.at(i->owner);
  if (to == from) return {};
  // rdma_migrate_id moves the id's queued events with it (ucma_move_events).
  const auto ours = [h](const cm_event& ev) {
    return ev.id == h && ev.type != cm_event_type::connect_request;
  };
  for (const auto& ev : from->queue.extract(ours)) push(to, ev);
  for (auto& pending : delayed_)
    if (ours(pending.event)) pending.target = to;
  --from->ids;
  ++to->ids;
  i->owner = to.get();
  return {};
}

void fake_provider::set_context(prov::cm_id* h, std::uint64_t context) noexcept {
  (void)enter("set_context");
  const std::lock_guard lock(mutex_);
  as<id>(h)->context = context;
}

// ---- provider: verbs -------------------------------------------------------

void fake_provider::set_caps(const prov::device_caps& caps) {
  const std::lock_guard lock(mutex_);
  caps_ = caps;
}

std::vector<int> fake_provider::reg_accesses() const {
  const std::lock_guard lock(mutex_);
  return reg_accesses_;
}

std::vector<fake_provider::advice_call> fake_provider::advice_calls() const {
  const std::lock_guard lock(mutex_);
  return advice_calls_;
}

prov::device_caps fake_provider::caps(const prov::device* dev) const noexcept {
  const std::lock_guard lock(mutex_);
  return dev == dev_ ? caps_ : prov::device_caps{};
}

result<prov::mr*> fake_provider::reg_mr(prov::pd* pd, void* addr, std::size_t length, int access) {
  {
    const std::lock_guard lock(mutex_);
    reg_accesses_.push_back(access);
  }
  if (auto ec = enter("reg_mr")) return ec;
  const std::lock_guard lock(mutex_);
  if (pds_.count(as<pd_obj>(pd)) == 0 || addr == nullptr || length == 0) return sys(EINVAL);
  auto* m = new mr_obj{access};
  mrs_.insert(m);
  return handle<prov::mr>(m);
}

std::error_code fake_provider::dereg_mr(prov::mr* h) noexcept {
  const auto scripted = enter("dereg_mr");
  const std::lock_guard lock(mutex_);
  auto* m = as<mr_obj>(h);
  if (mrs_.erase(m) == 0) {
    violations_.emplace_back("dereg of unknown mr");
    return sys(EINVAL);
  }
  delete m;
  return scripted;
}

std::error_code fake_provider::advise_mr(prov::mr* h, std::size_t offset, std::uint32_t length,
                                         int advice, std::uint32_t flags) {
  if (auto ec = enter("advise_mr")) return ec;
  const std::lock_guard lock(mutex_);
  if (mrs_.count(as<mr_obj>(h)) == 0) violations_.emplace_back("advise of unknown mr");
  advice_calls_.push_back({offset, length, advice, flags});
  return {};
}

result<prov::pd*> fake_provider::alloc_pd(prov::device* dev) {
  if (auto ec = enter("alloc_pd")) return ec;
  if (dev != dev_) return sys(EINVAL);
  const std::lock_guard lock(mutex_);
  auto* p = new pd_obj;
  pds_.insert(p);
  return handle<prov::pd>(p);
}

std::error_code fake_provider::dealloc_pd(prov::pd* h) noexcept {
  // A scripted error is reported after the PD is released, so tests can prove
  // the caller goes on; a PD still in use stays, as with verbs.
  const auto scripted = enter("dealloc_pd");
  const std::lock_guard lock(mutex_);
  auto* p = as<pd_obj>(h);
  if (pds_.erase(p) == 0) {
    violations_.emplace_back("dealloc of unknown pd");
    return sys(EINVAL);
  }
  if (p->qps > 0) {
    pds_.insert(p);
    return sys(EBUSY);
  }
  delete p;
  return scripted;
}

result<prov::comp_channel*> fake_provider::create_comp_channel(prov::device* dev) {
  if (auto ec = enter("create_comp_channel")) return ec;
  if (dev != dev_) return sys(EINVAL);
  auto* c = new comp_obj;
  // A semaphore: one read per CQ event, as ibv_get_cq_event takes one;
  // blocking, as rdma-core's (see provider.hpp).
  c->fd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  const std::lock_guard lock(mutex_);
  comps_.insert(c);
  return handle<prov::comp_channel>(c);
}

std::error_code fake_provider::destroy_comp_channel(prov::comp_channel* h) noexcept {
  const auto scripted = enter("destroy_comp_channel");
  const std::lock_guard lock(mutex_);
  auto* c = as<comp_obj>(h);
  if (comps_.erase(c) == 0) {
    violations_.emplace_back("destroy of unknown completion channel");
    return sys(EINVAL);
  }
  if (c->cqs > 0) violations_.emplace_back("completion channel destroyed before its CQs");
  delete c;
  return scripted;
}

int fake_provider::comp_channel_fd(const prov::comp_channel* h) const noexcept {
  return as<const comp_obj>(h)->fd;
}

result<prov::cq*> fake_provider::create_cq(prov::device* dev, int cqe, prov::comp_channel* ch) {
  if (auto ec = enter("create_cq")) return ec;
  if (dev != dev_ || cqe <= 0) return sys(EINVAL);
  const std::lock_guard lock(mutex_);
  auto* c = new cq_obj;
  c->channel = as<comp_obj>(ch);
  c->cqe = cqe;
  if (c->channel != nullptr) ++c->channel->cqs;
  cqs_.insert(c);
  return handle<prov::cq>(c);
}

std::error_code fake_provider::destroy_cq(prov::cq* h) noexcept {
  const auto scripted = enter("destroy_cq");
  const std::lock_guard lock(mutex_);
  auto* c = as<cq_obj>(h);
  if (cqs_.erase(c) == 0) {
    violations_.emplace_back("destroy of unknown cq");
    return sys(EINVAL);
  }
  if (c->qps > 0) violations_.emplace_back("cq destroyed before its QP");
  // ibv_destroy_cq waits for every event taken to be acknowledged.
  if (c->unacked > 0) violations_.emplace_back("cq destroyed with unacknowledged events");
  if (c->channel != nullptr) {
    // The kernel drops a destroyed CQ's unread events from its channel.
    for (auto dropped = std::erase(c->channel->fired, c); dropped > 0; --dropped) {
      std::uint64_t one = 0;
      (void)::read(c->channel->fd, &one, sizeof one);
    }
  }
  if (c->channel != nullptr) --c->channel->cqs;
  delete c;
  return scripted;
}

std::error_code fake_provider::req_notify_cq(prov::cq* h, bool /*solicited_only*/) {
  if (auto ec = enter("req_notify_cq")) return ec;
  const std::lock_guard lock(mutex_);
  as<cq_obj>(h)->armed = true;
  return {};
}

std::error_code fake_provider::create_qp(prov::cm_id* h, prov::pd* p,
                                         const prov::qp_config& config) {
  if (auto ec = enter("create_qp")) return ec;
  const std::lock_guard lock(mutex_);
  auto* i = as<id>(h);
  if (i->has_qp || !pds_.contains(as<pd_obj>(p)) || !cqs_.contains(as<cq_obj>(config.send_cq)) ||
      !cqs_.contains(as<cq_obj>(config.recv_cq)) ||
      (config.shared_rq != nullptr && !srqs_.contains(as<srq_obj>(config.shared_rq))))
    return sys(EINVAL);
  if (config.shared_rq != nullptr) ++as<srq_obj>(config.shared_rq)->qps;
  i->has_qp = true;
  i->qp = config;
  i->qp_pd = as<pd_obj>(p);
  i->qp_num = next_qp_num_++;
  ++i->qp_pd->qps;
  ++as<cq_obj>(config.send_cq)->qps;
  ++as<cq_obj>(config.recv_cq)->qps;
  return {};
}

void fake_provider::destroy_qp(prov::cm_id* h) noexcept {
  (void)enter("destroy_qp");
  const std::lock_guard lock(mutex_);
  auto* i = as<id>(h);
  if (!i->has_qp) {
    violations_.emplace_back("destroy of a QP that does not exist");
    return;
  }
  i->has_qp = false;
  i->outstanding.clear();  // a destroyed QP completes nothing more
  --i->qp_pd->qps;
  --as<cq_obj>(i->qp.send_cq)->qps;
  --as<cq_obj>(i->qp.recv_cq)->qps;
  if (i->qp.shared_rq != nullptr) --as<srq_obj>(i->qp.shared_rq)->qps;
}

std::uint32_t fake_provider::qp_num(const prov::cm_id* h) const noexcept {
  const std::lock_guard lock(mutex_);
  return as<const id>(h)->qp_num;
}

result<prov::srq*> fake_provider::create_srq(prov::pd* p, std::uint32_t /*max_wr*/,
                                             std::uint32_t /*max_sge*/) {
  if (auto ec = enter("create_srq")) return ec;
  const std::lock_guard lock(mutex_);
  if (!pds_.contains(as<pd_obj>(p))) return sys(EINVAL);
  auto* q = new srq_obj;
  q->pd = as<pd_obj>(p);
  ++q->pd->qps;  // keeps the PD busy, as a QP does
  srqs_.insert(q);
  return handle<prov::srq>(q);
}

std::error_code fake_provider::destroy_srq(prov::srq* h) noexcept {
  const auto scripted = enter("destroy_srq");
  const std::lock_guard lock(mutex_);
  auto* q = as<srq_obj>(h);
  if (!srqs_.contains(q)) {
    violations_.emplace_back("destroy of unknown srq");
    return sys(EINVAL);
  }
  if (q->qps > 0) {
    violations_.emplace_back("srq destroyed before its QP");
    return sys(EBUSY);
  }
  srqs_.erase(q);
  --q->pd->qps;
  delete q;
  return scripted;
}

std::error_code fake_provider::post_srq_recv(prov::srq* h, const prov::recv_wr& /*wr*/) {
  if (auto ec = enter("post_srq_recv")) return ec;
  const std::lock_guard lock(mutex_);
  return srqs_.contains(as<srq_obj>(h)) ? std::error_code{} : sys(EINVAL);
}

}  // namespace arpma::test

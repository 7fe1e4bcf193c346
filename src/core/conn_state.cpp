#include "core/conn_state.hpp"

#include "core/comp_channel_state.hpp"
#include "core/cq_dispatcher.hpp"

#include "arpma/conn_cfg.hpp"
#include "arpma/error.hpp"
#include "core/srq_state.hpp"
#include "support/log.hpp"

#include <climits>
#include <utility>

namespace arpma::detail {
namespace {

void keep_first(std::error_code& first, const std::error_code& next) {
  if (!first) first = next;
}

class blocking_flavour final : public flavour {
 public:
  [[nodiscard]] const asio::any_io_executor* async_executor(
      const conn_state&) const noexcept override {
    return nullptr;
  }
  [[nodiscard]] asio::any_io_executor loop(const conn_state&) const override { return {}; }
  void route_events(conn_state&) const override {}
  void stop_events(conn_state&) const noexcept override {}
};

class async_flavour final : public flavour {
 public:
  [[nodiscard]] const asio::any_io_executor* async_executor(
      const conn_state& state) const noexcept override {
    return &state.ex;
  }
  [[nodiscard]] asio::any_io_executor loop(const conn_state& state) const override {
    return state.cm_events ? state.cm_events->executor() : asio::any_io_executor();
  }
  void route_events(conn_state& state) const override {
    state.cm_events->attach(state.token, &state, state.ex);
  }
  void stop_events(conn_state& state) const noexcept override {
    if (state.cm_events) state.cm_events->detach(state.token);
  }
};

}  // namespace

const flavour& flavour::blocking() noexcept {
  static const blocking_flavour instance;
  return instance;
}

const flavour& flavour::async() noexcept {
  static const async_flavour instance;
  return instance;
}

std::error_code destroy_cq(provider::provider& prov, cq_state& c) noexcept {
  std::error_code first;
  if (c.waiter) retire(*std::exchange(c.waiter, nullptr));  // before its channel goes
  if (c.cq != nullptr) {
    const auto ec = prov.destroy_cq(c.cq);
    if (ec) ARPMA_LOG_FAILURE("destroy cq", ec);
    keep_first(first, ec);
    c.cq = nullptr;
  }
  if (c.own_channel != nullptr) {
    const auto ec = prov.destroy_comp_channel(c.own_channel);
    if (ec) ARPMA_LOG_FAILURE("destroy completion channel", ec);
    keep_first(first, ec);
    c.own_channel = nullptr;
  }
  return first;
}

// rpma_cq_new: own channel unless one is shared, CQ, then arm it.
std::error_code make_cq(provider::provider& prov, provider::device* dev, std::uint32_t size,
                        provider::comp_channel* shared, cq_state& out) {
  cq_state c;
  provider::comp_channel* channel = shared;
  if (channel == nullptr) {
    auto created = prov.create_comp_channel(dev);
    if (!created) {
      ARPMA_LOG_FAILURE("create completion channel", created.error());
      return created.error();
    }
    c.own_channel = channel = created.value();
  }
  const int cqe = size > INT_MAX ? INT_MAX : static_cast<int>(size);
  auto cq = prov.create_cq(dev, cqe, channel);
  if (!cq) {
    ARPMA_LOG_FAILURE("create cq", cq.error());
    (void)destroy_cq(prov, c);
    return cq.error();
  }
  c.cq = cq.value();
  if (const auto ec = prov.req_notify_cq(c.cq, false)) {
    ARPMA_LOG_FAILURE("arm cq", ec);
    (void)destroy_cq(prov, c);
    return ec;
  }
  out = c;
  return {};
}

std::error_code conn_state::join_attached_comp_channel(comp_channel_state& common,
                                                       provider::device* dev) {
  // Its events are taken on its io_context, and a CQ lives on its channel's device.
  // Compared by io_context, not executor: a strand of the same one is fine.
  if (common.native == nullptr || common.peer->dev != dev || !cm_events ||
      &asio::query(common.ex, asio::execution::context) !=
          &asio::query(cm_events->executor(), asio::execution::context)) {
    ARPMA_LOG(log_level::error,
              "the completion channel belongs to another device or io_context than the "
              "connection");
    return make_error_code(errc::invalid_argument);
  }
  attached_comp_channel = common.shared_from_this();
  return {};
}

namespace {

// Whether `w` was given an object at all (alive or not).
template <class T>
bool names_an_object(const std::weak_ptr<T>& w) noexcept {
  return w.owner_before(std::weak_ptr<T>{}) || std::weak_ptr<T>{}.owner_before(w);
}

}  // namespace

std::error_code conn_state::build_queues(const conn_cfg& cfg) {
  auto& p = prov();
  provider::device* dev = p.id_device(id);
  const std::shared_ptr<const srq_state> cfg_srq = cfg.srq.lock();
  const std::shared_ptr<comp_channel_state> common = cfg.completion_channel.lock();
  if ((!cfg_srq && names_an_object(cfg.srq)) ||
      (!common && names_an_object(cfg.completion_channel))) {
    ARPMA_LOG(log_level::error, "the cfg's SRQ or completion channel is closed");
    return make_error_code(errc::invalid_argument);
  }
  // The SRQ's RCQ replaces the connection's (as librpma's rpma_conn_cfg_set_srq); its channel is
  // its own.
  provider::cq* srq_rcq = cfg_srq ? cfg_srq->rcq.cq : nullptr;
  if (cfg.shared_completion_channel && srq_rcq != nullptr) {
    ARPMA_LOG(log_level::error,
              "connection shared completion channel cannot be used when the shared RQ has "
              "its own RCQ");
    return make_error_code(errc::invalid_argument);
  }
  if (common) {
    if (auto ec = join_attached_comp_channel(*common, dev)) return ec;
  } else if (cfg.shared_completion_channel) {
    auto created = p.create_comp_channel(dev);
    if (!created) {
      ARPMA_LOG_FAILURE("create shared completion channel", created.error());
      return created.error();
    }
    conn_comp_channel = created.value();
  }
  provider::comp_channel* on =
      attached_comp_channel ? attached_comp_channel->native : conn_comp_channel;
  if (auto ec = make_cq(p, dev, cfg.cq_size, on, cq)) return ec;
  if (srq_rcq == nullptr && cfg.rcq_size > 0)
    if (auto ec = make_cq(p, dev, cfg.rcq_size, on, rcq)) return ec;
  if (attached_comp_channel) {
    attached_comp_channel->add_cq(cq.cq);
    if (rcq.cq != nullptr) attached_comp_channel->add_cq(rcq.cq);
  }
  provider::qp_config qp;
  qp.send_cq = cq.cq;
  qp.recv_cq = srq_rcq != nullptr ? srq_rcq : rcq.cq != nullptr ? rcq.cq : cq.cq;
  qp.shared_rq = cfg_srq ? cfg_srq->srq : nullptr;
  qp.max_send_wr = cfg.sq_size;
  qp.max_recv_wr = cfg.rq_size;
  if (auto ec = p.create_qp(id, peer->pd, qp)) {
    ARPMA_LOG_FAILURE("create qp", ec);
    return ec;
  }
  has_qp = true;
  srq = cfg_srq;
  return {};
}

std::error_code conn_state::destroy() noexcept {
  if (!peer) return {};
  auto& p = prov();
  std::error_code first;
  watchers_.gone_all();
  if (dispatcher) std::exchange(dispatcher, nullptr)->close();  // operations in flight end
  if (flush_raw) keep_first(first, flush_raw->dereg());         // first, as librpma's flush object
  flush_raw.reset();
  if (has_qp) {
    p.destroy_qp(id);
    has_qp = false;
  }
  srq.reset();  // the SRQ goes with its last user (it owns its RCQ)
  if (attached_comp_channel) {
    attached_comp_channel->remove_cq(rcq.cq);
    attached_comp_channel->remove_cq(cq.cq);
  }
  keep_first(first, destroy_cq(p, rcq));
  keep_first(first, destroy_cq(p, cq));
  attached_comp_channel.reset();  // after its CQs: the last user destroys the channel
  if (conn_comp_channel != nullptr) {
    const auto ec = p.destroy_comp_channel(conn_comp_channel);
    if (ec) ARPMA_LOG_FAILURE("destroy shared completion channel", ec);
    keep_first(first, ec);
    conn_comp_channel = nullptr;
  }
  if (id != nullptr) {
    // Whoever listens to the token (the C++ object, or the operation that
    // resolves a request) hears no more of an id that is going.
    if (cm_events) cm_events->detach(token);
    flavour_ = &flavour::blocking();  // nothing of it is left to route or run
    // An incoming request nobody accepted is refused, so the client hears
    // REJECTED now rather than timing out; the id is destroyed either way
    // (librpma only rejects, leaking the id).
    if (passive && phase == conn_phase::request) {
      const auto ec = p.reject(id, nullptr, 0);
      if (ec) ARPMA_LOG_FAILURE("reject", ec);
      keep_first(first, ec);
    }
    const auto ec = p.destroy_id(id);
    if (ec) ARPMA_LOG_FAILURE("destroy id", ec);
    keep_first(first, ec);
    id = nullptr;
  }
  cm_events.reset();
  peer.reset();
  return first;
}

void conn_state::attach() {
  // Again when attached: the executor its events go to may have changed
  // (a request connected on another strand than it was made on).
  flavour_ = &flavour::async();
  flavour_->route_events(*this);
}

std::error_code conn_state::move_to(std::shared_ptr<cm_channel> to) {
  if (to == cm_events) return {};
  if (auto ec = prov().migrate_id(id, to->native())) {
    ARPMA_LOG_FAILURE("migrate id", ec);
    return ec;
  }
  flavour_->stop_events(*this);
  cm_events = std::move(to);
  flavour_->route_events(*this);
  return {};
}

std::error_code conn_state::start_connect(const void* pdata, std::uint8_t len) {
  provider::conn_param param;
  param.private_data = pdata;
  param.private_data_len = len;
  const auto ec = passive ? prov().accept(id, param) : prov().connect(id, param);
  if (ec) {
    ARPMA_LOG_FAILURE(passive ? "accept" : "connect", ec);
    return ec;
  }
  phase = conn_phase::connecting;
  return {};
}

void conn_state::note(const provider::cm_event& event) {
  using type = provider::cm_event_type;
  switch (event.type) {
    case type::established:
      phase = conn_phase::connected;
      // The active side learns the server's private data here (ESTABLISHED carries the REP's
      // private data).
      if (private_data.empty() && event.private_data_len > 0)
        private_data.assign(event.private_data.begin(),
                            event.private_data.begin() + event.private_data_len);
      break;
    case type::disconnected:
      // A passive side can hear the peer's DREQ before its ESTABLISHED: the
      // client's RTU was lost or overtaken (seen once on rxe, a client that
      // disconnects as soon as it is connected), and rdma_cm then skips
      // ESTABLISHED (its id goes from CONNECT to DISCONNECT). A DREQ is only
      // sent from ESTABLISHED, so the peer was connected: the connection was
      // established, and is over. The accept succeeds; this event follows.
      if (passive && phase == conn_phase::connecting) {
        ARPMA_LOG(log_level::notice, "DISCONNECTED before ESTABLISHED: the peer's RTU was lost");
        phase = conn_phase::connected;
      }
      // The peer asked (DREQ): answer at once, so its own disconnect completes
      // now instead of after the CM's DREQ timeout (seconds on rxe). librpma
      // leaves this to the program's rpma_conn_disconnect after CLOSED, which
      // stays harmless (sent once).
      closed = true;
      if (phase == conn_phase::connected && !disconnect_sent && id != nullptr) {
        if (const auto ec = prov().disconnect(id))
          ARPMA_LOG(log_level::debug, "answering a disconnect: %s", ec.message().c_str());
        disconnect_sent = true;
      }
      break;
    case type::timewait_exit:
    case type::connect_error:
    case type::device_removal:
    case type::rejected:
    case type::unreachable: closed = true; break;
    default: break;
  }
}

void conn_state::on_cm_event(const provider::cm_event& event) {
  note(event);  // at arrival: whoever waits for the end sees it before the event is taken
  inbox.push_back(event);
  watchers_.poke_all();
}

std::error_code connect_failure(const provider::cm_event& event) noexcept {
  using type = provider::cm_event_type;
  switch (event.type) {
    case type::rejected: return std::make_error_code(std::errc::connection_refused);
    case type::unreachable: return std::make_error_code(std::errc::host_unreachable);
    case type::connect_error: return std::make_error_code(std::errc::connection_aborted);
    case type::disconnected:
    case type::timewait_exit: return std::make_error_code(std::errc::connection_reset);
    case type::device_removal: return std::make_error_code(std::errc::no_such_device);
    default: return {};
  }
}

}  // namespace arpma::detail

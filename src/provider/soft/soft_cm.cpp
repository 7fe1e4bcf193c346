// The soft provider's connection manager: REQ, REP, REJ, RTU and DREQ on a
// link (docs/soft-provider.md), the listener's accept loop with its bounds on
// links that have not sent their REQ, and the active side's connect.
#include "provider/soft/soft_cm.hpp"

#include "provider/handle_cast.hpp"
#include "provider/soft/soft_traffic.hpp"
#include "support/log.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <boost/asio/read.hpp>

#include <array>

namespace arpma::provider::soft_cm {

using namespace soft_wire;  // NOLINT(google-build-using-namespace): the frame vocabulary
using soft_link::close_link;
using soft_link::errno_of;
using soft_link::finish_link;
using soft_link::flush_qp_locked;
using soft_link::link_failed;
using soft_link::open_tx;
using soft_link::qp_ready_locked;
using soft_link::rx_next;
using soft_link::send_frame;
using soft_link::soft_id;

namespace {

/// A connection refused at TCP level (nobody listens on the port) is
/// rejected as the IB CM rejects a request for a port without a listener:
/// IB_CM_REJ_INVALID_SERVICE_ID, the status rdma_cm reports on rxe (rdma-core
/// 44, Linux 6.1, measured in the Soft-RoCE guest).
constexpr int rej_invalid_service_id = 8;

constexpr auto connect_timeout = std::chrono::seconds(20);

}  // namespace

frame make_conn_frame(frame_type type, const conn_param& param, std::uint32_t qp_num) {
  std::array<std::uint8_t, conn_fixed_size> fixed{param.responder_resources, param.initiator_depth,
                                                  param.retry_count, param.rnr_retry_count};
  put_u32(fixed.data() + 4, qp_num);
  return make_frame(type, fixed.data(), fixed.size(), param.private_data, param.private_data_len);
}

frame make_rej_frame(std::uint16_t reason, const void* private_data, std::size_t len) {
  std::array<std::uint8_t, rej_fixed_size> fixed{};
  put_u16(fixed.data(), reason);
  return make_frame(frame_type::rej, fixed.data(), fixed.size(), private_data, len);
}

void tune(int fd) noexcept {
  const int on = 1;
  const int idle = 5;
  const int interval = 1;
  const int count = 5;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  (void)::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

namespace {

std::uint16_t local_port_of(const tcp::socket& socket) noexcept {
  boost::system::error_code ec;
  const auto ep = socket.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

}  // namespace

void await_rtu(const id_ptr& id) {
  if (id->link_closed) return;
  if (!id->timer) id->timer.emplace(*id->io);
  id->timer->expires_after(id->limits.handshake);
  id->timer->async_wait([id](const boost::system::error_code& ec) {
    if (ec || id->link_closed) return;
    bool waiting = false;
    {
      const std::lock_guard lock(id->mutex);
      waiting = id->state == conn_state::rep_sent;
    }
    if (waiting) link_failed(id, ETIMEDOUT);
  });
}

namespace {

/// What a connection-manager frame did to its id.
struct cm_outcome {
  bool valid = true;
  bool half_close = false;
  bool keep_reading = true;
};

/// Applies a CM frame to the id's state. Called with the id's mutex held.
cm_outcome apply_cm_frame_locked(const id_ptr& id, frame_type type,
                                 std::span<const std::uint8_t> payload) {
  const std::uint8_t* body = payload.data();
  const std::size_t size = payload.size();
  cm_outcome out;
  switch (type) {
    case frame_type::rep:
      if (id->state != conn_state::req_sent) return {.valid = false};
      id->state = conn_state::established;
      id->peer_resources = body[0];
      id->peer_depth = body[1];
      // RTU goes out before the application can post anything after it.
      send_frame(id, make_frame(frame_type::rtu, nullptr, 0, nullptr, 0));
      qp_ready_locked(id);
      id->push_locked(cm_event_type::established, 0, body + conn_fixed_size,
                      size - conn_fixed_size);
      break;
    case frame_type::rej:
      if (id->state != conn_state::req_sent) return {.valid = false};
      id->state = conn_state::closed;
      id->push_locked(cm_event_type::rejected, get_u16(body), body + rej_fixed_size,
                      size - rej_fixed_size);
      out.keep_reading = false;
      break;
    case frame_type::rtu:
      if (id->state != conn_state::rep_sent) return {.valid = false};
      if (id->timer) id->timer->cancel();  // the wait for it is over
      id->state = conn_state::established;
      qp_ready_locked(id);
      id->push_locked(cm_event_type::established);
      break;
    case frame_type::dreq:
      if (id->state == conn_state::established) {
        id->state = conn_state::disconnected;
        flush_qp_locked(*id);
        id->push_locked(cm_event_type::disconnected);
        id->push_locked(cm_event_type::timewait_exit);
        out.half_close = true;
      } else if (id->state != conn_state::disconnected) {
        out.valid = false;  // a disconnect crossing ours is fine, any other is not
      }
      break;
    default: out.valid = false; break;  // REQ: only as the first frame of a link
  }
  return out;
}

}  // namespace

rx_next on_cm_frame(const id_ptr& id, frame_type type, std::span<const std::uint8_t> payload) {
  cm_outcome out;
  {
    const std::lock_guard lock(id->mutex);
    out = apply_cm_frame_locked(id, type, payload);
  }
  if (!out.valid) {
    link_failed(id, EPROTO);
    return rx_next::stop;
  }
  if (!out.keep_reading) {
    close_link(id);
    return rx_next::stop;
  }
  if (out.half_close) finish_link(id, false);
  return rx_next::more;
}

namespace {

// ---- passive side: connections arriving at a listener -------------------------

/// A TCP connection accepted by a listener that has not yet sent its REQ.
struct incoming {
  incoming(tcp::socket s, const id_ptr& l)
      : socket(std::move(s)), timer(socket.get_executor()), listener(l) {
    ++l->half_open;
  }
  incoming(const incoming&) = delete;
  incoming& operator=(const incoming&) = delete;
  /// The progress thread's (or, once it has stopped, the engine's teardown).
  ~incoming() {
    if (const id_ptr l = listener.lock()) --l->half_open;
  }
  tcp::socket socket;
  asio::steady_timer timer;
  std::weak_ptr<soft_id> listener;
  std::chrono::milliseconds handshake{soft_provider::limits{}.handshake};
  header_bytes header{};
  std::vector<std::uint8_t> payload;

  void drop() {
    boost::system::error_code ignored;
    socket.close(ignored);
    timer.cancel();
  }
};

/// A valid REQ: a new id on the listener's channel, with its context, and a
/// CONNECT_REQUEST carrying the private data (rdma_cm semantics).
void deliver_request(const std::shared_ptr<incoming>& in) {
  const id_ptr listener = in->listener.lock();
  if (!listener) return in->drop();
  auto child = std::make_shared<soft_id>();
  child->listener = listener.get();
  child->io = listener->io;
  child->state = conn_state::req_received;
  child->on_device = true;
  child->port = listener->port;  // an accepted socket's own, without a getsockname
  child->socket.emplace(std::move(in->socket));
  child->rnr_timeout = listener->rnr_timeout;
  child->limits = listener->limits;
  if (listener->totals != nullptr) child->count_in(*listener->totals);
  open_tx(*child);
  child->timer.emplace(child->socket->get_executor());
  in->timer.cancel();
  {
    const std::lock_guard lock(listener->mutex);
    if (listener->destroyed || listener->state != conn_state::listening) {
      close_link(child);
      return;
    }
    const std::lock_guard child_lock(child->mutex);
    child->channel = listener->channel;
    child->context = listener->context;
    child->peer_resources = in->payload[0];
    child->peer_depth = in->payload[1];
    child->self = child;
    cm_event event;
    event.type = cm_event_type::connect_request;
    event.id = handle<cm_id>(child.get());
    event.context = listener->context;
    event.private_data_len = static_cast<std::uint8_t>(in->payload.size() - conn_fixed_size);
    std::memcpy(event.private_data.data(), in->payload.data() + conn_fixed_size,
                event.private_data_len);
    child->channel->queue.push(event);
  }
  soft_link::await_peer(child);  // the client waits for the REP
}

void read_request(const std::shared_ptr<incoming>& in) {
  in->timer.expires_after(in->handshake);
  in->timer.async_wait([in](const boost::system::error_code& ec) {
    if (!ec) in->drop();
  });
  asio::async_read(in->socket, asio::buffer(in->header),
                   [in](const boost::system::error_code& ec, std::size_t /*n*/) {
                     if (!ec) soft_traffic::note();
                     const auto h = ec ? std::nullopt : parse_header(in->header);
                     if (!h || h->type != frame_type::req) return in->drop();
                     in->payload.resize(h->length);
                     asio::async_read(
                         in->socket, asio::buffer(in->payload),
                         [in](const boost::system::error_code& ec2, std::size_t /*n*/) {
                           if (ec2) return in->drop();
                           deliver_request(in);
                         });
                   });
}

}  // namespace

void accept_next(const id_ptr& listener) {
  if (listener->link_closed) return;
  listener->acceptor->async_accept(
      [listener](const boost::system::error_code& ec, tcp::socket socket) {
        if (listener->link_closed || ec == asio::error::operation_aborted) return;
        if (ec) {
          // Out of descriptors or memory: try again a little later (said once
          // per episode).
          ARPMA_LOG(listener->accept_failing ? log_level::debug : log_level::warning,
                    "soft provider: accept: %s; retrying", ec.message().c_str());
          listener->accept_failing = true;
          listener->timer->expires_after(std::chrono::milliseconds(100));
          listener->timer->async_wait([listener](const boost::system::error_code& e) {
            if (!e) accept_next(listener);
          });
          return;
        }
        listener->accept_failing = false;
        soft_traffic::note();
        if (listener->half_open >= listener->limits.half_open_per_listener) {
          // As many links as allowed have not sent their REQ yet: no more
          // memory or deadline for another one (it is closed unread).
          boost::system::error_code ignored;
          socket.close(ignored);
          return accept_next(listener);
        }
        // No tune(): Linux copies the listener's options (soft_provider::listen set them)
        // into every socket it accepts, five setsockopt calls fewer per connection.
        auto in = std::make_shared<incoming>(std::move(socket), listener);
        in->handshake = listener->limits.handshake;
        read_request(in);
        accept_next(listener);
      });
}

// ---- active side -------------------------------------------------------------

void start_connect(const id_ptr& id, const tcp::endpoint& peer, frame request) {
  if (id->link_closed) return;  // destroyed before the progress thread got here
  id->socket.emplace(*id->io);
  id->timer.emplace(*id->io);
  id->timer->expires_after(connect_timeout);
  id->timer->async_wait([id](const boost::system::error_code& ec) {
    // (a wait that completed just as the connect did must not close the link)
    if (ec || id->link_closed || id->connect_done) return;
    id->connect_timed_out = true;
    boost::system::error_code ignored;
    id->socket->close(ignored);
  });
  id->socket->async_connect(peer, [id, protocol = peer.protocol(), request = std::move(request)](
                                      const boost::system::error_code& ec) mutable {
    id->connect_done = true;
    id->timer->cancel();
    bool proceed = false;
    {
      const std::lock_guard lock(id->mutex);
      if (id->destroyed || id->link_closed || id->state != conn_state::connecting) {
        // Destroyed meanwhile: nobody to tell, nothing to send.
      } else if (ec) {
        id->state = conn_state::closed;
        const int err = id->connect_timed_out ? ETIMEDOUT : errno_of(ec);
        // Nobody listens there: the remote CM would reject, so the same
        // program hears the same on both providers. No route or no
        // answer stays UNREACHABLE.
        if (err == ECONNREFUSED)
          id->push_locked(cm_event_type::rejected, rej_invalid_service_id);
        else
          id->push_locked(cm_event_type::unreachable, -err);
      } else {
        id->state = conn_state::req_sent;
        id->port = local_port_of(*id->socket);
        proceed = true;
      }
    }
    if (!proceed) return close_link(id);
    soft_link::watch_for_reading_only(*id, protocol);  // the connect registered EPOLLOUT
    tune(id->socket->native_handle());
    open_tx(*id);
    send_frame(id, std::move(request));
    soft_link::await_peer(id);  // the server answers the REQ first
  });
}

void teardown(const id_ptr& id, conn_state state, bool peer_gone) {
  switch (state) {
    case conn_state::idle:
    case conn_state::bound:
    case conn_state::listening:
    case conn_state::connecting:
    case conn_state::req_sent: return close_link(id);
    case conn_state::req_received:
      // As ib_destroy_cm_id: an unanswered request is rejected.
      if (!peer_gone) send_frame(id, make_rej_frame(rej_consumer_defined, nullptr, 0));
      break;
    case conn_state::rep_sent:
    case conn_state::established:
      send_frame(id, make_frame(frame_type::dreq, nullptr, 0, nullptr, 0));
      break;
    case conn_state::disconnected:
    case conn_state::closed: break;  // what had to be sent is queued already
  }
  finish_link(id, true);
}

bool private_data_ok(const void* data, std::uint8_t len, std::uint8_t max) noexcept {
  return len <= max && (len == 0 || data != nullptr);
}

}  // namespace arpma::provider::soft_cm

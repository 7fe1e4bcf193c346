// Over 700 lines (the progress engine, the link, the connection manager and
// the provider façade in one file): its split by concept is issue 19 (item 6).
#include "provider/soft/soft_provider.hpp"

#include "provider/event_queue.hpp"
#include "provider/handle_cast.hpp"
#include "provider/soft/soft_datapath.hpp"
#include "provider/soft/soft_device.hpp"
#include "provider/soft/soft_memory.hpp"
#include "provider/soft/soft_wire.hpp"
#include "support/log.hpp"

#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>
#include <optional>
#include <random>
#include <thread>
#include <vector>

namespace arpma::provider {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// The device handle: a real ibv_context (soft_device.hpp).
struct soft_provider::device_storage {
  soft_device device;
};

// The progress thread: it plays the NIC. Every socket, acceptor and timer of
// the connection manager is used only on this thread once it has been handed
// over (application threads post to it).
class soft_provider::engine {
 public:
  engine() : guard_(io_.get_executor()), thread_([this] { run(); }) {}
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;
  engine(engine&&) = delete;
  engine& operator=(engine&&) = delete;
  // Handlers never block, so stop() ends run() after at most one handler; the
  // pending ones are destroyed with the io_context, releasing their ids.
  ~engine() {
    guard_.reset();
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  asio::io_context& io() noexcept { return io_; }

  /// False in a child forked after the thread started: the thread is not
  /// there to join, and the epoll instance is shared with the parent.
  [[nodiscard]] bool ours() const noexcept { return owner_ == ::getpid(); }

 private:
  void run() noexcept {
    (void)::pthread_setname_np(::pthread_self(), "arpma-soft");
    for (;;) {
      try {
        io_.run();
        return;
      } catch (const std::exception& e) {
        ARPMA_LOG(log_level::error, "soft provider progress thread: %s", e.what());
      }
    }
  }

  pid_t owner_ = ::getpid();
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
  std::thread thread_;
};

namespace {

using namespace soft_wire;  // NOLINT(google-build-using-namespace): the frame vocabulary

// ---- wire protocol (docs/soft-provider.md) ---------------------------------

/// IB CM reject reasons the soft provider sends.
constexpr std::uint16_t rej_consumer_defined = 28;
/// A connection refused at TCP level (nobody listens on the port) is
/// rejected as the IB CM rejects a request for a port without a listener:
/// IB_CM_REJ_INVALID_SERVICE_ID, the status rdma_cm reports on rxe (rdma-core
/// 44, Linux 6.1, measured in the Soft-RoCE guest).
constexpr int rej_invalid_service_id = 8;

constexpr auto connect_timeout = std::chrono::seconds(20);
constexpr auto linger_timeout = std::chrono::seconds(5);

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

// ---- objects ------------------------------------------------------------------

struct soft_channel {
  explicit soft_channel(std::error_code& ec) noexcept : queue(ec) {}
  event_queue queue;
};

using soft_dp::soft_cq;
using soft_dp::soft_pd;
using soft_dp::soft_qp;

/// Where an id is in the connection lifecycle (IB CM states, simplified).
enum class conn_state : std::uint8_t {
  idle,          ///< nothing yet (or only address/route resolution)
  bound,         ///< bind_addr: an acceptor bound to a local address
  listening,     ///< listen: accepting connections
  connecting,    ///< active: TCP connect in flight
  req_sent,      ///< active: REQ sent, waiting for REP or REJ
  req_received,  ///< passive: REQ received, waiting for accept or reject
  rep_sent,      ///< passive: REP sent, waiting for RTU
  established,   ///< both: ESTABLISHED delivered
  disconnected,  ///< both: DISCONNECTED delivered (after being established)
  closed,        ///< no connection: rejected, unreachable, or answered with a reject
};

/// What to do with the socket once the queued frames are written.
enum class after_write : std::uint8_t { nothing, shutdown_send };

/// A cm id. The application holds it through `self` until destroy_id; the
/// progress thread's handlers hold shared_ptrs, so a handler in flight never
/// touches a destroyed id, and `destroyed` (under `mutex`) stops every event
/// once destroy_id has returned.
/// A frame, or the rest of one, waiting for the progress thread's writer.
struct tx_frame {
  frame bytes;
  bool ends_read = false;      ///< the last piece of a READ response
  std::size_t read_bytes = 0;  ///< bytes of a READ response, in the provider's total
};

struct soft_id : std::enable_shared_from_this<soft_id> {
  soft_id() = default;
  soft_id(const soft_id&) = delete;
  soft_id& operator=(const soft_id&) = delete;
  /// What the link still held behind an RNR wait leaves the provider's total.
  ~soft_id() {
    if (held_total != nullptr && stalled_bytes > 0) held_total->fetch_sub(stalled_bytes);
    if (read_total != nullptr)
      for (const tx_frame& f : out) read_total->fetch_sub(f.read_bytes);
  }

  // Application threads only (or set before the id is published).
  sockaddr_storage dst{};
  bool addr_resolved = false;
  bool route_resolved = false;
  /// Shared with the progress thread, which takes a reference under `mutex`
  /// for each data frame; destroy_qp stops it from producing completions.
  std::shared_ptr<soft_qp> qp;
  /// Passive id of a CONNECT_REQUEST: its listener. Compared, never followed.
  const soft_id* listener = nullptr;
  /// The progress thread's io_context once the id has sockets.
  asio::io_context* io = nullptr;

  // Shared between the application's threads and the progress thread.
  mutable std::mutex mutex;
  soft_channel* channel = nullptr;
  std::uint64_t context = 0;
  conn_state state = conn_state::idle;
  bool destroyed = false;
  bool on_device = false;  ///< bound to a local address, or a passive id
  bool peer_gone = false;  ///< passive: the active side left before an answer
  int peer_gone_status = 0;
  std::uint16_t port = 0;
  std::shared_ptr<soft_id> self;
  /// responder_resources and initiator_depth: ours (connect / accept) and
  /// the peer's (its REQ / REP); the QP's READ limits follow from them.
  std::uint8_t own_resources = 0;
  std::uint8_t own_depth = 0;
  std::uint8_t peer_resources = 0;
  std::uint8_t peer_depth = 0;

  // The progress thread only (after hand-off).
  std::optional<tcp::acceptor> acceptor;
  std::optional<tcp::socket> socket;
  std::optional<asio::steady_timer> timer;
  bool link_closed = false;
  bool connect_done = false;
  bool connect_timed_out = false;
  bool accept_failing = false;
  bool rx_waiting = false;  ///< an async_wait for readability is pending
  /// Requests waiting behind a SEND that found no receive (RNR); responses
  /// keep flowing meanwhile, as the two directions of an RC QP are independent.
  /// Under rx_mutex.
  std::deque<std::pair<frame_type, frame>> stalled;
  std::size_t stalled_bytes = 0;
  bool reading_paused = false;
  std::chrono::steady_clock::time_point rnr_deadline;
  std::optional<asio::steady_timer> rnr_timer;
  std::chrono::milliseconds rnr_timeout{};
  soft_provider::limits limits;
  std::atomic<std::size_t>* held_total = nullptr;  ///< the provider's, for limits.held_bytes_total
  std::size_t half_open = 0;                       ///< listener: incoming links before their REQ

  // The link's receiving side (under rx_mutex, either thread; pump_locked).
  std::mutex rx_mutex;
  std::vector<std::uint8_t> rx;
  std::size_t rx_begin = 0;
  std::size_t rx_end = 0;
  bool rx_data_seen = false;
  bool rx_large_writes = false;                   ///< the last frame was a large WRITE
  std::uint64_t rx_frames = 0;                    ///< frames consumed so far
  bool frame_watch = false;                       ///< frame_timer watches a partial frame
  std::optional<asio::steady_timer> frame_timer;  ///< the progress thread's
  int rx_error = 0;  ///< the link failed (errno); the progress thread acts on it

  // The link's sending side, for any thread: application threads write their
  // requests straight to the socket when nothing is queued (no hop through
  // the progress thread), else frames queue for the progress thread.
  std::mutex tx_mutex;
  int tx_fd = -1;          ///< the socket while it is open and connected
  bool tx_sealed = false;  ///< half-close requested: no frame is accepted any more
  std::deque<tx_frame> out;
  std::size_t reads_queued = 0;                    ///< READ responses in `out`, not all written yet
  std::atomic<std::size_t>* read_total = nullptr;  ///< the provider's queued READ response bytes
  std::atomic<std::size_t>* read_peak = nullptr;   ///< and the most of them at once
  std::size_t out_offset = 0;                      ///< bytes of out.front() already written
  std::size_t in_flight = 0;                       ///< frames of `out` in the current async_write
  std::uint32_t ack_pending = 0;                ///< requests executed, acknowledgement not yet sent
  bool ack_ticker = false;                      ///< ack_timer runs
  int ack_idle = 0;                             ///< ticks in a row that found nothing to send
  std::optional<asio::steady_timer> ack_timer;  ///< the progress thread's
  bool writing = false;
  after_write then = after_write::nothing;

  /// Queues an event of this id on its channel, unless the id is destroyed.
  /// Called with `mutex` held.
  void push_locked(cm_event_type type, int status = 0, const std::uint8_t* private_data = nullptr,
                   std::size_t len = 0) {
    if (destroyed) return;
    cm_event event;
    event.type = type;
    event.id = reinterpret_cast<cm_id*>(this);
    event.context = context;
    event.status = status;
    event.private_data_len = static_cast<std::uint8_t>(len);
    if (len > 0) std::memcpy(event.private_data.data(), private_data, len);
    channel->queue.push(event);
  }
};

std::error_code sys(int err) noexcept { return {err, std::system_category()}; }

std::error_code sys(const boost::system::error_code& ec) noexcept {
  return {ec.value(), std::system_category()};
}

/// The errno an rdma_cm event would carry for a failed socket operation.
int errno_of(const boost::system::error_code& ec) noexcept {
  if (ec == asio::error::eof) return ECONNRESET;
  if (ec.category() == boost::system::system_category() && ec.value() > 0) return ec.value();
  return EIO;
}

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

/// Low latency, and a dead peer host noticed within seconds.
void tune(tcp::socket& socket) noexcept {
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  socket.set_option(asio::socket_base::keep_alive(true), ignored);
  const int idle = 5;
  const int interval = 1;
  const int count = 5;
  const int fd = socket.native_handle();
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

std::uint16_t local_port_of(const tcp::socket& socket) noexcept {
  boost::system::error_code ec;
  const auto ep = socket.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

// ---- the progress thread's side of a link -------------------------------------

using id_ptr = std::shared_ptr<soft_id>;

/// How often a SEND waiting for a receive looks again (IB's RNR NAK timer is
/// of this order: librpma's min_rnr_timer 12 is 0.64 ms).
constexpr auto rnr_retry_interval = std::chrono::milliseconds(1);
/// Requests held behind a waiting SEND before the link stops being read (TCP
/// flow control then holds the peer back).
constexpr std::size_t max_stalled_bytes = std::size_t{16} << 20;
/// What holding one frame costs besides its payload (its deque slot, the
/// vector and the allocator's header), counted against max_stalled_bytes so
/// that a flood of empty frames is bounded as tightly as a flood of full ones.
constexpr std::size_t stalled_frame_overhead = 64;

std::size_t stalled_cost(std::size_t payload) noexcept { return payload + stalled_frame_overhead; }

void write_next(const id_ptr& id);

/// Closes everything the id has on the wire; idempotent.
void close_link(const id_ptr& id) {
  id->link_closed = true;
  {
    // After this no application thread writes to the descriptor.
    const std::lock_guard lock(id->tx_mutex);
    id->tx_fd = -1;
  }
  boost::system::error_code ignored;
  if (id->socket) id->socket->close(ignored);
  if (id->acceptor) id->acceptor->close(ignored);
  if (id->timer) id->timer->cancel();
  if (id->rnr_timer) id->rnr_timer->cancel();
  if (id->ack_timer) id->ack_timer->cancel();
  if (id->frame_timer) id->frame_timer->cancel();
}

/// The connection is over: the QP's outstanding work completes with
/// WR_FLUSH_ERR (verbs' error state). Called with the id's mutex held.
void flush_qp_locked(soft_id& id) {
  if (id.qp) soft_dp::to_error(*id.qp);
}

/// The link broke (EOF, reset, a write error, or a frame we do not accept):
/// tell the application what rdma_cm would, then close the link.
void link_failed(const id_ptr& id, int err) {
  {
    const std::lock_guard lock(id->mutex);
    switch (id->state) {
      case conn_state::req_sent:
      case conn_state::rep_sent:
        id->state = conn_state::closed;
        id->push_locked(cm_event_type::unreachable, -err);
        break;
      case conn_state::req_received:
        // Nothing to say until the application answers (accept reports it).
        id->peer_gone = true;
        id->peer_gone_status = err;
        break;
      case conn_state::established:
        id->state = conn_state::disconnected;
        flush_qp_locked(*id);
        id->push_locked(cm_event_type::disconnected);
        id->push_locked(cm_event_type::timewait_exit);
        break;
      default: break;
    }
  }
  close_link(id);
}

using byte_span = std::span<const std::uint8_t>;

/// Writes what it can of `parts`, in order, without blocking, in one call;
/// the number of bytes written (a hard error writes nothing more: the
/// progress thread's write reports it).
std::size_t send_now(int fd, const std::array<byte_span, 3>& parts) noexcept {
  std::size_t total = 0;
  for (const byte_span& p : parts) total += p.size();
  std::size_t done = 0;
  while (done < total) {
    std::array<iovec, 3> iov{};
    std::size_t count = 0;
    std::size_t skip = done;
    for (const byte_span& p : parts) {
      if (skip >= p.size()) {
        skip -= p.size();
        continue;
      }
      iov[count++] = {const_cast<std::uint8_t*>(p.data() + skip), p.size() - skip};
      skip = 0;
    }
    msghdr message{};
    message.msg_iov = iov.data();
    message.msg_iovlen = count;
    const ssize_t n = ::sendmsg(fd, &message, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  return done;
}

bool is_ack(const frame& f) noexcept {
  return f.size() == header_size + 4 && f[5] == static_cast<std::uint8_t>(frame_type::ack);
}

/// Queues `f` behind the frames being written; consecutive acknowledgements
/// not yet handed to the socket become one. Called with tx_mutex held.
void enqueue(soft_id& id, frame f, bool response = false, bool ends_read = false) {
  const std::size_t last = id.out.size() - 1;
  const bool untouched =
      !id.out.empty() && last >= id.in_flight && (last > 0 || id.out_offset == 0);
  if (untouched && is_ack(f) && is_ack(id.out.back().bytes)) {
    std::uint8_t* count = id.out.back().bytes.data() + header_size;
    put_u32(count, get_u32(count) + get_u32(f.data() + header_size));
    return;
  }
  if (ends_read) ++id.reads_queued;
  const std::size_t read_bytes = response ? f.size() : 0;
  if (read_bytes > 0 && id.read_total != nullptr) {
    const std::size_t now = id.read_total->fetch_add(read_bytes) + read_bytes;
    std::size_t peak = id.read_peak->load();
    while (now > peak && !id.read_peak->compare_exchange_weak(peak, now)) {
    }
  }
  id.out.push_back({std::move(f), ends_read, read_bytes});
}

/// The writer is done with out.front(). Called with tx_mutex held.
void pop_written(soft_id& id) {
  const tx_frame& f = id.out.front();
  if (f.ends_read) --id.reads_queued;
  if (f.read_bytes > 0 && id.read_total != nullptr) id.read_total->fetch_sub(f.read_bytes);
  id.out.pop_front();
}

/// Nothing queued will be written any more. Called with tx_mutex held.
void drop_queued(soft_id& id) {
  while (!id.out.empty()) pop_written(id);
}

bool is_read_response(const frame& f) noexcept {
  return f.size() >= header_size && f[5] == static_cast<std::uint8_t>(frame_type::read_resp);
}

/// The acknowledgements not yet sent, as one ACK frame (empty when none).
/// Called with tx_mutex held.
frame take_acks(soft_id& id) {
  if (id.ack_pending == 0) return {};
  std::array<std::uint8_t, 4> count{};
  put_u32(count.data(), id.ack_pending);
  id.ack_pending = 0;
  return make_frame(frame_type::ack, count.data(), count.size(), nullptr, 0);
}

/// Appends registered memory to `f` without faulting on a page the
/// application unmapped since it registered it.
bool append_region(frame& f, byte_span tail) {
  const std::size_t at = f.size();
  f.resize(at + tail.size());
  return soft_mem::copy_from_region(f.data() + at, tail.data(), tail.size());
}

/// Registered memory that cannot be read any more: the frame whose header is
/// out cannot be completed, so the link takes nothing more and fails.
void tail_unreadable(const id_ptr& id) {
  id->tx_sealed = true;
  asio::post(*id->io, [id] { link_failed(id, EFAULT); });
}

/// Puts `acks`, `f` and `tail` (any may be empty) on the wire after every
/// frame before them: written at once when nothing is queued, else queued
/// for the progress thread (what is queued of `tail` is copied: it is only
/// borrowed). Called with `lock` (tx_mutex) held; may release it.
void transmit(const id_ptr& id, std::unique_lock<std::mutex>& lock, frame acks, frame f,
              byte_span tail = {}) {
  std::size_t sent = 0;
  if (!id->writing && id->out.empty()) {
    sent = send_now(id->tx_fd, {byte_span(acks), byte_span(f), tail});
    if (sent == acks.size() + f.size() + tail.size()) {
      frame_cache::give_back(std::move(f));
      frame_cache::give_back(std::move(acks));
      return;
    }
  }
  const bool start = !id->writing && id->out.empty();
  const bool response = is_read_response(f);
  // Whatever is left, in order; the first piece may be partly written.
  std::array<frame*, 2> pieces{&acks, &f};
  for (frame* piece : pieces) {
    if (sent >= piece->size()) {
      sent -= piece->size();
      continue;
    }
    if (piece == &f && !tail.empty() && !append_region(*piece, tail)) return tail_unreadable(id);
    tail = {};
    if (start && id->out.empty()) id->out_offset = sent;
    sent = 0;
    enqueue(*id, std::move(*piece), piece == &f && response, piece == &f && response);
  }
  if (!tail.empty()) {
    if (start && id->out.empty()) id->out_offset = sent;
    frame rest;
    if (!append_region(rest, tail)) return tail_unreadable(id);
    enqueue(*id, std::move(rest), response, response);
  }
  if (!start) return;
  id->writing = true;
  lock.unlock();
  asio::post(*id->io, [id] { write_next(id); });
}

/// Sends a frame on the id's link, from any thread, in order with every frame
/// sent before; dropped when the link is not open or is half-closed. An ACK
/// is only counted: it rides along with the next frame (a reply usually
/// follows at once) or goes out at the next flush_acks.
void send_frame(const id_ptr& id, frame f, byte_span tail = {}) {
  std::unique_lock lock(id->tx_mutex);
  if (id->tx_fd < 0 || id->tx_sealed) return;
  if (is_ack(f)) {
    id->ack_pending += get_u32(f.data() + header_size);
    return;
  }
  transmit(id, lock, take_acks(*id), std::move(f), tail);
}

/// Sends the acknowledgements still pending, alone.
void flush_acks(const id_ptr& id) {
  std::unique_lock lock(id->tx_mutex);
  if (id->ack_pending == 0 || id->tx_fd < 0 || id->tx_sealed) return;
  transmit(id, lock, take_acks(*id), {});
}

/// Acknowledgements an application thread left pending are sent by the
/// progress thread within `ack_delay` if nothing carries them sooner. The
/// ticker runs while they keep coming, so a busy link costs one timer per
/// tick, not a wake-up per frame.
constexpr auto ack_delay = std::chrono::milliseconds(1);
constexpr int ack_idle_ticks = 100;

void ack_tick(const id_ptr& id) {
  id->ack_timer->expires_after(ack_delay);
  id->ack_timer->async_wait([id](const boost::system::error_code& ec) {
    std::unique_lock lock(id->tx_mutex);
    frame acks;
    if (!ec && !id->link_closed && id->tx_fd >= 0 && !id->tx_sealed) acks = take_acks(*id);
    id->ack_idle = acks.empty() ? id->ack_idle + 1 : 0;
    id->ack_ticker = !ec && !id->link_closed && id->ack_idle < ack_idle_ticks;
    const bool again = id->ack_ticker;
    if (!acks.empty()) transmit(id, lock, std::move(acks), {});
    if (again) ack_tick(id);
  });
}

void ensure_ack_ticker(const id_ptr& id) {
  {
    const std::lock_guard lock(id->tx_mutex);
    if (id->ack_pending == 0 || id->ack_ticker) return;
    id->ack_ticker = true;
    id->ack_idle = 0;
  }
  try {
    asio::post(*id->io, [id] {
      if (!id->ack_timer) id->ack_timer.emplace(*id->io);
      ack_tick(id);
    });
  } catch (const std::bad_alloc&) {
    const std::lock_guard lock(id->tx_mutex);
    id->ack_ticker = false;  // the next poll flushes, or tries again
  }
}

/// The progress thread's writer: everything queued, in one gathered write.
void write_next(const id_ptr& id) {
  std::vector<asio::const_buffer> buffers;
  {
    const std::lock_guard lock(id->tx_mutex);
    if (id->link_closed || id->out.empty()) {
      drop_queued(*id);
      id->out_offset = 0;
      id->writing = false;
      if (!id->link_closed && id->then == after_write::shutdown_send) {
        boost::system::error_code ignored;
        id->socket->shutdown(tcp::socket::shutdown_send, ignored);
      }
      return;
    }
    id->writing = true;
    id->in_flight = std::min<std::size_t>(id->out.size(), 64);
    for (std::size_t i = 0; i < id->in_flight; ++i)
      buffers.emplace_back(asio::buffer(id->out[i].bytes) + (i == 0 ? id->out_offset : 0));
  }
  asio::async_write(*id->socket, buffers,
                    [id](const boost::system::error_code& ec, std::size_t /*n*/) {
                      {
                        const std::lock_guard lock(id->tx_mutex);
                        for (; id->in_flight > 0 && !id->out.empty(); --id->in_flight)
                          pop_written(*id);
                        id->out_offset = 0;
                        if (ec) drop_queued(*id);
                      }
                      if (ec && !id->link_closed) return link_failed(id, errno_of(ec));
                      write_next(id);
                    });
}

/// Half-closes the link once the queued frames are out; the read side runs
/// until the peer closes too. With `bounded`, the link is closed after the
/// linger timeout whatever the peer does (for ids nobody owns any more).
void finish_link(const id_ptr& id, bool bounded) {
  if (id->link_closed || !id->socket) return;
  bool idle = false;
  {
    const std::lock_guard lock(id->tx_mutex);
    id->tx_sealed = true;
    id->then = after_write::shutdown_send;
    idle = !id->writing;
  }
  if (idle) write_next(id);
  if (bounded && id->timer) {
    id->timer->expires_after(linger_timeout);
    id->timer->async_wait([id](const boost::system::error_code& ec) {
      if (!ec) close_link(id);
    });
  }
}

/// The link is open for frames from any thread (after connect or accept).
void open_tx(soft_id& id) {
  const std::lock_guard lock(id.tx_mutex);
  id.tx_fd = id.socket->native_handle();
}

/// How a QP writes its frames: through the id's link while the id lives.
std::function<void(frame, byte_span)> link_of(const id_ptr& id) {
  return [weak = std::weak_ptr<soft_id>(id)](frame f, byte_span tail) {
    if (const id_ptr alive = weak.lock()) send_frame(alive, std::move(f), tail);
  };
}

void pump_from_application(const id_ptr& id);

std::size_t queued_reads(const id_ptr& id) {
  const std::lock_guard lock(id->tx_mutex);
  return id->reads_queued;
}

/// The QP of an id that just became established can carry data. Called with
/// the id's mutex held.
void qp_ready_locked(const id_ptr& id) {
  if (!id->qp) return;
  const std::weak_ptr<soft_id> weak(id);
  soft_dp::link_ops ops;
  ops.send = link_of(id);
  ops.progress = std::make_shared<const std::function<void()>>([weak] {
    if (const id_ptr alive = weak.lock()) pump_from_application(alive);
  });
  ops.queued_reads = [weak]() -> std::size_t {
    const id_ptr alive = weak.lock();
    return alive ? queued_reads(alive) : 0;
  };
  ops.read_budget_spent = [weak] {
    const id_ptr alive = weak.lock();
    return alive && alive->read_total != nullptr &&
           alive->read_total->load() >= alive->limits.queued_read_bytes_total;
  };
  // What each end may have unanswered: IB's initiator depth and responder
  // resources, whichever of the two ends offers less (make_ready caps them).
  ops.max_reads_out = std::min(id->own_depth, id->peer_resources);
  ops.max_reads_in = std::min(id->own_resources, id->peer_depth);
  soft_dp::make_ready(*id->qp, std::move(ops));
}

/// The passive side's answer is out (progress thread): an RTU that does not
/// come within the handshake deadline fails the link (UNREACHABLE, as an IB
/// REP timeout), so a peer cannot keep an accepted id half-open for ever.
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

// ---- receiving -------------------------------------------------------------------
//
// One receiver per link, run under rx_mutex by the progress thread (every
// frame) or by an application thread polling a CQ of the link's QP (data
// frames only, no thread hop; whatever it cannot finish it hands over).

/// What the receiver does after a frame.
enum class rx_next : std::uint8_t {
  more,       ///< go on
  stop,       ///< the link is closed, or reading is paused
  hand_over,  ///< application thread: leave this (unconsumed) to the progress thread
};

enum class rx_mode : std::uint8_t { progress, application };

/// Frames buffered before anything has been seen, and once data flows.
constexpr std::size_t rx_small = 512;
constexpr std::size_t rx_large = std::size_t{256} << 10;
/// A buffer grown past this for one large frame goes back to rx_large once empty.
constexpr std::size_t rx_keep = std::size_t{1} << 20;

void pump(const id_ptr& id);

std::size_t socket_holds(soft_id& id);

/// Room in the buffer for a frame of `frame_size` bytes at its start.
void make_room(soft_id& id, std::size_t frame_size) {
  const std::size_t pending = id.rx_end - id.rx_begin;
  if (id.rx_begin > 0 && (id.rx_end == id.rx.size() || id.rx.size() - id.rx_begin < frame_size)) {
    std::memmove(id.rx.data(), id.rx.data() + id.rx_begin, pending);
    id.rx_begin = 0;
    id.rx_end = pending;
  }
  // Grown as bytes arrive, never on a header's word: a full buffer grows to
  // hold what the socket has received (at least double), up to the frame's
  // end, so a header announcing 8 MiB costs nothing until the bytes are here.
  std::size_t want = std::max(id.rx.size(), id.rx_data_seen ? rx_large : rx_small);
  const std::size_t frame_end = id.rx_begin + frame_size;
  if (id.rx_end == want && want < frame_end)
    want = std::min(frame_end, std::max(2 * want, id.rx_end + socket_holds(id)));
  if (id.rx.size() < want) id.rx.resize(want);
}

enum class fill_result : std::uint8_t { data, would_block, failed };

/// Reads what the socket has without blocking. A closed stream or an error
/// is remembered in rx_error (an application thread cannot act on it).
fill_result fill(soft_id& id, std::size_t frame_size, std::size_t limit) {
  make_room(id, frame_size);
  ssize_t n = 0;
  {
    // The descriptor stays open during the call (close_link takes the lock).
    const std::lock_guard lock(id.tx_mutex);
    if (id.tx_fd < 0) return fill_result::would_block;
    const std::size_t want = std::min(id.rx.size() - id.rx_end, limit);
    n = ::recv(id.tx_fd, id.rx.data() + id.rx_end, want, MSG_DONTWAIT);
  }
  if (n > 0) {
    id.rx_end += static_cast<std::size_t>(n);
    return fill_result::data;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return fill_result::would_block;
  id.rx_error = n == 0 ? ECONNRESET : errno;
  return fill_result::failed;
}

rx_next handle_frame(const id_ptr& id, frame_type type, std::span<const std::uint8_t> payload);

/// A data frame on an application thread: only what needs neither a timer
/// nor a socket operation (nothing stalled, no RNR wait, no failure).
rx_next handle_inline(const id_ptr& id, frame_type type, std::span<const std::uint8_t> payload) {
  if (!is_data(type) || (soft_dp::is_request(type) && !id->stalled.empty()))
    return rx_next::hand_over;
  std::shared_ptr<soft_qp> qp;
  {
    const std::lock_guard lock(id->mutex);
    if (id->state != conn_state::established) return rx_next::hand_over;
    qp = id->qp;
  }
  if (!qp) return rx_next::hand_over;
  switch (soft_dp::on_frame(*qp, type, payload)) {
    case soft_dp::verdict::done: return rx_next::more;
    case soft_dp::verdict::rnr_wait: return rx_next::hand_over;  // nothing happened yet
    case soft_dp::verdict::protocol_error: id->rx_error = EPROTO; return rx_next::hand_over;
  }
  return rx_next::hand_over;
}

/// WRITEs this large have their payload read straight into the target MR
/// when it is all in the socket already: one copy (the kernel's), as a NIC.
constexpr std::size_t direct_min = std::size_t{16} << 10;

bool large_write(const frame_header& h) noexcept {
  return h.type == frame_type::write && h.length >= direct_min;
}

/// Reads `n` bytes the socket holds into `dst`; false (rx_error set) if it
/// does not deliver them.
bool receive_into(soft_id& id, std::uint8_t* dst, std::size_t n) {
  const std::lock_guard lock(id.tx_mutex);
  std::size_t got = 0;
  while (got < n && id.tx_fd >= 0) {
    const ssize_t r = ::recv(id.tx_fd, dst + got, n - got, MSG_DONTWAIT);
    if (r > 0) {
      got += static_cast<std::size_t>(r);
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else {
      id.rx_error = r == 0 ? ECONNRESET : (errno == EAGAIN ? EIO : errno);
      return false;
    }
  }
  return got == n;
}

std::size_t socket_holds(soft_id& id) {
  const std::lock_guard lock(id.tx_mutex);
  int n = 0;
  return id.tx_fd >= 0 && ::ioctl(id.tx_fd, FIONREAD, &n) == 0 && n > 0
             ? static_cast<std::size_t>(n)
             : 0;
}

/// A large WRITE whose header and target are buffered (nothing after it)
/// and whose payload is in the socket: placed without going through the
/// buffer. False when it is not eligible (the ordinary path then buffers it,
/// and refuses it if it must).
bool place_directly(const id_ptr& id, std::uint32_t length) {
  const std::uint8_t* fixed = id->rx.data() + id->rx_begin + header_size;
  const std::size_t buffered = id->rx_end - id->rx_begin - header_size - remote_size;
  const std::size_t data_len = length - remote_size;
  if (socket_holds(*id) < data_len - buffered || !id->stalled.empty()) return false;
  std::shared_ptr<soft_qp> qp;
  {
    const std::lock_guard lock(id->mutex);
    if (id->state != conn_state::established || !id->qp) return false;
    qp = id->qp;
  }
  if (!soft_dp::executes_requests(*qp)) return false;
  auto memory = soft_dp::lock_memory();
  std::uint8_t* dst = soft_dp::write_destination(*qp, get_u32(fixed), get_u64(fixed + 4), data_len);
  // A target the application unmapped: the buffered path refuses it (NAK).
  if (dst == nullptr || !soft_mem::copy_to_region(dst, fixed + remote_size, buffered)) return false;
  const bool whole = receive_into(*id, dst + buffered, data_len - buffered);
  memory.unlock();
  id->rx_begin = id->rx_end = 0;
  ++id->rx_frames;
  id->rx_data_seen = true;                // data flows: the buffer's floor is rx_large from now on
  if (whole) soft_dp::write_placed(*qp);  // else the link fails: nothing to acknowledge
  return true;
}

void watch_frame(const id_ptr& id, std::uint64_t seen);

/// The socket has nothing more: a frame left incomplete in the buffer gets
/// a deadline (limits::frame), on the progress thread. Called with rx_mutex
/// held, so the watch is started once.
rx_next drained(const id_ptr& id) {
  if (id->rx_end > id->rx_begin && !id->frame_watch && id->io != nullptr) {
    id->frame_watch = true;
    try {
      asio::post(*id->io, [id, seen = id->rx_frames] { watch_frame(id, seen); });
    } catch (const std::bad_alloc&) {
      id->frame_watch = false;  // the next drained() tries again
    }
  }
  return rx_next::more;
}

/// Fails the link when the frame that was incomplete at `seen` frames is
/// still incomplete a limits::frame later; watches the next one otherwise.
void watch_frame(const id_ptr& id, std::uint64_t seen) {
  if (id->link_closed) return;
  if (!id->frame_timer) id->frame_timer.emplace(*id->io);
  id->frame_timer->expires_after(id->limits.frame);
  id->frame_timer->async_wait([id, seen](const boost::system::error_code& ec) {
    if (ec || id->link_closed) return;
    bool expired = false;
    std::uint64_t now = 0;
    {
      const std::lock_guard lock(id->rx_mutex);
      const bool partial = id->rx_end > id->rx_begin;
      // Held frames (an RNR wait) stop the reading, not the peer.
      expired = partial && id->rx_frames == seen && !id->reading_paused;
      id->frame_watch = partial && !expired;
      now = id->rx_frames;
    }
    if (expired) return link_failed(id, ETIMEDOUT);
    if (id->frame_watch) watch_frame(id, now);
  });
}

/// The progress thread acts on a failure, wherever it was seen.
bool failed_link(const id_ptr& id, rx_mode mode) {
  if (id->rx_error == 0) return false;
  if (mode == rx_mode::progress) link_failed(id, id->rx_error);
  return true;
}

/// Consumes the buffered frames and reads more until the socket has nothing.
/// Called with rx_mutex held.
rx_next pump_locked(const id_ptr& id, rx_mode mode) {
  for (;;) {
    if (failed_link(id, mode))
      return mode == rx_mode::progress ? rx_next::stop : rx_next::hand_over;
    if (mode == rx_mode::progress && id->link_closed) return rx_next::stop;
    const std::size_t avail = id->rx_end - id->rx_begin;
    std::size_t need = header_size;
    if (avail >= header_size) {
      header_bytes bytes{};
      std::memcpy(bytes.data(), id->rx.data() + id->rx_begin, header_size);
      const auto h = parse_header(bytes);
      if (!h) {
        id->rx_error = EPROTO;
        continue;
      }
      need = header_size + h->length;
      if (avail < need && large_write(*h)) {
        // Read no further than the target, then the payload goes where it belongs.
        if (avail < header_size + remote_size) {
          if (fill(*id, need, header_size + remote_size - avail) == fill_result::would_block)
            return drained(id);
          continue;
        }
        if (place_directly(id, h->length)) continue;
      }
      if (avail >= need) {
        const std::span<const std::uint8_t> payload(id->rx.data() + id->rx_begin + header_size,
                                                    h->length);
        if (is_data(h->type)) id->rx_data_seen = true;
        const rx_next next = mode == rx_mode::progress ? handle_frame(id, h->type, payload)
                                                       : handle_inline(id, h->type, payload);
        if (next == rx_next::hand_over) return next;
        id->rx_begin += need;
        ++id->rx_frames;
        if (id->rx_begin == id->rx_end) {
          id->rx_begin = id->rx_end = 0;
          // A link keeps what ordinary traffic needs, not its largest frame.
          if (id->rx.size() > rx_keep) std::vector<std::uint8_t>(rx_large).swap(id->rx);
        }
        id->rx_large_writes = large_write(*h);
        if (next == rx_next::stop) return next;
        continue;
      }
    }
    // After a large WRITE the next frame is likely one too: read its header
    // and target alone, so its payload can go straight to the MR.
    const bool header_first = id->rx_large_writes && avail < header_size;
    const std::size_t limit =
        header_first ? header_size + remote_size - avail : std::numeric_limits<std::size_t>::max();
    if (fill(*id, need, limit) == fill_result::would_block) return drained(id);
  }
}

void wait_readable(const id_ptr& id) {
  if (id->rx_waiting || id->link_closed) return;
  id->rx_waiting = true;
  id->socket->async_wait(tcp::socket::wait_read, [id](const boost::system::error_code& ec) {
    id->rx_waiting = false;
    if (id->link_closed) return;
    if (ec) return link_failed(id, errno_of(ec));
    pump(id);
  });
}

/// The progress thread's receiver: runs until the socket is drained, then
/// waits for it to become readable again.
void pump(const id_ptr& id) {
  rx_next next = rx_next::stop;
  {
    const std::lock_guard lock(id->rx_mutex);
    if (id->reading_paused) return;
    next = pump_locked(id, rx_mode::progress);
  }
  flush_acks(id);  // everything readable is executed: acknowledge it in one frame
  if (next == rx_next::more) wait_readable(id);
}

/// An application thread polling a CQ moves its link's frames itself; what
/// it cannot finish goes to the progress thread.
void pump_from_application(const id_ptr& id) {
  std::unique_lock lock(id->rx_mutex, std::try_to_lock);
  if (!lock.owns_lock()) {
    // The progress thread is at it: let it finish (a spinning poller could
    // otherwise keep it from the CPU it needs to release the receiver).
    std::this_thread::yield();
    return;
  }
  if (id->reading_paused) return;
  // What the last poll executed and no reply carried is acknowledged now.
  flush_acks(id);
  const rx_next next = pump_locked(id, rx_mode::application);
  lock.unlock();
  ensure_ack_ticker(id);
  if (next != rx_next::hand_over) return;
  try {
    asio::post(*id->io, [id] { pump(id); });
  } catch (const std::bad_alloc&) {
    // The progress thread's own wait for readability takes over.
  }
}

// ---- data frames -------------------------------------------------------------------

void drain_stalled(const id_ptr& id);

void schedule_rnr_retry(const id_ptr& id) {
  if (!id->rnr_timer) id->rnr_timer.emplace(*id->io);
  id->rnr_timer->expires_after(rnr_retry_interval);
  id->rnr_timer->async_wait([id](const boost::system::error_code& ec) {
    if (!ec && !id->link_closed) drain_stalled(id);
  });
}

/// Keeps a copy of the request for later and goes on reading (responses must
/// flow); past the bound, reading pauses and TCP holds the peer back.
rx_next stall(const id_ptr& id, frame_type type, std::span<const std::uint8_t> payload) {
  const std::size_t cost = stalled_cost(payload.size());
  id->stalled.emplace_back(type, frame(payload.begin(), payload.end()));
  id->stalled_bytes += cost;
  const std::size_t total = id->held_total != nullptr ? id->held_total->fetch_add(cost) + cost : 0;
  if (id->stalled_bytes <= max_stalled_bytes && total <= id->limits.held_bytes_total)
    return rx_next::more;
  id->reading_paused = true;
  return rx_next::stop;
}

std::shared_ptr<soft_qp> qp_of(const id_ptr& id) {
  const std::lock_guard lock(id->mutex);
  return id->qp;
}

/// Executes the stalled requests in order until one waits again.
void drain_stalled(const id_ptr& id) {
  const std::shared_ptr<soft_qp> qp = qp_of(id);
  bool resume = false;
  {
    const std::lock_guard lock(id->rx_mutex);
    while (!id->stalled.empty()) {
      const auto& [type, payload] = id->stalled.front();
      auto verdict = qp ? soft_dp::on_frame(*qp, type, payload) : soft_dp::verdict::done;
      if (verdict == soft_dp::verdict::rnr_wait) {
        if (std::chrono::steady_clock::now() < id->rnr_deadline) {
          flush_acks(id);
          return schedule_rnr_retry(id);
        }
        soft_dp::rnr_exhausted(*qp);  // what follows is dropped by the failed QP
      }
      if (verdict == soft_dp::verdict::protocol_error) return link_failed(id, EPROTO);
      const std::size_t cost = stalled_cost(payload.size());
      id->stalled_bytes -= cost;
      if (id->held_total != nullptr) id->held_total->fetch_sub(cost);
      id->stalled.pop_front();
      id->rnr_deadline = std::chrono::steady_clock::now() + id->rnr_timeout;
    }
    resume = id->reading_paused;
    id->reading_paused = false;
  }
  flush_acks(id);
  if (resume) pump(id);
}

/// A data-path frame: executed against the id's QP (a request), or retiring
/// its send queue (a response).
rx_next on_data(const id_ptr& id, frame_type type, std::span<const std::uint8_t> payload) {
  conn_state state = conn_state::idle;
  std::shared_ptr<soft_qp> qp;
  {
    const std::lock_guard lock(id->mutex);
    state = id->state;
    qp = id->qp;
  }
  // After our disconnect the QP is in error: what still arrives is dropped.
  if (state == conn_state::disconnected || !qp) return rx_next::more;
  if (state != conn_state::established) {
    link_failed(id, EPROTO);
    return rx_next::stop;
  }
  if (soft_dp::is_request(type) && !id->stalled.empty()) return stall(id, type, payload);
  switch (soft_dp::on_frame(*qp, type, payload)) {
    case soft_dp::verdict::done: return rx_next::more;
    case soft_dp::verdict::protocol_error: link_failed(id, EPROTO); return rx_next::stop;
    case soft_dp::verdict::rnr_wait: {
      id->rnr_deadline = std::chrono::steady_clock::now() + id->rnr_timeout;
      const rx_next next = stall(id, type, payload);
      schedule_rnr_retry(id);
      return next;
    }
  }
  return rx_next::more;
}

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

/// One complete, well-formed frame arrived on an id's link (progress thread).
rx_next handle_frame(const id_ptr& id, frame_type type, std::span<const std::uint8_t> payload) {
  if (is_data(type)) return on_data(id, type, payload);
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
  child->port = local_port_of(in->socket);
  child->socket.emplace(std::move(in->socket));
  child->rnr_timeout = listener->rnr_timeout;
  child->limits = listener->limits;
  child->held_total = listener->held_total;
  child->read_total = listener->read_total;
  child->read_peak = listener->read_peak;
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
  pump(child);
}

void read_request(const std::shared_ptr<incoming>& in) {
  in->timer.expires_after(in->handshake);
  in->timer.async_wait([in](const boost::system::error_code& ec) {
    if (!ec) in->drop();
  });
  asio::async_read(in->socket, asio::buffer(in->header),
                   [in](const boost::system::error_code& ec, std::size_t /*n*/) {
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
        if (listener->half_open >= listener->limits.half_open_per_listener) {
          // As many links as allowed have not sent their REQ yet: no more
          // memory or deadline for another one (it is closed unread).
          boost::system::error_code ignored;
          socket.close(ignored);
          return accept_next(listener);
        }
        tune(socket);
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
  id->socket->async_connect(
      peer, [id, request = std::move(request)](const boost::system::error_code& ec) mutable {
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
        tune(*id->socket);
        open_tx(*id);
        send_frame(id, std::move(request));
        pump(id);
      });
}

/// The progress thread's part of destroy_id, given the state the id was in:
/// what rdma_cm's destroy would send, then the link closes (bounded).
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

}  // namespace

soft_provider::soft_provider()
    : device_(std::make_unique<device_storage>()),
      next_qp_num_(std::random_device{}() & 0x7fffffu) {}

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
  if (!engine_) engine_ = std::make_unique<engine>();
  return *engine_;
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

result<cm_id*> soft_provider::create_id(event_channel* channel, std::uint64_t context) {
  if (channel == nullptr) return sys(EINVAL);  // no synchronous ids here
  auto id = std::make_shared<soft_id>();
  id->channel = as<soft_channel>(channel);
  id->context = context;
  id->rnr_timeout = rnr_timeout_;
  id->limits = limits_;
  id->held_total = &held_bytes_;
  id->read_total = &queued_read_bytes_;
  id->read_peak = &queued_read_peak_;
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

// The soft provider's cm id (soft_id) and the objects around it: what the
// connection manager (soft_cm.cpp), the link (soft_link_tx.cpp,
// soft_link_rx.cpp) and the provider's façade (soft_provider.cpp) share.
#pragma once

#include "provider/event_queue.hpp"
#include "provider/provider.hpp"
#include "provider/soft/soft_datapath.hpp"
#include "provider/soft/soft_provider.hpp"
#include "provider/soft/soft_wire.hpp"
#include "support/page_buffer.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <system_error>
#include <utility>
#include <vector>

namespace arpma::provider::soft_link {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using soft_wire::frame;
using soft_wire::frame_type;

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

/// A frame, or the rest of one, waiting for the progress thread's writer.
struct tx_frame {
  frame bytes;
  bool ends_read = false;      ///< the last piece of a READ response
  std::size_t read_bytes = 0;  ///< bytes of a READ response, in the provider's total
  /// Or, with `borrowed` > 0 (and `bytes` empty), that many bytes of
  /// registered memory, read when written: a large tail the socket did not
  /// take at post, never copied.
  std::size_t borrowed = 0;
  soft_dp::payload_source source;
};

/// A cm id. The application holds it through `self` until destroy_id; the
/// progress thread's handlers hold shared_ptrs, so a handler in flight never
/// touches a destroyed id, and `destroyed` (under `mutex`) stops every event
/// once destroy_id has returned.
struct soft_id : std::enable_shared_from_this<soft_id> {
  soft_id() = default;
  soft_id(const soft_id&) = delete;
  soft_id& operator=(const soft_id&) = delete;
  /// Counts the id in the provider's totals until it is freed.
  void count_in(soft_provider::totals& t) noexcept {
    totals = &t;
    t.live_ids.fetch_add(1);
  }
  /// What the link still held (RNR waits, READ responses) leaves the totals.
  ~soft_id() {
    if (totals == nullptr) return;
    if (stalled_bytes > 0) totals->held_bytes.fetch_sub(stalled_bytes);
    for (const tx_frame& f : out) totals->queued_read_bytes.fetch_sub(f.read_bytes);
    totals->live_ids.fetch_sub(1);
  }

  /// The provider's (count_in), set before the id is published.
  soft_provider::totals* totals = nullptr;

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
  std::size_t half_open = 0;  ///< listener: incoming links before their REQ

  // The link's receiving side (under rx_mutex, either thread; pump_locked).
  std::mutex rx_mutex;
  arpma::detail::page_buffer rx;
  std::size_t rx_begin = 0;
  std::size_t rx_end = 0;
  bool rx_data_seen = false;
  bool rx_large_frames = false;  ///< the last frame was a large WRITE, SEND or READ response
  /// The last read got less than it asked for: the socket had nothing more.
  bool rx_short = false;
  /// A large WRITE, SEND or READ response whose payload goes to memory as it arrives: where
  /// the rest goes, and how much is still to come (0: none under way).
  struct frame_in_place {
    std::uint32_t key = 0;  ///< WRITE: the rkey; SEND: its receive's lkey
    std::uint64_t addr = 0;
    std::size_t left = 0;
    bool refused = false;  ///< the target went away meanwhile: the rest is read and dropped
    /// A WRITE into its target, a SEND into the receive it completes, a READ
    /// response into the READ's local buffer.
    enum class kind : std::uint8_t { write, send, read_response } what = kind::write;
    std::size_t length = 0;  ///< SEND: the payload's, for the completion
    std::optional<std::uint32_t> imm;
  } placing;
  std::uint64_t rx_frames = 0;                    ///< frames consumed so far
  bool frame_watch = false;                       ///< frame_timer watches a partial frame
  std::optional<asio::steady_timer> frame_timer;  ///< the progress thread's
  int rx_error = 0;  ///< the link failed (errno); the progress thread acts on it
  /// The progress thread's read delivered a message (SEND, or WRITE WITH
  /// IMMEDIATE) to a receive: its application is likely to answer, and the
  /// answer carries the acknowledgement (soft_link_rx.cpp, pump).
  bool answer_due = false;
  /// The pending acknowledgement waits for the answer to such a message: an
  /// application's poll does not send it alone while the message is still in
  /// its receive CQ (the application has not seen it yet).
  std::atomic<bool> ack_awaits_answer{false};
  /// The last read of the socket was a completion channel's reader's, and
  /// emptied it: until another reads, any new frame wakes that channel, so
  /// a peek of an armed CQ need not ask the socket (under rx_mutex).
  bool rx_woken_drained = false;

  // Who reads the link. An application thread busy-polling a CQ of the QP
  // holds a lease on it: the progress thread, woken by the socket meanwhile,
  // leaves the frames to the poller instead of fighting it for rx_mutex,
  // until the CQ is armed (release) or the lease lapses unrenewed.
  /// When an application thread last polled the link (steady clock, ns); 0: released.
  std::atomic<std::int64_t> polled_at{0};
  /// The progress thread stopped reading because of the lease; whoever ends it reads.
  std::atomic<bool> rx_parked{false};
  std::optional<asio::steady_timer> lease_timer;  ///< the progress thread's
  /// Parked, the socket is taken off the progress thread's reactor too, so
  /// that frames for the poller do not wake it (the progress thread's; the
  /// descriptor, tx_fd, stays open). The protocol puts it back.
  struct off_reactor_socket {
    tcp protocol;
    int fd;
  };
  std::optional<off_reactor_socket> off_reactor;

  // The link's sending side, for any thread: application threads write their
  // requests straight to the socket when nothing is queued (no hop through
  // the progress thread), else frames queue for the progress thread.
  std::mutex tx_mutex;
  /// Keeps tx_fd open while a receiver uses it (close_link and open_tx take
  /// it besides tx_mutex): receiving takes no tx_mutex, so a recv never makes
  /// a sender wait, nor a sendmsg the receiver. Receivers are one at a time
  /// (rx_mutex), so it is uncontended but for the link's opening and closing.
  std::mutex fd_mutex;
  int tx_fd = -1;          ///< the socket while it is open and connected
  bool tx_sealed = false;  ///< half-close requested: no frame is accepted any more
  std::deque<tx_frame> out;
  std::size_t reads_queued = 0;                 ///< READ responses in `out`, not all written yet
  std::size_t out_offset = 0;                   ///< bytes of out.front() already written
  std::size_t in_flight = 0;                    ///< frames of `out` in the current async_write
  std::uint32_t ack_pending = 0;                ///< requests executed, acknowledgement not yet sent
  bool ack_ticker = false;                      ///< ack_timer runs
  int ack_idle = 0;                             ///< ticks in a row that found nothing to send
  std::optional<asio::steady_timer> ack_timer;  ///< the progress thread's
  bool writing = false;
  /// `cork` holds requests batched behind one awaiting its response (then
  /// `out` is empty and nothing writes): the next flush point sends them in
  /// one sendmsg (soft_link_tx.cpp, "Batching"). Atomic so that a poll can
  /// look without taking tx_mutex.
  std::atomic<bool> corked{false};
  frame cork;  ///< the corked frames, back to back (capacity kept)
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

using id_ptr = std::shared_ptr<soft_id>;

using byte_span = std::span<const std::uint8_t>;

inline std::error_code sys(int err) noexcept { return {err, std::system_category()}; }

inline std::error_code sys(const boost::system::error_code& ec) noexcept {
  return {ec.value(), std::system_category()};
}

/// The errno an rdma_cm event would carry for a failed socket operation.
inline int errno_of(const boost::system::error_code& ec) noexcept {
  if (ec == asio::error::eof) return ECONNRESET;
  if (ec.category() == boost::system::system_category() && ec.value() > 0) return ec.value();
  return EIO;
}

}  // namespace arpma::provider::soft_link

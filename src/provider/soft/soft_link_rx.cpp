// The receiving side of a soft link: one receiver per link, run under
// rx_mutex by the progress thread (every frame) or by an application thread
// polling a CQ of the link's QP (data frames only, no thread hop; whatever it
// cannot finish it hands over). Requests behind an RNR wait are held, bounded;
// a frame left incomplete gets a deadline.
// Over 700 lines on purpose: placing a large frame's payload (start_placing,
// place_more, placed) is part of the one receive loop (pump_locked) and shares
// its buffer state and fill_result; a file of its own needs a private header
// for those, left for when the file grows again.
#include "provider/soft/soft_link.hpp"

#include "provider/soft/soft_cm.hpp"
#include "provider/soft/soft_memory.hpp"
#include "provider/soft/soft_traffic.hpp"

#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <boost/asio/post.hpp>

#include <algorithm>
#include <array>
#include <limits>
#include <new>
#include <thread>
#include <utility>

namespace arpma::provider::soft_link {

using namespace soft_wire;  // NOLINT(google-build-using-namespace): the frame vocabulary

namespace {

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

/// Who reads: the progress thread; an application thread polling; or one
/// woken by its completion channel for this link (which, as the progress
/// thread, stops at a short read: the channel wakes it for what comes next).
enum class rx_mode : std::uint8_t { progress, application, woken };

/// Frames buffered before anything has been seen, and once data flows.
constexpr std::size_t rx_small = 512;
constexpr std::size_t rx_large = std::size_t{256} << 10;
/// A buffer grown past this for one large frame goes back to rx_large once empty.
constexpr std::size_t rx_keep = std::size_t{1} << 20;

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
  std::size_t arrived = 0;
  if (id.rx_end == want && want < frame_end) {
    arrived = id.rx_end + socket_holds(id);
    want = std::min(frame_end, std::max(2 * want, arrived));
  }
  if (id.rx.size() >= want) return;
  const std::size_t old_size = id.rx.size();
  id.rx.resize(want);
  // The bytes the socket holds already are read next: their pages in one call.
  id.rx.populate(old_size, std::min(want, arrived));
}

enum class fill_result : std::uint8_t { data, would_block, failed };

/// Reads what the socket has without blocking. A closed stream or an error
/// is remembered in rx_error (an application thread cannot act on it).
fill_result fill(soft_id& id, std::size_t frame_size, std::size_t limit) {
  make_room(id, frame_size);
  ssize_t n = 0;
  std::size_t want = 0;
  {
    // The descriptor stays open during the call (close_link takes the lock).
    const std::lock_guard lock(id.fd_mutex);
    if (id.tx_fd < 0) return fill_result::would_block;
    want = std::min(id.rx.size() - id.rx_end, limit);
    n = ::recv(id.tx_fd, id.rx.data() + id.rx_end, want, MSG_DONTWAIT);
  }
  if (n > 0) {
    soft_traffic::note();
    id.rx_end += static_cast<std::size_t>(n);
    id.rx_short = static_cast<std::size_t>(n) < want;
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
  // Marked before the receive completes, as on the progress thread: a pump
  // there that finds nothing after this must not send the ACK alone.
  const bool message = soft_dp::takes_receive(type);
  if (message) id->ack_awaits_answer.store(true);
  switch (soft_dp::on_frame(*qp, type, payload)) {
    case soft_dp::verdict::done: id->answer_due = id->answer_due || message; return rx_next::more;
    case soft_dp::verdict::rnr_wait: return rx_next::hand_over;  // nothing happened yet
    case soft_dp::verdict::protocol_error: id->rx_error = EPROTO; return rx_next::hand_over;
  }
  return rx_next::hand_over;
}

/// WRITEs, SENDs and READ responses this large have their payload read
/// straight into the target MR, the receive's or the READ's buffer when it is
/// not all in the socket already: one copy (the kernel's), as a NIC's.
constexpr std::size_t direct_min = std::size_t{16} << 10;

/// What of a placeable frame precedes its payload: a WRITE's target, a SEND
/// WITH IMMEDIATE's immediate.
std::size_t fixed_part(frame_type type) noexcept {
  return type == frame_type::write ? remote_size : type == frame_type::send_imm ? 4 : 0;
}
using place_kind = soft_id::frame_in_place::kind;

bool placeable(const frame_header& h) noexcept {
  return h.length >= direct_min &&
         (h.type == frame_type::write || h.type == frame_type::send ||
          h.type == frame_type::send_imm || h.type == frame_type::read_resp);
}

/// A placed payload's last read takes this much more into the emptied buffer,
/// so that the next frame's header (an ACK, a credit, the next large frame's
/// head) costs no read of its own.
constexpr std::size_t placed_tail = 256;

std::size_t socket_holds(soft_id& id) {
  const std::lock_guard lock(id.fd_mutex);
  int n = 0;
  return id.tx_fd >= 0 && ::ioctl(id.tx_fd, FIONREAD, &n) == 0 && n > 0
             ? static_cast<std::size_t>(n)
             : 0;
}

/// The QP a large frame's payload may be placed for now, or nullptr.
std::shared_ptr<soft_qp> placing_qp(const id_ptr& id) {
  std::shared_ptr<soft_qp> qp;
  {
    const std::lock_guard lock(id->mutex);
    if (id->state != conn_state::established || !id->qp) return nullptr;
    qp = id->qp;
  }
  return soft_dp::executes_requests(*qp) ? qp : nullptr;
}

/// Where the next `len` bytes of the placed payload go, or nullptr; with the
/// memory lock held.
std::uint8_t* destination(const soft_qp& qp, const soft_id::frame_in_place& p, std::size_t len) {
  return p.what == place_kind::write ? soft_dp::write_destination(qp, p.key, p.addr, len)
                                     : soft_dp::recv_destination(qp, p.key, p.addr, len);
}

/// Where a large frame's payload goes: the WRITE's target, the receive a
/// SEND completes (the front of the QP's own queue: a SEND that would find
/// none, or one too small, goes the ordinary way), the buffer of the READ a
/// response answers (one that answers none goes the ordinary way, to be
/// refused there).
std::optional<soft_id::frame_in_place> placement(soft_qp& qp, const frame_header& h,
                                                 const std::uint8_t* fixed) {
  soft_id::frame_in_place p;
  p.left = h.length - fixed_part(h.type);
  if (h.type == frame_type::write) {
    p.key = get_u32(fixed);
    p.addr = get_u64(fixed + 4);
    return p;
  }
  if (h.type == frame_type::read_resp) {
    const auto local = soft_dp::placing_read(qp, p.left);
    if (!local) return std::nullopt;
    p.key = local->lkey;
    p.addr = local->addr;
    p.what = place_kind::read_response;
    return p;
  }
  const auto r = soft_dp::placing_recv(qp, p.left);
  if (!r) return std::nullopt;
  p.key = r->local.lkey;
  p.addr = r->local.addr;
  p.what = place_kind::send;
  p.length = p.left;
  if (h.type == frame_type::send_imm) p.imm = get_u32(fixed);
  return p;
}

/// A large frame whose header and fixed part are buffered (nothing after
/// them but payload): its payload goes to memory as it arrives (place_more),
/// never through a buffer the size of the frame. False when it is not
/// eligible (the ordinary path then buffers it, and refuses it if it must).
bool start_placing(const id_ptr& id, const frame_header& h) {
  const std::uint8_t* fixed = id->rx.data() + id->rx_begin + header_size;
  const std::size_t buffered = id->rx_end - id->rx_begin - header_size - fixed_part(h.type);
  // Requests wait behind a SEND held for a receive (RNR); responses do not.
  if (h.type != frame_type::read_resp && !id->stalled.empty()) return false;
  const auto qp = placing_qp(id);
  if (!qp) return false;
  auto p = placement(*qp, h, fixed);
  if (!p) return false;
  {
    auto memory = soft_dp::lock_memory();
    std::uint8_t* dst = destination(*qp, *p, p->left);
    // A target the application unmapped: the buffered path refuses it (NAK).
    if (dst == nullptr || !soft_mem::copy_to_region(dst, fixed + fixed_part(h.type), buffered))
      return false;
  }
  p->addr += buffered;
  p->left -= buffered;
  id->placing = *p;
  id->rx_begin = id->rx_end = 0;
  id->rx_data_seen = true;  // data flows: the buffer's floor is rx_large from now on
  return true;
}

/// The whole payload is in: the WRITE is acknowledged (or refused), the
/// SEND's receive completes, the READ completes.
void placed(const id_ptr& id, const std::shared_ptr<soft_qp>& qp) {
  auto& p = id->placing;
  ++id->rx_frames;
  id->rx_large_frames = true;  // the next frame's header and target are read alone
  // This piece's QP, unless the frame was refused before it (then looked up
  // once more, to answer with the NAK).
  const auto target = qp ? qp : placing_qp(id);
  if (!target) {
    p = {};
    return;
  }
  switch (p.what) {
    case place_kind::send:
      // Marked before the receive completes, as for any message (handle_inline).
      id->ack_awaits_answer.store(true);
      soft_dp::send_placed(*target, p.length, p.imm, p.refused);
      id->answer_due = true;
      break;
    case place_kind::read_response: soft_dp::read_placed(*target, p.refused); break;
    case place_kind::write:
      if (p.refused) soft_dp::write_refused(*target);
      if (!p.refused) soft_dp::write_placed(*target);
      break;
  }
  p = {};
}

/// Reads what the socket holds of the placed payload. The destination is
/// looked up again for each piece, under the memory lock (the application
/// may deregister it meanwhile; then the rest is read and dropped, and the
/// frame refused once it has all arrived).
fill_result place_more(const id_ptr& id) {
  auto& p = id->placing;
  const auto qp = p.refused ? nullptr : placing_qp(id);
  ssize_t n = 0;
  int err = 0;
  std::size_t want = 0;
  {
    std::shared_lock<std::shared_mutex> memory;
    std::uint8_t* dst = nullptr;
    if (qp) {
      memory = soft_dp::lock_memory();
      dst = destination(*qp, p, p.left);
    }
    p.refused = p.refused || dst == nullptr;
    // The buffer is empty while a payload is placed (start_placing).
    std::array<iovec, 2> iov{iovec{dst, p.left},
                             iovec{id->rx.data(), std::min(placed_tail, id->rx.size())}};
    if (p.refused) iov = {iovec{id->rx.data(), std::min(p.left, id->rx.size())}, iovec{}};
    want = iov[0].iov_len + iov[1].iov_len;
    msghdr msg{};
    msg.msg_iov = iov.data();
    msg.msg_iovlen = iov[1].iov_len > 0 ? 2 : 1;
    const std::lock_guard lock(id->fd_mutex);
    if (id->tx_fd < 0) return fill_result::would_block;
    n = ::recvmsg(id->tx_fd, &msg, MSG_DONTWAIT);
    err = errno;
  }
  if (n > 0) soft_traffic::note();
  if (n < 0 && (err == EAGAIN || err == EWOULDBLOCK || err == EINTR))
    return fill_result::would_block;
  if (n < 0 && err == EFAULT && !p.refused) {
    p.refused = true;  // unmapped under us; the kernel consumed nothing it could not copy
    return fill_result::data;
  }
  if (n <= 0) {
    id->rx_error = n == 0 ? ECONNRESET : err;
    return fill_result::failed;
  }
  id->rx_short = static_cast<std::size_t>(n) < want;
  const std::size_t payload = std::min(static_cast<std::size_t>(n), p.left);
  id->rx_end = static_cast<std::size_t>(n) - payload;  // the next frame's first bytes
  p.addr += payload;
  p.left -= payload;
  if (p.left == 0) placed(id, qp);
  return fill_result::data;
}

/// A frame is under way: partly buffered, or a WRITE's payload still coming.
bool mid_frame(const soft_id& id) noexcept {
  return id.rx_end > id.rx_begin || id.placing.left > 0;
}

void watch_frame(const id_ptr& id, std::uint64_t seen);

/// The socket has nothing more: a frame left incomplete in the buffer gets
/// a deadline (limits::frame), on the progress thread. Called with rx_mutex
/// held, so the watch is started once.
rx_next drained(const id_ptr& id) {
  if (mid_frame(*id) && !id->frame_watch && id->io != nullptr) {
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
      const bool partial = mid_frame(*id);
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

/// Reads more; false when the socket has nothing now. The progress thread
/// does not ask again after a read that got less than it asked for: the
/// socket had nothing more, and its next wait finds whatever came since
/// (Asio's reactor re-arms the descriptor for every wait, and the kernel then
/// reports a socket that is readable already). One recv per wake-up less.
template <class Read>
bool read_more(const id_ptr& id, rx_mode mode, Read read) {
  if (mode == rx_mode::application) return read() != fill_result::would_block;
  if (std::exchange(id->rx_short, false)) return false;
  if (read() != fill_result::would_block) return true;
  if (id->totals != nullptr && mode == rx_mode::progress)
    id->totals->empty_progress_reads.fetch_add(1);
  return false;
}
bool read_more(const id_ptr& id, rx_mode mode, std::size_t need, std::size_t limit) {
  return read_more(id, mode, [&] { return fill(*id, need, limit); });
}

/// Consumes the buffered frames and reads more until the socket has nothing.
/// Called with rx_mutex held.
rx_next pump_locked(const id_ptr& id, rx_mode mode) {
  for (;;) {
    if (failed_link(id, mode))
      return mode == rx_mode::progress ? rx_next::stop : rx_next::hand_over;
    if (mode == rx_mode::progress && id->link_closed) return rx_next::stop;
    if (id->placing.left > 0) {
      if (!read_more(id, mode, [&] { return place_more(id); })) return drained(id);
      continue;
    }
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
      if (avail < need && placeable(*h)) {
        // Read no further than the target, then the payload goes where it belongs.
        const std::size_t head = header_size + fixed_part(h->type);
        if (avail < head) {
          if (!read_more(id, mode, need, head - avail)) return drained(id);
          continue;
        }
        if (start_placing(id, *h)) continue;
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
          if (id->rx.size() > rx_keep) id->rx.reset(rx_large);
        }
        id->rx_large_frames = placeable(*h);
        if (next == rx_next::stop) return next;
        continue;
      }
    }
    // After a large frame the next is likely one too: read its header and
    // fixed part alone (a WRITE's target, the longest), so its payload can
    // go straight to memory.
    const bool header_first = id->rx_large_frames && avail < header_size;
    const std::size_t limit =
        header_first ? header_size + remote_size - avail : std::numeric_limits<std::size_t>::max();
    if (!read_more(id, mode, need, limit)) return drained(id);
  }
}

// ---- the lease ------------------------------------------------------------------

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// When the lease of the last poll ends; 0 when no poll holds one.
std::int64_t lease_end(const soft_id& id) noexcept {
  const std::int64_t at = id.polled_at.load();
  return at == 0 ? 0 : at + std::chrono::nanoseconds(id.limits.poll_lease).count();
}

bool leased(const soft_id& id) noexcept {
  const std::int64_t end = lease_end(id);
  return end != 0 && now_ns() < end;
}

/// Ends a park: the progress thread reads (pump clears rx_parked, so a second
/// unpark of the same park finds nothing to do).
void unpark(const id_ptr& id) {
  if (id->rx_parked.load()) pump(id);
}

void watch_lease(const id_ptr& id);

/// Its socket would wake the progress thread for every frame the poller
/// reads, so it leaves the reactor while nothing waits on it there (no
/// write in flight); reactor_socket() puts it back.
void take_off_reactor(soft_id& id) {
  {
    const std::lock_guard lock(id.tx_mutex);
    if (id.writing || id.tx_fd < 0) return;
  }
  boost::system::error_code ec;
  const tcp::endpoint local = id.socket->local_endpoint(ec);
  if (ec || id.off_reactor) return;
  const tcp protocol = local.protocol();
  const int fd = id.socket->release(ec);
  if (!ec) id.off_reactor = soft_id::off_reactor_socket{protocol, fd};
}

/// The progress thread found the socket readable while a poller holds the
/// lease: it leaves the frames to the poller and watches the lease instead.
/// A release racing this sees the park, or this sees the release.
void park(const id_ptr& id) {
  id->rx_parked.store(true);
  if (!leased(*id)) return unpark(id);
  if (id->totals != nullptr) id->totals->parks.fetch_add(1);
  take_off_reactor(*id);
  watch_lease(id);
}

void watch_lease(const id_ptr& id) {
  if (!id->lease_timer) id->lease_timer.emplace(*id->io);
  const std::int64_t end = lease_end(*id);
  id->lease_timer->expires_at(
      std::chrono::steady_clock::time_point(std::chrono::nanoseconds(end == 0 ? now_ns() : end)));
  id->lease_timer->async_wait([id](const boost::system::error_code& ec) {
    if (ec || id->link_closed || !id->rx_parked.load()) return;
    if (leased(*id)) return watch_lease(id);
    unpark(id);
  });
}

void wait_readable(const id_ptr& id) {
  if (id->rx_waiting || id->link_closed) return;
  id->rx_waiting = true;
  reactor_socket(*id).async_wait(tcp::socket::wait_read, [id](const boost::system::error_code& ec) {
    id->rx_waiting = false;
    if (id->link_closed) return;
    if (ec) return link_failed(id, errno_of(ec));
    if (leased(*id)) return park(id);
    pump(id);
  });
}

std::shared_ptr<soft_qp> qp_of(const id_ptr& id) {
  const std::lock_guard lock(id->mutex);
  return id->qp;
}

/// Pending acknowledgements go out unless one waits for the answer to a
/// message its application has not taken from the receive CQ yet.
void flush_answered_acks(const id_ptr& id) {
  if (id->ack_awaits_answer.load()) {
    if (const auto qp = qp_of(id); qp && !soft_dp::cq_empty(*qp->recv_cq)) return;
    id->ack_awaits_answer.store(false);
  }
  flush_acks(id);
}

/// The CQ was armed: its thread sleeps on the channel now, so the link is
/// the progress thread's again, at once if it was parked.
void release(const id_ptr& id) {
  id->polled_at.store(0);
  if (!id->rx_parked.load()) return;
  try {
    asio::post(*id->io, [id] { unpark(id); });
  } catch (const std::bad_alloc&) {
    // The lease timer unparks it (the lease is over).
  }
}

}  // namespace

void pump(const id_ptr& id) {
  // However it was called, the progress thread reads the link now (a park
  // ends here, so whatever this pump runs may end a lease without recursing).
  id->rx_parked.store(false);
  rx_next next = rx_next::stop;
  bool answer_due = false;
  {
    const std::lock_guard lock(id->rx_mutex);
    if (id->reading_paused) return;
    id->answer_due = false;
    id->rx_short = false;  // woken: read at least once
    id->rx_woken_drained = false;
    next = pump_locked(id, rx_mode::progress);
    answer_due = std::exchange(id->answer_due, false);
  }
  flush_batch(id);  // what was read may be the response a batch waited for
  // Everything readable is executed: acknowledge it in one frame, now or,
  // when a message reached the application, in front of its answer (a
  // ping-pong's sender then wakes once, for ACK and echo together). The
  // application's next poll of the CQ sends what no answer carried, and the
  // ack ticker within limits::ack_delay if it never polls.
  // An application thread woken by its channel may have delivered one: its
  // ACK waits for the answer too, or for that thread's next look.
  if (answer_due || id->ack_awaits_answer.load())
    ensure_ack_ticker(id);
  else
    flush_acks(id);
  if (next == rx_next::more) wait_readable(id);
}

void await_peer(const id_ptr& id) { wait_readable(id); }

void end_lease(const id_ptr& id) {
  id->polled_at.store(0);
  unpark(id);
}

void pump_from_application(const id_ptr& id, soft_dp::drive how) {
  // The poller (or the thread going to sleep on the CQ) waits for what it
  // batched: it goes out first.
  flush_batch(id);
  if (how == soft_dp::drive::release || how == soft_dp::drive::sleep) {
    if (id->ack_awaits_answer.load()) flush_answered_acks(id);
    if (how == soft_dp::drive::release) release(id);
    return;
  }
  // Taken before trying the receiver: a progress thread that wakes now
  // leaves the socket to this thread rather than contending for it.
  const bool wake = how == soft_dp::drive::wake;
  if (how == soft_dp::drive::poll || wake) id->polled_at.store(now_ns());
  std::unique_lock lock(id->rx_mutex, std::defer_lock);
  // Woken by the channel, this thread waits for a progress thread that is
  // at the link (a pump ends once the socket is drained): what it
  // completes is this reader's event, and a channel that was readable then
  // has one to give, as a verbs channel would (unless that thread drained
  // the socket before this one looked: docs/soft-provider.md, "The channel
  // watches its links"). A spinning poller lets it
  // finish instead (it could otherwise keep it from the CPU it needs to
  // release the receiver).
  if (wake)
    lock.lock();
  else if (!lock.try_lock()) {
    std::this_thread::yield();
    return;
  }
  if (id->reading_paused) return;
  if (how == soft_dp::drive::peek_watched && id->rx_woken_drained) return;
  // What the last poll executed and no reply carried is acknowledged now.
  flush_answered_acks(id);
  if (wake) {
    id->rx_short = false;  // woken: read at least once
    if (id->totals != nullptr) id->totals->channel_reads.fetch_add(1);
  }
  id->answer_due = false;
  const rx_next next = pump_locked(id, wake ? rx_mode::woken : rx_mode::application);
  id->rx_woken_drained = wake && next == rx_next::more;
  const bool answer_due = std::exchange(id->answer_due, false);
  lock.unlock();
  flush_batch(id);  // what the responses released (held WRs), or other threads posted
  // Woken, this thread acknowledges as the progress thread would: at once,
  // or, for a message it is about to take, in front of its answer.
  if (wake && !answer_due) flush_answered_acks(id);
  ensure_ack_ticker(id);
  if (next != rx_next::hand_over) return;
  try {
    asio::post(*id->io, [id] { pump(id); });
  } catch (const std::bad_alloc&) {
    // The progress thread's own wait for readability takes over.
  }
}

namespace {

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
  const std::size_t total =
      id->totals != nullptr ? id->totals->held_bytes.fetch_add(cost) + cost : 0;
  if (id->stalled_bytes <= max_stalled_bytes && total <= id->limits.held_bytes_total)
    return rx_next::more;
  id->reading_paused = true;
  return rx_next::stop;
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
      if (id->totals != nullptr) id->totals->held_bytes.fetch_sub(cost);
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
  // Marked before the receive completes: the application may take the
  // message and go back to its channel before this thread runs on.
  const bool message = soft_dp::takes_receive(type);
  if (message) id->ack_awaits_answer.store(true);
  switch (soft_dp::on_frame(*qp, type, payload)) {
    case soft_dp::verdict::done: id->answer_due = id->answer_due || message; return rx_next::more;
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

/// One complete, well-formed frame arrived on an id's link (progress thread).
rx_next handle_frame(const id_ptr& id, frame_type type, std::span<const std::uint8_t> payload) {
  if (is_data(type)) return on_data(id, type, payload);
  return soft_cm::on_cm_frame(id, type, payload);
}

}  // namespace

}  // namespace arpma::provider::soft_link

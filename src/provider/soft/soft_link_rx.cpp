// The receiving side of a soft link: one receiver per link, run under
// rx_mutex by the progress thread (every frame) or by an application thread
// polling a CQ of the link's QP (data frames only, no thread hop; whatever it
// cannot finish it hands over). Requests behind an RNR wait are held, bounded;
// a frame left incomplete gets a deadline. A large frame's payload is placed
// where it belongs as it arrives: soft_link_place.cpp.
#include "provider/soft/soft_link.hpp"

#include "provider/soft/soft_cm.hpp"
#include "provider/soft/soft_link_place.hpp"
#include "provider/soft/soft_traffic.hpp"

#include <sys/socket.h>

#include <boost/asio/post.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
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

/// How long the progress thread asks the socket again for the rest of a
/// payload it is placing, before it goes back to its reactor: the sender is
/// still copying the frame in, a segment every few µs on loopback, and each
/// return to the reactor (a re-arm, epoll_wait, the dispatch) cost more than
/// the gap (a 1 MiB WRITE took 1.6-2.0x TCP's time, 8 such returns). Per gap,
/// and in all per pump, so that one link's large frame keeps the thread from
/// the others for no longer than that; none when progress_spin is 0.
constexpr std::chrono::microseconds payload_gap_spin{20};
constexpr std::chrono::microseconds payload_spin_per_pump{100};

/// Asks for more of the placed payload until some comes, or the gap's or the
/// pump's `budget` lapses; whether some came.
bool await_payload(const id_ptr& id, std::chrono::nanoseconds& budget) {
  using clock = std::chrono::steady_clock;
  if (id->limits.progress_spin.count() == 0 || budget.count() <= 0) return false;
  if (id->totals != nullptr) id->totals->payload_waits.fetch_add(1);
  const auto start = clock::now();
  const auto until = start + std::min<std::chrono::nanoseconds>(payload_gap_spin, budget);
  bool came = false;
  auto now = start;
  while (!came && now < until) {
    came = place_more(id) != fill_result::would_block;
    now = clock::now();
  }
  budget -= now - start;
  return came;
}

/// Consumes the buffered frames and reads more until the socket has nothing.
/// Called with rx_mutex held.
rx_next pump_locked(const id_ptr& id, rx_mode mode) {
  std::chrono::nanoseconds payload_budget = payload_spin_per_pump;
  for (;;) {
    if (failed_link(id, mode))
      return mode == rx_mode::progress ? rx_next::stop : rx_next::hand_over;
    if (mode == rx_mode::progress && id->link_closed) return rx_next::stop;
    if (id->placing.left > 0) {
      if (read_more(id, mode, [&] { return place_more(id); })) continue;
      if (mode == rx_mode::progress && await_payload(id, payload_budget)) continue;
      return drained(id);
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

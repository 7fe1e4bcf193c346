// The sending side of a soft link: frames written straight to the socket by
// whichever thread sends when nothing is queued, else queued for the progress
// thread's writer; acknowledgements coalesced and carried along.
#include "provider/soft/soft_link.hpp"

#include "provider/soft/soft_memory.hpp"
#include "provider/soft/soft_traffic.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <new>

namespace arpma::provider::soft_link {

using namespace soft_wire;  // NOLINT(google-build-using-namespace): the frame vocabulary

namespace {

constexpr auto linger_timeout = std::chrono::seconds(5);

// Batching: a request posted while an earlier one awaits its response waits
// in the link's cork for the next flush point -- the link is read (the
// response arrives: pump, pump_from_application), a CQ of the QP is polled or
// armed, a frame that may not wait is sent, or the ack ticker fires (1 ms) --
// and the batch goes out in one sendmsg, as a NIC's doorbell takes a list of
// WRs. Only small frames wait, and only so many bytes: a full cork is sent.
constexpr std::size_t cork_frame_max = 4096;
constexpr std::size_t cork_bytes_max = 64 << 10;

void write_next(const id_ptr& id);
void write_borrowed(const id_ptr& id);

/// async_write's completion condition: each write offers the socket all that
/// is queued (up to 64 buffers), where asio::transfer_all offers 64 KiB at a
/// time -- 16 sendmsg calls and 16 trips through the scheduler for one 1 MiB
/// frame that the socket would have taken in one or two.
std::size_t whole_writes(const boost::system::error_code& ec, std::size_t /*done*/) noexcept {
  return ec ? 0 : std::numeric_limits<std::size_t>::max();
}

}  // namespace

void close_link(const id_ptr& id) {
  id->link_closed = true;
  {
    // After this no thread sends on or receives from the descriptor.
    const std::scoped_lock lock(id->tx_mutex, id->fd_mutex);
    id->tx_fd = -1;
    id->cork.clear();
    id->corked.store(false);
  }
  boost::system::error_code ignored;
  if (id->off_reactor) {
    (void)::close(id->off_reactor->fd);
    id->off_reactor.reset();
  }
  if (id->socket) id->socket->close(ignored);
  if (id->acceptor) id->acceptor->close(ignored);
  if (id->timer) id->timer->cancel();
  if (id->rnr_timer) id->rnr_timer->cancel();
  if (id->ack_timer) id->ack_timer->cancel();
  if (id->frame_timer) id->frame_timer->cancel();
  if (id->lease_timer) id->lease_timer->cancel();
}

void flush_qp_locked(soft_id& id) {
  if (id.qp) soft_dp::to_error(*id.qp);
}

void link_failed(const id_ptr& id, int err) {
  if (id->totals != nullptr && !id->link_closed) id->totals->link_failures.fetch_add(1);
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

namespace {

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
      soft_traffic::note();
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

/// Queues `queued` behind the frames being written, counting a READ
/// response's bytes in the provider's total. Called with tx_mutex held.
void push_queued(soft_id& id, tx_frame queued) {
  if (queued.ends_read) ++id.reads_queued;
  if (queued.read_bytes > 0 && id.totals != nullptr) {
    const std::size_t now =
        id.totals->queued_read_bytes.fetch_add(queued.read_bytes) + queued.read_bytes;
    std::size_t peak = id.totals->queued_read_peak.load();
    while (now > peak && !id.totals->queued_read_peak.compare_exchange_weak(peak, now)) {
    }
  }
  id.out.push_back(std::move(queued));
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
    frame_cache::give_back(std::move(f));
    return;
  }
  tx_frame queued;
  queued.read_bytes = response ? f.size() : 0;
  queued.bytes = std::move(f);
  queued.ends_read = ends_read;
  push_queued(id, std::move(queued));
}

/// The writer is done with out.front(). Called with tx_mutex held.
void pop_written(soft_id& id) {
  tx_frame& f = id.out.front();
  if (f.ends_read) --id.reads_queued;
  if (f.read_bytes > 0 && id.totals != nullptr)
    id.totals->queued_read_bytes.fetch_sub(f.read_bytes);
  frame_cache::give_back(std::move(f.bytes));  // most likely built by another thread
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

/// Whether `size` more bytes (`response`: of a READ response) may wait in
/// the cork. Called with tx_mutex held.
bool corkable(const soft_id& id, std::size_t size, bool response) noexcept {
  return !response && !id.writing && id.out.empty() && size <= cork_frame_max &&
         id.cork.size() + size <= cork_bytes_max;
}

/// Appends the frames to the cork; false when `tail` could not be read.
/// Called with tx_mutex held.
bool cork(soft_id& id, const frame& acks, const frame& f, byte_span tail) {
  if (id.cork.capacity() == 0) id.cork.reserve(cork_bytes_max);
  const std::size_t at = id.cork.size();
  id.cork.insert(id.cork.end(), acks.begin(), acks.end());
  id.cork.insert(id.cork.end(), f.begin(), f.end());
  if (!append_region(id.cork, tail)) {
    id.cork.resize(at);
    return false;
  }
  id.corked.store(true);
  if (!f.empty() && id.totals != nullptr) id.totals->batched.fetch_add(1);
  return true;
}

/// Sends the cork in one sendmsg; what the socket does not take goes first
/// in `out`. True when the progress thread's writer must take over (the
/// caller sets `writing` and posts write_next). Called with tx_mutex held.
bool uncork(soft_id& id) {
  if (!id.corked.load()) return false;
  id.corked.store(false);
  const std::size_t sent = send_now(id.tx_fd, {byte_span(id.cork), {}, {}});
  const bool rest = sent < id.cork.size();
  if (rest) {
    id.out_offset = 0;
    enqueue(id, frame(id.cork.begin() + static_cast<std::ptrdiff_t>(sent), id.cork.end()));
  }
  id.cork.clear();
  return rest;
}

/// A frame's tail: its bytes, and where they lie in registered memory.
struct tail_ref {
  byte_span bytes;
  soft_dp::payload_source source;
};

/// A tail at least this large that must wait is borrowed (written later from
/// its registered memory), not copied into the queue; smaller ones are copied.
constexpr std::size_t borrow_min = 16 << 10;

/// Queues the last `rest` bytes of `tail` as a borrowed piece. Called with
/// tx_mutex held.
void enqueue_borrowed(soft_id& id, const tail_ref& tail, std::size_t rest, bool response) {
  tx_frame piece;
  piece.ends_read = response;
  piece.read_bytes = response ? rest : 0;
  piece.borrowed = rest;
  piece.source = tail.source;
  piece.source.addr += tail.bytes.size() - rest;
  push_queued(id, std::move(piece));
}

/// Puts `acks`, `f` and `tail` (any may be empty) on the wire after every
/// frame before them: written at once when nothing is queued, else queued
/// for the progress thread (what is queued of `tail` is copied, or borrowed
/// when it is large and its source is known). Called with `lock` (tx_mutex)
/// held; may release it.
void transmit(const id_ptr& id, std::unique_lock<std::mutex>& lock, frame acks, frame f,
              tail_ref tail = {}, bool batch = false) {
  const bool response = is_read_response(f);
  if ((batch || id->corked.load()) &&
      corkable(*id, acks.size() + f.size() + tail.bytes.size(), response)) {
    if (!cork(*id, acks, f, tail.bytes)) return tail_unreadable(id);
    frame_cache::give_back(std::move(f));
    frame_cache::give_back(std::move(acks));
    if (batch || !uncork(*id)) return;
    id->writing = true;
    lock.unlock();
    asio::post(*id->io, [id] { write_next(id); });
    return;
  }
  // A frame that may not wait takes the batch out before it.
  const bool take_over = uncork(*id);
  std::size_t sent = 0;
  const std::size_t total = acks.size() + f.size() + tail.bytes.size();
  if (!id->writing && id->out.empty()) {
    sent = send_now(id->tx_fd, {byte_span(acks), byte_span(f), tail.bytes});
    if (sent == total) {
      frame_cache::give_back(std::move(f));
      frame_cache::give_back(std::move(acks));
      return;
    }
  }
  const bool start = !id->writing && id->out.empty();
  const std::size_t tail_sent = sent > acks.size() + f.size() ? sent - acks.size() - f.size() : 0;
  const std::size_t tail_rest = tail.bytes.size() - tail_sent;
  const bool borrow = tail.source.pd != nullptr && tail_rest >= borrow_min;
  // Whatever is left, in order; the first piece may be partly written.
  std::array<frame*, 2> pieces{&acks, &f};
  for (frame* piece : pieces) {
    if (sent >= piece->size()) {
      sent -= piece->size();
      frame_cache::give_back(std::move(*piece));
      continue;
    }
    const bool whole_tail = piece == &f && !borrow && !tail.bytes.empty();
    if (whole_tail && !append_region(*piece, tail.bytes)) return tail_unreadable(id);
    if (whole_tail) tail.bytes = {};
    if (start && id->out.empty()) id->out_offset = sent;
    sent = 0;
    const bool ends = piece == &f && response && tail.bytes.empty();
    enqueue(*id, std::move(*piece), piece == &f && response, ends);
  }
  if (borrow) {
    if (start && id->out.empty()) id->out_offset = 0;
    enqueue_borrowed(*id, tail, tail_rest, response);
  } else if (!tail.bytes.empty()) {
    if (start && id->out.empty()) id->out_offset = sent;
    frame rest;
    if (!append_region(rest, tail.bytes)) return tail_unreadable(id);
    enqueue(*id, std::move(rest), response, response);
  }
  if (!start && !take_over) return;
  id->writing = true;
  lock.unlock();
  asio::post(*id->io, [id] { write_next(id); });
}

}  // namespace

void send_frame(const id_ptr& id, frame f, byte_span tail, const soft_dp::payload_source& source,
                bool batch) {
  std::unique_lock lock(id->tx_mutex);
  if (id->tx_fd < 0 || id->tx_sealed) return;
  if (is_ack(f)) {
    id->ack_pending += get_u32(f.data() + header_size);
    frame_cache::give_back(std::move(f));
    return;
  }
  transmit(id, lock, take_acks(*id), std::move(f), {tail, source}, batch);
  if (!batch || !lock.owns_lock() || !id->corked.load() || id->ack_ticker) return;
  lock.unlock();
  ensure_ack_ticker(id);  // a batch nobody flushes goes out within a tick
}

void flush_batch(const id_ptr& id) {
  if (!id->corked.load()) return;
  std::unique_lock lock(id->tx_mutex);
  if (!id->corked.load() || id->tx_fd < 0 || !uncork(*id)) return;
  id->writing = true;
  lock.unlock();
  asio::post(*id->io, [id] { write_next(id); });
}

void flush_acks(const id_ptr& id) {
  std::unique_lock lock(id->tx_mutex);
  if (id->ack_pending == 0 || id->tx_fd < 0 || id->tx_sealed) return;
  transmit(id, lock, take_acks(*id), {});
}

namespace {

/// Acknowledgements left pending (by an application thread's poll, or for a
/// message its application is to answer) are sent by the progress thread
/// within limits::ack_delay if nothing carries them sooner. The ticker runs
/// while they keep coming, so a busy link costs one timer per tick, not a
/// wake-up per frame.
constexpr int ack_idle_ticks = 100;

void ack_tick(const id_ptr& id) {
  id->ack_timer->expires_after(id->limits.ack_delay);
  id->ack_timer->async_wait([id](const boost::system::error_code& ec) {
    std::unique_lock lock(id->tx_mutex);
    frame acks;
    const bool open = !ec && !id->link_closed && id->tx_fd >= 0 && !id->tx_sealed;
    if (open) acks = take_acks(*id);
    const bool batch = open && id->corked.load();
    id->ack_idle = acks.empty() && !batch ? id->ack_idle + 1 : 0;
    id->ack_ticker = !ec && !id->link_closed && id->ack_idle < ack_idle_ticks;
    const bool again = id->ack_ticker;
    if (!acks.empty() || batch) transmit(id, lock, std::move(acks), {});
    if (again) ack_tick(id);
  });
}

}  // namespace

void ensure_ack_ticker(const id_ptr& id) {
  {
    const std::lock_guard lock(id->tx_mutex);
    if ((id->ack_pending == 0 && !id->corked.load()) || id->ack_ticker) return;
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

namespace {

/// Writes out.front(), a borrowed tail, from its registered memory as far as
/// the socket takes it, then goes on with the queue or waits for room. The
/// region is looked up again under the MR table's lock for every write (the
/// lock a deregistration takes exclusively): one deregistered meanwhile is
/// never read, and fails the link as a tail unreadable at post does.
void write_borrowed(const id_ptr& id) {
  int err = 0;
  bool wait = false;
  {
    const auto memory = soft_dp::lock_memory();  // before tx_mutex, as a post takes them
    const std::lock_guard lock(id->tx_mutex);
    if (id->tx_fd < 0 || id->out.empty()) {
      drop_queued(*id);
      id->writing = false;
      return;
    }
    for (;;) {
      const tx_frame& f = id->out.front();
      const std::uint8_t* src = soft_dp::payload_at(f.source, f.borrowed);
      if (src == nullptr) {
        err = EFAULT;
        break;
      }
      const ssize_t n = ::send(id->tx_fd, src + id->out_offset, f.borrowed - id->out_offset,
                               MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        wait = errno == EAGAIN || errno == EWOULDBLOCK;
        err = wait ? 0 : errno;
        break;
      }
      if (n > 0) soft_traffic::note();
      id->out_offset += static_cast<std::size_t>(n);
      if (id->out_offset == f.borrowed) {
        pop_written(*id);
        id->out_offset = 0;
        break;
      }
    }
    if (err != 0) {
      id->tx_sealed = true;
      drop_queued(*id);
    }
  }
  if (err != 0) return link_failed(id, err);
  if (!wait) return write_next(id);
  reactor_socket(*id).async_wait(tcp::socket::wait_write,
                                 [id](const boost::system::error_code& ec) {
                                   if (ec && !id->link_closed) return link_failed(id, errno_of(ec));
                                   write_next(id);
                                 });
}

/// The progress thread's writer: everything queued, in one gathered write
/// (a borrowed tail on its own, by write_borrowed).
void write_next(const id_ptr& id) {
  std::vector<asio::const_buffer> buffers;
  {
    std::unique_lock lock(id->tx_mutex);
    if (id->corked.load() && id->out.empty() && !id->link_closed) {
      // The writer (a finishing link's) takes the batch along, in order.
      id->out_offset = 0;
      enqueue(*id, frame(id->cork.begin(), id->cork.end()));
      id->cork.clear();
      id->corked.store(false);
    }
    if (id->link_closed || id->out.empty()) {
      drop_queued(*id);
      id->out_offset = 0;
      id->writing = false;
      if (!id->link_closed && id->then == after_write::shutdown_send) {
        boost::system::error_code ignored;
        reactor_socket(*id).shutdown(tcp::socket::shutdown_send, ignored);
      }
      return;
    }
    id->writing = true;
    if (id->out.front().borrowed > 0) {
      id->in_flight = 0;
      lock.unlock();
      return write_borrowed(id);
    }
    // The frames up to the first borrowed one (written on its own).
    id->in_flight = 0;
    while (id->in_flight < std::min<std::size_t>(id->out.size(), 64) &&
           id->out[id->in_flight].borrowed == 0) {
      const std::size_t i = id->in_flight++;
      buffers.emplace_back(asio::buffer(id->out[i].bytes) + (i == 0 ? id->out_offset : 0));
    }
  }
  asio::async_write(reactor_socket(*id), buffers, whole_writes,
                    [id](const boost::system::error_code& ec, std::size_t n) {
                      if (n > 0) soft_traffic::note();
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

}  // namespace

void finish_link(const id_ptr& id, bool bounded) {
  if (id->link_closed || !id->socket) return;
  end_lease(id);
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

tcp::socket& reactor_socket(soft_id& id) {
  if (id.off_reactor) {
    boost::system::error_code ec;
    // Fails only for want of memory; the socket then reads as closed, the
    // next operation on it fails the link, and close_link closes the fd.
    id.socket->assign(id.off_reactor->protocol, id.off_reactor->fd, ec);
    if (!ec) id.off_reactor.reset();
  }
  return *id.socket;
}

void watch_for_reading_only(soft_id& id, const tcp& protocol) {
  if (id.off_reactor) return;
  boost::system::error_code ec;
  const int fd = id.socket->release(ec);
  if (ec) return;
  // Put back as a lease's park does; should the registration fail, the fd
  // waits in off_reactor for the next use or close_link.
  id.off_reactor = soft_id::off_reactor_socket{protocol, fd};
  (void)reactor_socket(id);
}

void open_tx(soft_id& id) {
  const std::scoped_lock lock(id.tx_mutex, id.fd_mutex);
  id.tx_fd = id.socket->native_handle();
}

namespace {

/// How a QP writes its frames: through the id's link while the id lives.
std::function<void(frame, byte_span, soft_dp::payload_source, bool)> link_of(const id_ptr& id) {
  return [weak = std::weak_ptr<soft_id>(id)](frame f, byte_span tail,
                                             soft_dp::payload_source source, bool batch) {
    if (const id_ptr alive = weak.lock()) send_frame(alive, std::move(f), tail, source, batch);
  };
}

/// Adds the open socket to a completion channel's epoll set (edge-triggered:
/// the channel's reader is woken by each new frame, and a frame it leaves
/// to the progress thread does not wake it again), or removes it. Under
/// fd_mutex, so a closed socket's number, maybe another's by now, is never used.
bool watch_socket(soft_id& id, int epfd, std::uint64_t token, bool add) {
  const std::lock_guard lock(id.fd_mutex);
  if (id.tx_fd < 0) return false;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;
  ev.data.u64 = token;
  return ::epoll_ctl(epfd, add ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, id.tx_fd, &ev) == 0;
}

std::size_t queued_reads(const id_ptr& id) {
  const std::lock_guard lock(id->tx_mutex);
  return id->reads_queued;
}

}  // namespace

void qp_ready_locked(const id_ptr& id) {
  if (!id->qp) return;
  const std::weak_ptr<soft_id> weak(id);
  soft_dp::link_ops ops;
  ops.send = link_of(id);
  ops.progress =
      std::make_shared<const std::function<void(soft_dp::drive)>>([weak](soft_dp::drive how) {
        if (const id_ptr alive = weak.lock()) pump_from_application(alive, how);
      });
  ops.queued_reads = [weak]() -> std::size_t {
    const id_ptr alive = weak.lock();
    return alive ? queued_reads(alive) : 0;
  };
  ops.read_budget_spent = [weak] {
    const id_ptr alive = weak.lock();
    return alive && alive->totals != nullptr &&
           alive->totals->queued_read_bytes.load() >= alive->limits.queued_read_bytes_total;
  };
  // What each end may have unanswered: IB's initiator depth and responder
  // resources, whichever of the two ends offers less (make_ready caps them).
  ops.max_reads_out = std::min(id->own_depth, id->peer_resources);
  ops.max_reads_in = std::min(id->own_resources, id->peer_depth);
  ops.watch = [weak](int epfd, std::uint64_t token, bool add) {
    const id_ptr alive = weak.lock();
    return alive && watch_socket(*alive, epfd, token, add);
  };
  soft_dp::make_ready(*id->qp, std::move(ops));
  soft_dp::watch_link(id->qp);
}

}  // namespace arpma::provider::soft_link

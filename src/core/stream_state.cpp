// The stream engine: every message is a SEND WITH IMMEDIATE into a slot the
// peer posted; credits come back in the immediate (docs/stream.md).
#include "core/stream_state.hpp"

#include "core/conn_state.hpp"
#include "core/cq_events.hpp"
#include "core/fd_ready.hpp"

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <cstring>

namespace arpma::detail {

namespace {

namespace aerr = boost::asio::error;

// wr_id of a send: the tag, and the slot (data) or the control mark.
constexpr std::uint64_t send_tag = 1ULL << 63;
constexpr std::uint64_t control_tag = 1ULL << 62;
constexpr std::size_t poll_batch = 16;

error_code reset_error() { return aerr::connection_reset; }

template <class Buffer>
std::size_t total_size(const stream_buffers<Buffer>& bufs) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < bufs.count; ++i) n += bufs.items[i].size();
  return n;
}

}  // namespace

// The wait's handler holds the state: none is pending here, so only the
// connection is left to release (before the regions it uses).
stream_state::~stream_state() {
  waiting_ = false;
  abort_now();
}

std::error_code stream_state::prepare(const peer& p) {
  // Every message carries its length and credit in immediate data; iWARP has
  // none, and a post refused later would only reset the stream (docs/stream.md).
  if (const auto& ps = access::state(p); ps && !ps->prov.caps(ps->dev).immediate_data)
    return make_error_code(errc::not_supported);
  const std::size_t slot = cfg_.slot_size;
  recv_mem_.resize((cfg_.slots + cfg_.control_slots) * slot);
  send_mem_.resize(cfg_.slots * slot);
  auto r = local_mr::reg(p, recv_mem_.data(), recv_mem_.size(), mr_usage::recv);
  if (!r) return r.error();
  recv_mr_ = std::move(r).value();
  auto s = local_mr::reg(p, send_mem_.data(), send_mem_.size(), mr_usage::send);
  if (!s) return s.error();
  send_mr_ = std::move(s).value();
  filled_.resize(cfg_.slots + cfg_.control_slots);
  free_slots_.reserve(cfg_.slots);
  for (std::uint32_t i = cfg_.slots; i > 0; --i) free_slots_.push_back(i - 1);
  return {};
}

std::error_code stream_state::post_receives(conn_req& req) {
  for (std::uint32_t i = 0; i < cfg_.slots + cfg_.control_slots; ++i) {
    auto slot = buffer(recv_mr_, std::size_t{i} * cfg_.slot_size, cfg_.slot_size);
    if (!slot) return slot.error();
    if (auto ec = req.post_recv(slot.value(), i)) return ec;
  }
  return {};
}

void stream_state::attach(connection conn, const stream_cfg& peer) {
  conn_ = std::move(conn);
  cq_ = conn_.completion_queue();
  ex_ = conn_.get_executor();
  peer_ = peer;
  credits_ = peer.slots;
  const conn_state* st = access::state(conn_);
  const cq_state* q = queue_of(st, false);
  if (st == nullptr || q == nullptr || q->own_channel == nullptr) return fail(reset_error());
  prov_ = &st->prov();
  channel_ = q->own_channel;
  // Ours alone (the connection's async_* path is not used beside a stream):
  // non-blocking, so taking its events needs no poll(2) first.
  if (adopt_non_blocking(fd_, ex_, prov_->comp_channel_fd(channel_))) return fail(reset_error());
  on_loop_shutdown(ex_, shared_from_this());
  cm_ = st->cm_events;
  access::state(conn_)->watch(shared_from_this());
}

std::uint32_t stream_state::control_limit() const noexcept {
  return std::min(cfg_.control_slots, peer_.control_slots);
}

// ---- operations ------------------------------------------------------------

void stream_state::start_read(const stream_buffers<boost::asio::mutable_buffer>& bufs,
                              stream_io_handler handler, bool local) {
  if (read_ || closed_) {
    read_done_.emplace(ready{std::move(handler),
                             closed_ ? error_code(aerr::bad_descriptor) : aerr::in_progress, 0,
                             local, true});
    deliver(read_done_);
    return;
  }
  read_.emplace(pending<boost::asio::mutable_buffer>{bufs, std::move(handler), local});
  if (cfg_.busy_poll.count() > 0) last_progress_ = std::chrono::steady_clock::now();
  auto slot = read_->handler.get_cancellation_slot();
  if (slot.is_connected()) slot.emplace<cancel_op>(cancel_op{this, which::read});
  run();
  if (read_) read_->immediate = false;
}

void stream_state::start_write(const stream_buffers<boost::asio::const_buffer>& bufs,
                               stream_io_handler handler, bool local) {
  if (write_ || closed_) {
    write_done_.emplace(ready{std::move(handler),
                              closed_ ? error_code(aerr::bad_descriptor) : aerr::in_progress, 0,
                              local, true});
    deliver(write_done_);
    return;
  }
  write_.emplace(pending<boost::asio::const_buffer>{bufs, std::move(handler), local});
  if (cfg_.busy_poll.count() > 0) last_progress_ = std::chrono::steady_clock::now();
  auto slot = write_->handler.get_cancellation_slot();
  if (slot.is_connected()) slot.emplace<cancel_op>(cancel_op{this, which::write});
  run();
  if (write_) write_->immediate = false;
}

void stream_state::shutdown() {
  if (shutdown_) return;
  shutdown_ = true;
  run();
}

void stream_state::cancel_op::operator()(boost::asio::cancellation_type type) const {
  using ct = boost::asio::cancellation_type;
  if ((type & (ct::terminal | ct::partial | ct::total)) != ct::none) state->cancel(op);
}

void stream_state::cancel(which op) {
  // A pending read has consumed nothing and a pending write has sent
  // nothing (each completes as soon as it moved a byte).
  if (op == which::read && read_) {
    read_->immediate = true;
    finish(read_, read_done_, aerr::operation_aborted, 0);
    deliver(read_done_);
  } else if (op == which::write && write_) {
    write_->immediate = true;
    finish(write_, write_done_, aerr::operation_aborted, 0);
    deliver(write_done_);
  }
  if (!running_) arm_wait();
}

template <class Buffer>
void stream_state::finish(std::optional<pending<Buffer>>& op, std::optional<ready>& out,
                          error_code ec, std::size_t n) {
  auto slot = op->handler.get_cancellation_slot();
  if (slot.is_connected()) slot.clear();
  out.emplace(ready{std::move(op->handler), ec, n, op->local, op->immediate});
  op.reset();
}

// Runs the handler: posted when its initiating function is still on the
// stack (Asio's rule), else at once when its executor allows.
// Runs the handler: posted when its initiating function is still on the
// stack (Asio's rule), else at once when it runs on the stream's executor
// (completions are found on the loop's thread), else dispatched there.
void stream_state::deliver(std::optional<ready>& r) {
  if (!r) return;
  ready done = std::move(*r);
  r.reset();
  if (abandoned_) return;  // the loop is gone: dropped uncalled, as Asio drops its own
  std::optional<asio::any_completion_executor> target;
  if (!done.local) target = asio::get_associated_executor(done.handler, ex_);  // a heap block
  auto call = [h = std::move(done.handler), ec = done.ec, n = done.n]() mutable {
    std::move(h)(ec, n);
  };
  if (!done.immediate) {
    if (!target) return call();
    return asio::dispatch(*target, std::move(call));
  }
  ++posted_;
  asio::post(ex_, [self = shared_from_this(), target = std::move(target),
                   call = std::move(call)]() mutable {
    --self->posted_;
    if (target)
      asio::dispatch(*target, std::move(call));
    else
      call();
    self->settle();
  });
}

// After a posted handler ran: let go of the waits if it started nothing.
void stream_state::settle() {
  if (!running_) arm_wait();
}

// ---- the driver ------------------------------------------------------------

void stream_state::run() {
  if (running_) {
    rerun_ = true;
    return;
  }
  running_ = true;
  do {
    rerun_ = false;
    drain();
    pump();
    // Handlers last: one that starts the next operation re-runs the loop.
    deliver(read_done_);
    deliver(write_done_);
  } while (rerun_);
  running_ = false;
  if (lingering_) finish_linger();
  arm_wait();
}

void stream_state::drain() {
  if (!conn_ || failure_) return;
  std::array<completion, poll_batch> wcs;
  for (;;) {
    auto got = cq_.poll(wcs);
    if (!got) return fail(reset_error());
    if (got.value() > 0) last_progress_ = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < got.value(); ++i) on_completion(wcs[i]);
    if (got.value() < wcs.size()) return;
  }
}

void stream_state::arm_wait() {
  const bool needed = fd_ && !failure_ &&
                      (read_ || write_ || posted_ > 0 || lingering_ || (shutdown_ && !fin_sent_));
  hold_events(needed);
  if (!needed) {
    // Nothing waits: like an idle socket, hold no work in the loop.
    if (waiting_ && fd_) fd_->cancel();
    return;
  }
  if (waiting_ || spinning_) return;
  if (cfg_.busy_poll.count() > 0 && !lingering_ &&
      std::chrono::steady_clock::now() - last_progress_ < cfg_.busy_poll) {
    spinning_ = true;
    post_in_slot(ex_, spin_slot_, [self = shared_from_this()] { self->spin(); });
    return;
  }
  waiting_ = true;
  fd_->async_wait(asio::posix::stream_descriptor::wait_read,
                  in_slot(wait_slot_, [self = shared_from_this()](const error_code& ec) {
                    self->on_readable(ec);
                  }));
}

void stream_state::on_readable(const error_code& ec) {
  waiting_ = false;
  if (abandoned_ || !fd_) return;
  if (!ec) {
    // The event, acknowledged and the CQ re-armed, before the drain: a
    // completion after the re-arm fires the channel again. One is all there
    // can be (the stream's one CQ, one event per arming); asking again until
    // EAGAIN cost the soft channel a look at its sockets and an fcntl per
    // wake-up.
    take_ready_cq_events(
        *prov_, channel_, [](provider::cq*) { return true; },
        [this](provider::cq*, const std::error_code& rearm) {
          if (rearm) fail(reset_error());
        },
        1, channel_fd::nonblocking);
  } else if (ec != aerr::operation_aborted) {
    fail(reset_error());
  }
  run();
}

void stream_state::hold_events(bool wanted) noexcept {
  if (wanted == holding_cm_ || !cm_) return;
  holding_cm_ = wanted;
  if (wanted) {
    try {
      cm_->hold();
    } catch (...) {
      holding_cm_ = false;  // no watch: a dead peer is then found by the CQ alone
    }
  } else {
    cm_->release();
  }
}

// Called from inside the connection's event delivery: handlers that may
// close the connection run later, from the loop's queue.
void stream_state::poke() {
  if (abandoned_) return;
  asio::post(ex_, [self = shared_from_this()] {
    if (!self->conn_ || self->abandoned_) return;
    // What the peer sent before it went (its FIN among it) counts first.
    self->drain();
    const conn_state* st = access::state(self->conn_);
    if (st != nullptr && st->closed && !self->fin_received_) self->fail(reset_error());
    self->run();
  });
}

// One busy poll, behind the handlers queued meanwhile; run() posts the next
// while the budget since the last completion lasts, then sleeps on the fd.
void stream_state::spin() {
  spinning_ = false;
  if (abandoned_ || !fd_) return;
  run();
}

// As Asio destroys the operations of a loop that goes, the pending
// handlers go uncalled; one may hold the last handle to this stream.
void stream_state::abandon() noexcept {
  const auto self = weak_from_this().lock();
  abandoned_ = true;
  if (fd_) {
    fd_->release();  // the provider's fd, never closed here
    fd_.reset();
  }
  drop(read_);
  drop(write_);
  read_done_.reset();
  write_done_.reset();
}

template <class Buffer>
void stream_state::drop(std::optional<pending<Buffer>>& op) noexcept {
  if (!op) return;
  auto slot = op->handler.get_cancellation_slot();
  if (slot.is_connected()) slot.clear();
  auto gone = std::move(op->handler);
  op.reset();
}

// The first failure ends the link for both sides: the peer's operations
// end too (with a reset) instead of waiting for messages that never come.
void stream_state::fail(error_code ec) {
  if (failure_) return;
  failure_ = ec;
  if (conn_) (void)conn_.disconnect();
}

// ---- completions -----------------------------------------------------------

void stream_state::on_completion(const completion& c) {
  if ((c.wr_id & send_tag) != 0) {
    --sends_in_flight_;
    if ((c.wr_id & control_tag) == 0)
      free_slots_.push_back(static_cast<std::uint32_t>(c.wr_id & 0xffffffffU));
    if (c.status) fail(reset_error());
    return;
  }
  // A receive flushed after the peer's FIN (it disconnects after it) is the
  // orderly end; any other failed receive is a broken link.
  if (c.status) {
    if (!fin_received_ && !closed_) fail(reset_error());
    return;
  }
  if (!closed_) on_receive(c);
}

void stream_state::on_receive(const completion& c) {
  const auto slot = static_cast<std::uint32_t>(c.wr_id);
  if (!c.imm || (*c.imm & stream_imm::reserved) != 0 || slot >= filled_.size())
    return fail(reset_error());
  const std::uint32_t imm = *c.imm;
  credits_ += imm & stream_imm::credits_mask;
  control_acked_ = static_cast<std::uint8_t>((imm >> stream_imm::ack_shift) & stream_imm::ack_mask);
  // More credit than it ever took, or data after its FIN: a broken protocol.
  if (credits_ > peer_.slots) return fail(reset_error());
  if ((imm & stream_imm::control) != 0) {
    if (c.byte_len != 0) return fail(reset_error());
    if (auto ec = repost(slot)) return fail(reset_error());
    ++control_seen_;
  } else {
    // Data after its FIN, or beyond the credits it was given (every slot it
    // filled is unread or owed): refused before a byte of it is kept.
    if (fin_received_ || filled_count_ + owed_ >= cfg_.slots) return fail(reset_error());
    if (c.byte_len == 0) {
      if (auto ec = repost(slot)) return fail(reset_error());
      ++owed_;
    } else {
      filled_[(filled_head_ + filled_count_) % filled_.size()] = filled{slot, c.byte_len, 0};
      ++filled_count_;
    }
  }
  if ((imm & stream_imm::fin) != 0) fin_received_ = true;
}

std::error_code stream_state::repost(std::uint32_t slot) {
  auto dst = buffer(recv_mr_, std::size_t{slot} * cfg_.slot_size, cfg_.slot_size);
  if (!dst) return dst.error();
  return conn_.post_recv(dst.value(), slot);
}

// ---- moving bytes ----------------------------------------------------------

void stream_state::pump() {
  pump_read();
  pump_write();
  if (!conn_ || failure_) return;
  send_control();
  send_fin();
}

void stream_state::pump_read() {
  if (!read_) return;
  if (total_size(read_->bufs) == 0) return finish(read_, read_done_, {}, 0);
  if (unread()) {
    const auto n = copy_out(read_->bufs);
    return finish(read_, read_done_, failure_ && n == 0 ? failure_ : error_code(), n);
  }
  // Everything before the peer's FIN was read: whatever broke after, eof.
  if (fin_received_) return finish(read_, read_done_, aerr::eof, 0);
  if (failure_) return finish(read_, read_done_, failure_, 0);
  if (!conn_) return finish(read_, read_done_, aerr::operation_aborted, 0);
}

void stream_state::pump_write() {
  if (!write_) return;
  if (failure_) return finish(write_, write_done_, failure_, 0);
  if (shutdown_) return finish(write_, write_done_, aerr::shut_down, 0);
  if (!conn_) return finish(write_, write_done_, aerr::operation_aborted, 0);
  if (total_size(write_->bufs) == 0) return finish(write_, write_done_, {}, 0);
  const auto n = copy_in(write_->bufs);
  if (n > 0 || failure_) finish(write_, write_done_, n > 0 ? error_code() : failure_, n);
}

std::size_t stream_state::copy_out(const stream_buffers<boost::asio::mutable_buffer>& bufs) {
  std::size_t total = 0;
  std::size_t bi = 0;
  std::size_t boff = 0;
  while (filled_count_ > 0 && bi < bufs.count) {
    auto& f = filled_[filled_head_];
    auto* dst = static_cast<std::uint8_t*>(bufs.items[bi].data()) + boff;
    const std::size_t n = std::min<std::size_t>(f.len - f.off, bufs.items[bi].size() - boff);
    std::memcpy(dst, recv_mem_.data() + std::size_t{f.slot} * cfg_.slot_size + f.off, n);
    total += n;
    boff += n;
    f.off += static_cast<std::uint32_t>(n);
    if (boff == bufs.items[bi].size()) {
      ++bi;
      boff = 0;
    }
    if (f.off < f.len) continue;
    filled_head_ = (filled_head_ + 1) % filled_.size();
    --filled_count_;
    if (auto ec = repost(f.slot)) {
      fail(reset_error());
      break;
    }
    ++owed_;
  }
  return total;
}

std::size_t stream_state::copy_in(const stream_buffers<boost::asio::const_buffer>& bufs) {
  const std::size_t limit = std::min(cfg_.slot_size, peer_.slot_size);
  std::size_t total = 0;
  std::size_t bi = 0;
  std::size_t boff = 0;
  while (credits_ > 0 && !free_slots_.empty()) {
    while (bi < bufs.count && boff == bufs.items[bi].size()) {
      ++bi;
      boff = 0;
    }
    if (bi == bufs.count) break;
    const std::uint32_t slot = free_slots_.back();
    std::uint8_t* base = send_mem_.data() + std::size_t{slot} * cfg_.slot_size;
    std::size_t len = 0;
    while (len < limit && bi < bufs.count) {
      const std::size_t n = std::min(limit - len, bufs.items[bi].size() - boff);
      std::memcpy(base + len, static_cast<const std::uint8_t*>(bufs.items[bi].data()) + boff, n);
      len += n;
      boff += n;
      if (boff == bufs.items[bi].size()) {
        ++bi;
        boff = 0;
      }
    }
    auto src = buffer(send_mr_, std::size_t{slot} * cfg_.slot_size, len);
    if (!src || send_msg(src.value(), send_tag | slot, 0)) {
      fail(reset_error());
      break;
    }
    free_slots_.pop_back();
    --credits_;
    total += len;
  }
  return total;
}

std::error_code stream_state::send_msg(const local_buffer& src, std::uint64_t wr_id,
                                       std::uint32_t flags) {
  const std::uint32_t give = std::min(owed_, stream_imm::credits_mask);
  const std::uint32_t imm = give | (std::uint32_t{control_seen_} << stream_imm::ack_shift) | flags;
  if (auto ec = conn_.post_send_with_imm(src, imm, wr_id)) return ec;
  owed_ -= give;
  ++sends_in_flight_;
  return {};
}

// Credits go back on a message of their own once a quarter of the window is
// owed and no data is going that way to carry them.
void stream_state::send_control() {
  if (closed_) return;
  const std::uint32_t threshold = std::max<std::uint32_t>(1, cfg_.slots / 4);
  const auto unacked = static_cast<std::uint8_t>(control_sent_ - control_acked_);
  if (owed_ < threshold || unacked >= control_limit()) return;
  if (send_msg(local_buffer(), send_tag | control_tag, stream_imm::control))
    return fail(reset_error());
  ++control_sent_;
}

void stream_state::send_fin() {
  if (!shutdown_ || fin_sent_ || write_) return;
  const auto unacked = static_cast<std::uint8_t>(control_sent_ - control_acked_);
  std::error_code ec;
  if (unacked < control_limit()) {
    ec = send_msg(local_buffer(), send_tag | control_tag, stream_imm::control | stream_imm::fin);
    if (!ec) ++control_sent_;
  } else if (credits_ > 0 && !free_slots_.empty()) {
    const std::uint32_t slot = free_slots_.back();
    auto src = buffer(send_mr_, std::size_t{slot} * cfg_.slot_size, 0);
    ec = src ? send_msg(src.value(), send_tag | slot, stream_imm::fin) : src.error();
    if (!ec) {
      free_slots_.pop_back();
      --credits_;
    }
  } else {
    return;  // waits for credit
  }
  if (ec) return fail(reset_error());
  fin_sent_ = true;
}

// ---- the end ---------------------------------------------------------------

void stream_state::close() noexcept {
  if (closed_) return;
  if (read_) finish(read_, read_done_, aerr::operation_aborted, 0);
  if (write_) finish(write_, write_done_, aerr::operation_aborted, 0);
  deliver(read_done_);
  deliver(write_done_);
  // Orderly only when nothing received is dropped (what arrived by now
  // counts) and the FIN can go now; then the connection lingers until its
  // last messages are delivered.
  drain();
  closed_ = true;
  if (!conn_) return;
  shutdown_ = true;
  if (!failure_ && !unread()) send_fin();
  if (failure_ || unread() || !fin_sent_) return abort_now();
  lingering_ = true;
  run();
}

void stream_state::finish_linger() {
  if (!failure_ && sends_in_flight_ > 0) return;
  lingering_ = false;
  abort_now();
}

void stream_state::abort_now() noexcept {
  hold_events(false);
  if (fd_) {
    if (waiting_) fd_->cancel();  // its handler holds this state until it runs
    fd_->release();
    fd_.reset();
  }
  if (!conn_) return;
  (void)conn_.disconnect();
  (void)conn_.close();
  cq_ = cq();
}

}  // namespace arpma::detail

#include "core/cq_dispatcher.hpp"
#include "core/completion_of.hpp"
#include "core/cq_events.hpp"
#include "core/error_internal.hpp"
#include "core/fd_ready.hpp"
#include "core/parked_op.hpp"
#include "support/log.hpp"

#include <algorithm>
#include <array>
#include <span>

namespace arpma::detail {
namespace {

// Owns an operation on its way to the queue.
struct op_owner {
  wc_op* op;
  explicit op_owner(wc_op* o) noexcept : op(o) {}
  op_owner(op_owner&& other) noexcept : op(std::exchange(other.op, nullptr)) {}
  op_owner(const op_owner&) = delete;
  op_owner& operator=(const op_owner&) = delete;
  op_owner& operator=(op_owner&&) = delete;
  ~op_owner() {
    if (op != nullptr) op->destroy();
  }
};

}  // namespace

void fail_op(const asio::any_io_executor& ex, wc_op* op, const std::error_code& ec) {
  if (!runs_operations(ex)) return op->fail_unstarted(to_completion_error(ec));
  op_owner owned(op);
  asio::post(ex, [o = std::move(owned), ex, error = to_completion_error(ec)]() mutable {
    std::exchange(o.op, nullptr)->complete(ex, error, completion{});
  });
}

cq_dispatcher::cq_dispatcher(provider::provider& prov,
                             const std::vector<provider::comp_channel*>& channels,
                             std::vector<provider::cq*> cqs, asio::any_io_executor ex,
                             std::shared_ptr<comp_channel_state> shared)
    : prov_(prov), cqs_(std::move(cqs)), ex_(std::move(ex)), shared_(std::move(shared)) {
  for (auto* native : channels) {
    if (native == nullptr) continue;
    auto ch = std::make_unique<channel>();
    ch->native = native;
    channels_.push_back(std::move(ch));
  }
}

void cq_dispatcher::register_channels() noexcept {
  // At the connection's first operation, not at its first wait: a busy poll
  // may first run out of budget long after warm-up, and a registration
  // allocates (the reactor's descriptor state). Not at creation either
  // (set_busy_poll makes the dispatcher): a registered fd nobody waits on
  // still wakes the reactor, and a soft channel's fd is readable at every
  // frame of its links, so a passive target of writes woke once per write.
  // Should it fail here, the first wait registers it.
  registered_ = true;
  for (auto& ch : channels_) {
    if (ch->fd) continue;
    try {
      adopt(*ch);
    } catch (const std::exception& e) {
      ARPMA_LOG(log_level::debug, "completion channel registered at its first wait: %s", e.what());
    }
  }
}

cq_dispatcher::~cq_dispatcher() { close(); }

std::uint64_t cq_dispatcher::add(wc_op* op) {
  std::uint32_t index = free_;
  if (index == no_slot) {
    index = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  } else {
    free_ = slots_[index].next_free;
  }
  auto& s = slots_[index];
  s.op = op;
  ++pending_;
  return (static_cast<std::uint64_t>(s.generation) << 32U) | index;
}

wc_op* cq_dispatcher::take(std::uint64_t wr_id) noexcept {
  const auto index = static_cast<std::uint32_t>(wr_id);
  if (index >= slots_.size()) return nullptr;
  auto& s = slots_[index];
  if (s.op == nullptr || s.generation != static_cast<std::uint32_t>(wr_id >> 32U)) return nullptr;
  ++s.generation;  // a late duplicate of this wr_id finds nothing
  s.next_free = free_;
  free_ = index;
  --pending_;
  return std::exchange(s.op, nullptr);
}

wc_op* cq_dispatcher::remove(std::uint64_t wr_id) noexcept {
  auto* op = take(wr_id);
  settle();
  return op;
}

void cq_dispatcher::fail(wc_op* op, const std::error_code& ec) { fail_op(ex_, op, ec); }

void cq_dispatcher::kick() {
  if (closed_ || pending_ == 0) return;
  if (!registered_) register_channels();
  if (unarmed_) {  // not from inside the call that posted the operation
    asio::post(ex_, [self = shared_from_this()] { self->fail_pending(); });
    return;
  }
  if (busy_polling_) return;  // the poll under way finds it; no fd to watch meanwhile
  if (busy_budget_.count() > 0) {
    busy_polling_ = true;
    // (No clock reading here: the poll's start is its budget's start.)
    post_busy_poll({});
    return;
  }
  watch_all();
}

void cq_dispatcher::watch_all() {
  for (auto& ch : channels_) watch(*ch);
  if (!shared_ || closed_ || pending_ == 0) return;
  if (!wants_shared_) {
    wants_shared_ = true;
    shared_->want();
  }
  shared_->watch();
}

void cq_dispatcher::settle() noexcept {
  if (!wants_shared_ || (!closed_ && !pending_ == 0)) return;
  wants_shared_ = false;
  shared_->unwant();
}

void cq_dispatcher::on_shared_event() {
  fired_ = false;
  if (closed_) return;
  // The shared channel may run on another executor (a strand per connection
  // on one completion channel): handlers must run on this one.
  if (shared_ && !(shared_->ex == ex_)) {
    asio::post(ex_, [self = shared_from_this()] { self->drain_shared(); });
    return;
  }
  drain_shared();
}

void cq_dispatcher::drain_shared() {
  if (closed_) return;
  drain_cqs();
  if (closed_) return;
  if (unarmed_) fail_pending();
  settle();
}

void cq_dispatcher::busy_poll(std::chrono::steady_clock::time_point since) {
  // Spins inline, polling and serving what completes (a handler that posts
  // again finds its completion here on a fast device). It goes back to the
  // queue, behind the loop's other handlers, after a slice of empty polls
  // (restarted at each completion, so that slow handlers, as on an emulated
  // guest, do not use it up: that made one yield per operation), or after a
  // run of completions that has lasted a slice too (a count alone made one
  // yield, an epoll_wait(0), per 16 instant completions). Posting after
  // every empty poll made each poll cost the scheduler's epoll_wait(0).
  // The clock is read at empty polls and at every 16th completion of a run,
  // not at each completion: on a device that completes at once it cost an
  // eighth of a busy-polled co_await operation.
  using clock = std::chrono::steady_clock;
  const auto slice = std::min(busy_budget_, busy_spin_slice);
  const auto start = clock::now();
  if (since == clock::time_point{}) since = start;  // from kick(): a fresh budget
  auto slice_end = start + slice;
  const auto restart = [&](clock::time_point now) {  // progress: budget and slice start again
    since = now;
    slice_end = now + slice;
  };
  bool progressed = false;  // since the last reading of the clock
  for (int served = 0;;) {
    if (closed_) return;
    const auto before = dispatched_;
    drain_cqs();
    if (closed_) return;
    if (pending_ == 0) {
      busy_polling_ = false;
      return;
    }
    if (dispatched_ != before) {
      progressed = true;
      if (++served % busy_progress_rounds != 0) continue;
      const auto now = clock::now();
      restart(now);
      progressed = false;
      if (now - start < slice) continue;
    } else {
      const auto now = clock::now();
      if (std::exchange(progressed, false)) {
        restart(now);
        continue;
      }
      if (now - since >= busy_budget_) break;
      if (now < slice_end) continue;
    }
    post_busy_poll(since);
    return;
  }
  busy_polling_ = false;
  watch_all();  // out of budget: sleep on the fds
}

void cq_dispatcher::post_busy_poll(std::chrono::steady_clock::time_point since) {
  post_in_slot(ex_, poll_slot_, [self = shared_from_this(), since] { self->busy_poll(since); });
}

void cq_dispatcher::adopt(channel& ch) {
  // Only this dispatcher reads a C++ connection's channels (the C API's
  // blocking fds never get one): non-blocking, an event is read without
  // asking the fd first, and a wake-up that finds nothing reads EAGAIN.
  ch.nonblocking = !adopt_non_blocking(ch.fd, ex_, prov_.comp_channel_fd(ch.native));
}

void cq_dispatcher::watch(channel& ch) {
  if (closed_ || ch.waiting || pending_ == 0) return;
  ch.waiting = true;
  if (!ch.fd) adopt(ch);
  when_readable(ch.fd, ex_, prov_.comp_channel_fd(ch.native), ch.wait_slot,
                [self = shared_from_this(), &ch](const std::error_code& ec) {
                  if (ec) {
                    ch.waiting = false;
                    return;
                  }
                  self->on_readable(ch);
                });
}

void cq_dispatcher::on_readable(channel& ch) {
  ch.waiting = false;
  if (closed_) return;
  // One event, acknowledged and its CQ re-armed, then drain: the drain
  // takes every completion of every CQ anyway, and an event still there
  // (the other CQ's) wakes the next wait at once. Checking the fd again
  // after each read cost a poll(2) per operation.
  take_ready_cq_events(
      prov_, ch.native, [](provider::cq*) { return true; },
      [this](provider::cq*, const std::error_code& rearm) {
        if (rearm) unarmed_ = true;  // what waits on it fails rather than hangs
      },
      1, ch.nonblocking ? channel_fd::nonblocking : channel_fd::any);
  drain_cqs();
  if (closed_) return;
  if (unarmed_) {
    fail_pending();
    return;
  }
  // Busy-poll mode slept on the fd after a stall; woken, it polls again
  // (watching the fd as well would take, acknowledge and re-arm an event
  // per operation from then on).
  if (busy_budget_.count() > 0) return kick();
  watch(ch);
}

void cq_dispatcher::fail_pending() noexcept {
  for (std::uint32_t i = 0; i < slots_.size(); ++i) {
    auto& s = slots_[i];
    if (s.op == nullptr) continue;
    auto* op = take((static_cast<std::uint64_t>(s.generation) << 32U) | i);
    try {
      fail(op, aborted());
    } catch (...) {
      op->destroy();  // no memory to post it: dropped, as the loop's end would
    }
  }
  settle();
}

void cq_dispatcher::drain_cqs() {
  if (draining_) {
    std::array<provider::work_completion, 4> nested{};
    drain_into(nested);
  } else {
    draining_ = true;
    drain_into(batch_);
    draining_ = false;
  }
  if (!closed_) settle();
}

void cq_dispatcher::drain_into(std::span<provider::work_completion> batch) {
  auto& p = prov_;
  for (auto* cq : cqs_) {
    if (cq == nullptr) continue;
    for (;;) {
      auto got = p.poll_cq(cq, batch);
      if (!got) {
        ARPMA_LOG_FAILURE("poll cq", got.error());
        break;
      }
      for (std::size_t i = 0; i < got.value(); ++i) {
        deliver(batch[i]);
        // A handler closed the connection: its CQs are gone, and what the
        // batch still holds was completed as aborted.
        if (closed_) return;
      }
      if (got.value() < batch.size()) break;
    }
  }
}

void cq_dispatcher::deliver(const provider::work_completion& wc) {
  auto* op = take(wc.wr_id);
  ++dispatched_;
  if (op == nullptr) {
    ARPMA_LOG(log_level::debug, "completion for wr_id %llu without owner",
              static_cast<unsigned long long>(wc.wr_id));
    return;
  }
  if (op->cancelled()) return op->complete(ex_, to_completion_error(aborted()), completion{});
  if (wc.status != provider::wc_status::success)
    return op->complete(ex_, to_completion_error(status_error(wc.status)),
                        completion_of(wc, false));
  op->complete(ex_, error_code(), completion_of(wc, false));
}

void cq_dispatcher::close() noexcept {
  if (closed_) return;
  closed_ = true;
  release_fds();
  settle();
  fail_pending();
}

void cq_dispatcher::abandon() noexcept {
  closed_ = true;
  release_fds();
  settle();
  for (std::uint32_t i = 0; i < slots_.size(); ++i) {
    auto& s = slots_[i];
    if (s.op == nullptr) continue;
    take((static_cast<std::uint64_t>(s.generation) << 32U) | i)->destroy();  // uncalled
  }
}

void cq_dispatcher::release_fds() noexcept {
  for (auto& ch : channels_)
    if (ch->fd) {
      ch->fd->release();  // the provider owns the fd
      ch->fd.reset();
    }
}

}  // namespace arpma::detail

#include "core/cq_dispatcher.hpp"
#include "core/fd_ready.hpp"

#include "core/log_internal.hpp"

#include <array>
#include <span>

namespace arpma::detail {

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

cq_dispatcher::~cq_dispatcher() { close(); }

std::uint64_t cq_dispatcher::add(std::shared_ptr<wc_waiter> w) {
  const auto id = next_id_++;
  pending_.emplace(id, std::move(w));
  return id;
}

void cq_dispatcher::remove(std::uint64_t wr_id) noexcept {
  pending_.erase(wr_id);
  settle();
}

void cq_dispatcher::kick() {
  if (closed_ || pending_.empty()) return;
  if (unarmed_) {  // not from inside the call that posted the operation
    asio::post(ex_, [self = shared_from_this()] { self->fail_pending(); });
    return;
  }
  if (busy_budget_.count() > 0 && !busy_polling_) {
    busy_polling_ = true;
    asio::post(ex_, [self = shared_from_this(), now = std::chrono::steady_clock::now()] {
      self->busy_poll(now);
    });
    return;
  }
  watch_all();
}

void cq_dispatcher::watch_all() {
  for (auto& ch : channels_) watch(*ch);
  if (!shared_ || closed_ || pending_.empty()) return;
  if (!wants_shared_) {
    wants_shared_ = true;
    shared_->want();
  }
  shared_->watch();
}

void cq_dispatcher::settle() noexcept {
  if (!wants_shared_ || (!closed_ && !pending_.empty())) return;
  wants_shared_ = false;
  shared_->unwant();
}

void cq_dispatcher::on_shared_event() {
  fired_ = false;
  if (closed_) return;
  drain_cqs();
  if (unarmed_) fail_pending();
  settle();
}

void cq_dispatcher::busy_poll(std::chrono::steady_clock::time_point since) {
  if (closed_) return;
  const auto before = pending_.size();
  drain_cqs();
  if (pending_.empty()) {
    busy_polling_ = false;
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (pending_.size() < before) since = now;  // progress: the budget starts again
  if (now - since < busy_budget_) {
    // Other handlers of the loop run between two polls.
    asio::post(ex_, [self = shared_from_this(), since] { self->busy_poll(since); });
    return;
  }
  busy_polling_ = false;
  watch_all();  // out of budget: sleep on the fds
}

void cq_dispatcher::watch(channel& ch) {
  if (closed_ || ch.waiting || pending_.empty()) return;
  ch.waiting = true;
  when_readable(ch.fd, ex_, prov_.comp_channel_fd(ch.native),
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
  auto& p = prov_;
  // Every pending event, each acknowledged and its CQ re-armed, then drain.
  // Read only what is there: a blocking fd must never block the loop.
  const int fd = p.comp_channel_fd(ch.native);
  while (readable(fd)) {
    auto fired = p.get_cq_event(ch.native);
    if (!fired) break;
    p.ack_cq_events(fired.value(), 1);
    // An unarmed CQ never signals again: what waits on it would wait forever (found by fault
    // injection). Once more, then the operations fail rather than hang.
    if (auto ec = p.req_notify_cq(fired.value(), false)) {
      ARPMA_LOG_FAILURE("re-arm cq", ec);
      if (auto again = p.req_notify_cq(fired.value(), false)) {
        ARPMA_LOG_FAILURE("re-arm cq again; failing the operations waiting on it", again);
        unarmed_ = true;
      }
    }
  }
  drain_cqs();
  if (unarmed_) {
    fail_pending();
    return;
  }
  watch(ch);
}

void cq_dispatcher::fail_pending() noexcept {
  auto pending = std::exchange(pending_, {});
  for (auto& [id, w] : pending) w->on_closed();
  settle();
}

void cq_dispatcher::drain_cqs() {
  auto& p = prov_;
  std::array<provider::work_completion, 32> batch{};
  for (auto* cq : cqs_) {
    if (cq == nullptr) continue;
    for (;;) {
      auto got = p.poll_cq(cq, batch);
      if (!got) {
        ARPMA_LOG_FAILURE("poll cq", got.error());
        break;
      }
      for (std::size_t i = 0; i < got.value(); ++i) dispatch(batch[i]);
      if (got.value() < batch.size()) break;
    }
  }
  settle();
}

void cq_dispatcher::dispatch(const provider::work_completion& wc) {
  const auto it = pending_.find(wc.wr_id);
  if (it == pending_.end()) {
    ARPMA_LOG(log_level::debug, "completion for wr_id %llu without owner",
              static_cast<unsigned long long>(wc.wr_id));
    return;
  }
  auto waiter = std::move(it->second);
  pending_.erase(it);
  waiter->on_wc(wc);
}

void cq_dispatcher::close() noexcept {
  if (closed_) return;
  closed_ = true;
  for (auto& ch : channels_)
    if (ch->fd) {
      ch->fd->release();  // the provider owns the fd
      ch->fd.reset();
    }
  settle();
  auto pending = std::exchange(pending_, {});
  for (auto& [id, w] : pending) w->on_closed();
}

void cq_dispatcher::abandon() noexcept {
  closed_ = true;
  for (auto& ch : channels_)
    if (ch->fd) {
      ch->fd->release();
      ch->fd.reset();
    }
  settle();
  auto dropped = std::exchange(pending_, {});  // destroyed here, handlers uncalled
}

}  // namespace arpma::detail

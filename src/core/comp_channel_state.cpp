#include "core/comp_channel_state.hpp"

#include "arpma/error.hpp"
#include "core/cq_dispatcher.hpp"
#include "core/cq_events.hpp"
#include "core/fd_ready.hpp"
#include "support/log.hpp"

#include <new>

namespace arpma::detail {

result<std::shared_ptr<comp_channel_state>> comp_channel_state::create(
    std::shared_ptr<peer_state> p, const asio::any_io_executor& ex) {
  if (!p || !ex) return make_error_code(errc::invalid_argument);
  std::shared_ptr<comp_channel_state> state;
  try {
    state = std::make_shared<comp_channel_state>(std::move(p), ex);
  } catch (const std::bad_alloc&) {
    return make_error_code(errc::no_memory);
  }
  auto created = state->prov().create_comp_channel(state->peer->dev);
  if (!created) {
    ARPMA_LOG_FAILURE("create completion channel", created.error());
    return created.error();
  }
  state->native = created.value();
  on_loop_shutdown(ex, state);
  return state;
}

std::error_code comp_channel_state::destroy() noexcept {
  if (native == nullptr) return {};
  if (fd_) {
    fd_->release();  // the provider owns the fd
    fd_.reset();
  }
  const auto ec = prov().destroy_comp_channel(std::exchange(native, nullptr));
  if (ec) ARPMA_LOG_FAILURE("destroy completion channel", ec);
  return ec;
}

int comp_channel_state::fd() const noexcept {
  return native != nullptr ? prov().comp_channel_fd(native) : -1;
}

void comp_channel_state::add_cq(provider::cq* cq) { cqs_.emplace(cq, cq_entry{}); }

void comp_channel_state::remove_cq(provider::cq* cq) noexcept { cqs_.erase(cq); }

void comp_channel_state::bind(provider::cq* cq, const std::shared_ptr<cq_dispatcher>& d) {
  const auto it = cqs_.find(cq);
  if (it == cqs_.end()) return;
  it->second.dispatcher = d;
  if (d && it->second.unarmed) d->mark_unarmed();
}

void comp_channel_state::want() noexcept { ++wanting_; }

void comp_channel_state::unwant() noexcept {
  if (wanting_ == 0 || --wanting_ > 0 || !waiting_ || !fd_) return;
  // Nobody waits any more (the last one may have been closed with operations
  // pending): a wait left on the fd would keep the io_context busy.
  boost::system::error_code ignored;
  fd_->cancel(ignored);
}

void comp_channel_state::watch() {
  if (abandoned_ || native == nullptr || waiting_ || wanting_ == 0) return;
  waiting_ = true;
  when_readable(fd_, ex, fd(), watch_slot_, [self = shared_from_this()](const std::error_code& ec) {
    if (ec) {
      // Cancelled by unwant; someone may want it again since.
      self->waiting_ = false;
      self->watch();
      return;
    }
    self->on_readable();
  });
}

void comp_channel_state::on_readable() {
  waiting_ = false;
  if (abandoned_ || native == nullptr) return;
  fired_.clear();
  take_ready_cq_events(
      prov(), native,
      // Not ours to acknowledge (the provider forgets a destroyed CQ's events).
      [this](provider::cq* cq) { return cqs_.contains(cq); },
      [this](provider::cq* cq, const std::error_code& rearm) {
        auto& entry = cqs_.find(cq)->second;
        auto d = entry.dispatcher.lock();
        if (rearm) {
          if (d)
            d->mark_unarmed();
          else
            entry.unarmed = true;
        }
        if (d && d->note_fired()) fired_.push_back(std::move(d));
      });
  // Drained after every event is taken and its CQ re-armed: what completes
  // from now on fires again. (Their operations' handlers are posted, so
  // nothing here re-enters this function.)
  for (auto& d : fired_) d->on_shared_event();
  fired_.clear();
  watch();
}

void comp_channel_state::abandon() noexcept {
  abandoned_ = true;
  if (fd_) {
    fd_->release();
    fd_.reset();
  }
  fired_.clear();
}

}  // namespace arpma::detail

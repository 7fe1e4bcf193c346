#include "core/cm_channel.hpp"
#include "core/fd_ready.hpp"

#include "arpma/error.hpp"

#include "support/log.hpp"

#include <cerrno>
#include <map>
#include <mutex>
#include <vector>

namespace arpma::detail {

// The io_context's parked operations, linked through their own hooks.
class parked_list {
 public:
  void push(parked_link& op) noexcept {
    op.prev_ = nullptr;
    op.next_ = head_;
    if (head_ != nullptr) head_->prev_ = &op;
    head_ = &op;
    op.linked_ = true;
  }
  void erase(parked_link& op) noexcept {
    if (!op.linked_) return;
    if (op.prev_ != nullptr) op.prev_->next_ = op.next_;
    if (op.next_ != nullptr) op.next_->prev_ = op.prev_;
    if (head_ == &op) head_ = op.next_;
    op.prev_ = op.next_ = nullptr;
    op.linked_ = false;
  }
  /// Unlinks the first one, or nullptr.
  parked_link* pop() noexcept {
    parked_link* first = head_;
    if (first != nullptr) erase(*first);
    return first;
  }

 private:
  parked_link* head_ = nullptr;
};

namespace {

// Per io_context: the shared channel of each provider, and every channel
// bound to the context so they can let go of their descriptors before the
// reactor is destroyed.
class cm_service final : public asio::execution_context::service {
 public:
  using key_type = cm_service;
  // NOLINTNEXTLINE(cert-err58-cpp): asio's id has an empty constructor; it cannot throw
  static inline asio::execution_context::id id;

  explicit cm_service(asio::execution_context& ctx) : service(ctx) {}

  void shutdown() override {
    // Parked operations first: destroying them releases what they hold.
    for (;;) {
      parked_link* op = nullptr;
      {
        const std::lock_guard lock(mutex_);
        stopped_ = true;
        op = parked_.pop();
      }
      if (op == nullptr) break;
      op->abandon_parked();
    }
    std::vector<std::shared_ptr<cm_channel>> live;
    std::vector<std::shared_ptr<loop_shutdown_listener>> listeners;
    {
      const std::lock_guard lock(mutex_);
      for (auto& weak : bound_)
        if (auto channel = weak.lock()) live.push_back(std::move(channel));
      for (auto& weak : listeners_)
        if (auto l = weak.lock()) listeners.push_back(std::move(l));
      bound_.clear();
      shared_.clear();
      listeners_.clear();
    }
    for (auto& l : listeners) l->abandon();
    for (auto& channel : live) channel->shutdown();
  }

  bool park(parked_link& op) {
    const std::lock_guard lock(mutex_);
    if (stopped_) return false;
    parked_.push(op);
    return true;
  }
  void unpark(parked_link& op) noexcept {
    const std::lock_guard lock(mutex_);
    parked_.erase(op);
  }

  void listen(const std::shared_ptr<loop_shutdown_listener>& l) {
    const std::lock_guard lock(mutex_);
    std::erase_if(listeners_, [](const auto& weak) { return weak.expired(); });
    listeners_.push_back(l);
  }

  result<std::shared_ptr<cm_channel>> shared(provider::provider& prov,
                                             const asio::any_io_executor& ex) {
    {
      const std::lock_guard lock(mutex_);
      if (auto existing = shared_[&prov].lock()) return existing;
    }
    auto created = cm_channel::create(prov, ex);  // binds itself: not under the lock
    if (created) {
      const std::lock_guard lock(mutex_);
      shared_[&prov] = created.value();
    }
    return created;
  }

  void bind(const std::shared_ptr<cm_channel>& channel) {
    const std::lock_guard lock(mutex_);
    std::erase_if(bound_, [](const auto& weak) { return weak.expired(); });
    bound_.push_back(channel);
  }

 private:
  std::mutex mutex_;
  std::map<provider::provider*, std::weak_ptr<cm_channel>> shared_;
  std::vector<std::weak_ptr<cm_channel>> bound_;
  std::vector<std::weak_ptr<loop_shutdown_listener>> listeners_;
  parked_list parked_;
  bool stopped_ = false;
};

cm_service& service_of(const asio::any_io_executor& ex) {
  auto& ctx = asio::query(ex, asio::execution::context);
  if (!asio::has_service<cm_service>(ctx)) {
    // Registers the reactor's descriptor service first, so this service shuts
    // down (and drops its descriptors) while the reactor still exists.
    const asio::posix::stream_descriptor registers_reactor(ex);
  }
  return asio::use_service<cm_service>(ctx);
}

}  // namespace

result<std::shared_ptr<cm_channel>> cm_channel::create(provider::provider& prov,
                                                       const asio::any_io_executor& ex) {
  auto native = prov.create_event_channel();
  if (!native) {
    ARPMA_LOG_FAILURE("create event channel", native.error());
    return native.error();
  }
  std::shared_ptr<cm_channel> channel;
  try {
    channel = std::make_shared<cm_channel>(prov, native.value(), ex);
  } catch (const std::bad_alloc&) {
    prov.destroy_event_channel(native.value());
    return make_error_code(errc::no_memory);
  }
  service_of(ex).bind(channel);
  return channel;
}

cm_channel::cm_channel(provider::provider& prov, provider::event_channel* native,
                       asio::any_io_executor ex)
    : prov_(prov), native_(native), ex_(std::move(ex)) {}

cm_channel::~cm_channel() {
  release_descriptor();
  prov_.destroy_event_channel(native_);
}

int cm_channel::fd() const noexcept { return prov_.event_channel_fd(native_); }

void cm_channel::attach(std::uint64_t token, cm_event_sink* sink, const asio::any_io_executor& ex) {
  const std::lock_guard lock(mutex_);
  sinks_[token] = route{sink, ex ? ex : ex_};
}

void cm_channel::detach(std::uint64_t token) noexcept {
  const std::lock_guard lock(mutex_);
  sinks_.erase(token);
}

void cm_channel::hold() {
  const std::lock_guard lock(mutex_);
  ++holds_;
  watch_locked();
}

void cm_channel::release() noexcept {
  const std::lock_guard lock(mutex_);
  if (holds_ > 0) --holds_;
  if (holds_ == 0 && watching_ && descriptor_) {
    boost::system::error_code ignored;
    descriptor_->cancel(ignored);
  }
}

void cm_channel::shutdown() noexcept {
  const std::lock_guard lock(mutex_);
  closed_ = true;
  sinks_.clear();
  holds_ = 0;
  release_descriptor();
}

void cm_channel::release_descriptor() noexcept {
  if (!descriptor_) return;
  descriptor_->release();  // the fd belongs to the provider's channel
  descriptor_.reset();
}

void cm_channel::watch_locked() {
  if (watching_ || closed_ || holds_ == 0) return;
  if (!descriptor_) {
    if (made_blocking_.load(std::memory_order_acquire))
      descriptor_.emplace(ex_, fd());
    else if (!adopt_non_blocking(descriptor_, ex_, fd()))
      nonblocking_.store(true, std::memory_order_release);
  }
  watching_ = true;
  descriptor_->async_wait(
      asio::posix::stream_descriptor::wait_read,
      [self = shared_from_this()](const std::error_code& ec) { self->on_ready(ec); });
}

void cm_channel::on_ready(const std::error_code& ec) {
  {
    const std::lock_guard lock(mutex_);
    watching_ = false;
    if (closed_) return;
  }
  if (!ec) drain();
  const std::lock_guard lock(mutex_);
  // Unheld, the descriptor stays registered with no wait queued: it keeps
  // no run() going, and the next hold costs one EPOLL_CTL_MOD instead of a
  // deregistration now and a registration (ADD, FIONBIO, MOD) then, which a
  // connection paid at each of its phases.
  watch_locked();
}

result<provider::cm_event> cm_channel::read_now() {
  provider::cm_event event;
  const std::error_code ec = prov_.get_cm_event(native_, event);
  if (ec == std::errc::resource_unavailable_try_again || ec == std::errc::no_message_available)
    return make_error_code(errc::no_event);
  if (ec) {
    ARPMA_LOG_FAILURE("get cm event", ec);
    return ec;
  }
  return event;
}

std::error_code cm_channel::set_blocking(bool blocking) noexcept {
  made_blocking_.store(blocking, std::memory_order_release);
  if (blocking) {
    {
      // Blocking as the provider made it, unless this side made it not or the
      // reactor has seen it (its first wait does): a C connection pays no ioctl.
      const std::lock_guard lock(mutex_);
      if (!descriptor_ && !nonblocking_.load(std::memory_order_acquire)) return {};
    }
    nonblocking_.store(false, std::memory_order_release);
    return set_fd_blocking(fd(), true);
  }
  const std::error_code ec = set_fd_blocking(fd(), false);
  if (!ec) nonblocking_.store(true, std::memory_order_release);
  return ec;
}

// The reactor is edge-triggered: read until nothing is left or the next event
// is never signalled. A blocking fd (the C flavour's) is asked first, one
// poll(2) per event, so that the loop never blocks in a read; a non-blocking
// one is read until EAGAIN.
void cm_channel::drain() {
  const std::lock_guard reading(drain_mutex_);
  for (;;) {
    if (!nonblocking_.load(std::memory_order_acquire) && !readable(fd())) return;
    provider::cm_event event;
    const std::error_code ec = prov_.get_cm_event_nonblocking(native_, event);
    if (ec == std::errc::resource_unavailable_try_again) return;
    if (ec) {
      ARPMA_LOG_FAILURE("get cm event", ec);
      return;
    }
    asio::any_io_executor to;
    {
      const std::lock_guard lock(mutex_);
      const auto it = sinks_.find(event.context);
      if (it != sinks_.end()) to = it->second.ex;
    }
    if (!to) {
      ARPMA_LOG(log_level::debug, "dropped %s for an id without owner",
                provider::to_string(event.type));
      continue;
    }
    ARPMA_LOG(log_level::debug, "%s for token %llu", provider::to_string(event.type),
              static_cast<unsigned long long>(event.context));
    // On the sink's executor; looked up again there: it may have gone since.
    asio::dispatch(to, [self = shared_from_this(), event] { self->deliver(event); });
  }
}

void cm_channel::deliver(const provider::cm_event& event) {
  cm_event_sink* sink = nullptr;
  {
    const std::lock_guard lock(mutex_);
    const auto it = sinks_.find(event.context);
    if (it != sinks_.end()) sink = it->second.sink;
  }
  // Detached only on its own executor, which this runs on: it cannot go now.
  if (sink != nullptr) sink->on_cm_event(event);
}

void on_loop_shutdown(const asio::any_io_executor& ex,
                      const std::shared_ptr<loop_shutdown_listener>& listener) {
  service_of(ex).listen(listener);
}

bool park_on_loop(const asio::any_io_executor& ex, parked_link& op) {
  return service_of(ex).park(op);
}

void unpark_from_loop(const asio::any_io_executor& ex, parked_link& op) noexcept {
  service_of(ex).unpark(op);
}

result<std::shared_ptr<cm_channel>> loop_cm_channel(provider::provider& prov,
                                                    const asio::any_io_executor& ex) {
  return service_of(ex).shared(prov, ex);
}

}  // namespace arpma::detail

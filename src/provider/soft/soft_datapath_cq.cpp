// The soft provider's CQs as a poll sees them: taking completions, moving
// the links of the CQ's QPs on the polling thread, and arming (which gives
// those links back to the progress thread, unless the CQ's completion
// channel watches them); and the completion channels' reading side.
#include "provider/soft/soft_datapath.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <vector>

namespace arpma::provider::soft_dp {

// ---- CQs ---------------------------------------------------------------------------------

namespace {

std::size_t take(soft_cq& cq, std::span<work_completion> out) {
  const std::lock_guard lock(cq.mutex);
  const std::size_t n = std::min(out.size(), cq.entries.size());
  std::copy_n(cq.entries.begin(), n, out.begin());
  cq.entries.pop_front(n);
  return n;
}

/// Has the QP's link moved on this thread (`how`).
void drive_link(soft_qp& qp, drive how) {
  std::shared_ptr<const std::function<void(drive)>> progress;
  {
    const std::lock_guard lock(qp.mutex);
    if (qp.state == qp_state::ready) progress = qp.link.progress;
  }
  if (progress && *progress) (*progress)(how);
}

/// Moves the links of the CQ's QPs on this thread (`how`: poll or release;
/// a poll of an armed CQ only peeks). A link the CQ's channel watches is
/// not released (a frame arriving wakes the channel's reader itself), nor
/// peeked at when that reader drained it last. The QP locks are taken after
/// the CQ's is released (completing takes them in the other order).
void drive_links(soft_cq& cq, drive how) {
  thread_local std::vector<std::weak_ptr<soft_qp>> users;
  {
    const std::lock_guard lock(cq.mutex);
    users = cq.users;
    if (how == drive::poll && cq.armed) how = drive::peek;
  }
  for (const auto& weak : users) {
    const std::shared_ptr<soft_qp> qp = weak.lock();
    if (!qp) continue;
    drive mode = how;
    if (qp->watched.load()) {
      if (how == drive::peek) mode = drive::peek_watched;
      if (how == drive::release) mode = drive::sleep;
    }
    drive_link(*qp, mode);
  }
  users.clear();
}

thread_local soft_comp_channel* reading = nullptr;

/// next_event's turn on this thread: completions into the channel's CQs
/// are queued silently meanwhile, and announced when it ends.
class reading_scope {
 public:
  explicit reading_scope(soft_comp_channel& ch) noexcept : ch_(ch), outer_(reading) {
    reading = &ch;
  }
  reading_scope(const reading_scope&) = delete;
  reading_scope& operator=(const reading_scope&) = delete;
  ~reading_scope() {
    reading = outer_;
    ch_.fired.settle();
  }

 private:
  soft_comp_channel& ch_;
  soft_comp_channel* outer_;
};

/// Moves the links whose sockets woke the channel since its last look
/// (edge-triggered: a frame left unread by a busy link is the progress
/// thread's, so a stalled link cannot make the reader spin).
void move_woken_links(soft_comp_channel& ch) {
  constexpr int batch = 64;
  std::array<epoll_event, batch> events{};
  const int n = ::epoll_wait(ch.epfd, events.data(), batch, 0);
  if (n <= 0) return;
  std::array<std::shared_ptr<soft_qp>, batch> woken;  // no allocation per wake-up
  std::size_t count = 0;
  {
    const std::lock_guard lock(ch.watch_mutex);
    for (int i = 0; i < n; ++i) {
      const auto it = ch.watched.find(events[static_cast<std::size_t>(i)].data.u64);
      if (it == ch.watched.end()) continue;  // the eventfd (token 0), or gone meanwhile
      if (auto qp = it->second.qp.lock()) woken[count++] = std::move(qp);
    }
  }
  for (std::size_t i = 0; i < count; ++i) drive_link(*woken[i], drive::wake);
}

bool nonblocking(int fd) noexcept {
  const int flags = ::fcntl(fd, F_GETFL);
  return flags < 0 || (flags & O_NONBLOCK) != 0;
}

std::uint64_t token_of(const soft_qp& qp) noexcept { return reinterpret_cast<std::uintptr_t>(&qp); }

void unwatch(soft_comp_channel& ch, const soft_qp& qp) {
  const std::lock_guard lock(ch.watch_mutex);
  const auto it = ch.watched.find(token_of(qp));
  if (it == ch.watched.end()) return;
  if (it->second.watch) (void)it->second.watch(ch.epfd, it->first, false);
  ch.watched.erase(it);
}

/// The distinct channels of the QP's CQs.
std::array<soft_comp_channel*, 2> channels_of(const soft_qp& qp) noexcept {
  soft_comp_channel* a = qp.send_cq->channel;
  soft_comp_channel* b = qp.recv_cq->channel;
  return {a, b == a ? nullptr : b};
}

void forget(soft_cq& cq, const soft_qp* qp) {
  const std::lock_guard lock(cq.mutex);
  std::erase_if(cq.users, [qp](const std::weak_ptr<soft_qp>& w) {
    const auto alive = w.lock();
    return !alive || alive.get() == qp;
  });
}

}  // namespace

std::size_t poll(soft_cq& cq, std::span<work_completion> out) {
  if (const std::size_t n = take(cq, out); n > 0) return n;
  drive_links(cq, drive::poll);
  return take(cq, out);
}

bool cq_empty(soft_cq& cq) {
  const std::lock_guard lock(cq.mutex);
  return cq.entries.empty();
}

void attach(const std::shared_ptr<soft_qp>& qp) {
  for (soft_cq* cq : {qp->send_cq, qp->recv_cq}) {
    const std::lock_guard lock(cq->mutex);
    cq->users.push_back(qp);
    if (qp->send_cq == qp->recv_cq) break;
  }
}

void detach(const std::shared_ptr<soft_qp>& qp) {
  qp->watched.store(false);
  for (soft_comp_channel* ch : channels_of(*qp))
    if (ch != nullptr) unwatch(*ch, *qp);
  forget(*qp->send_cq, qp.get());
  if (qp->recv_cq != qp->send_cq) forget(*qp->recv_cq, qp.get());
}

namespace {

/// Adds the link to the channel's set and table; false if it could not.
bool watch_in(soft_comp_channel& ch, const std::shared_ptr<soft_qp>& qp, const watch_fn& watch) {
  const std::lock_guard lock(ch.watch_mutex);
  const std::uint64_t token = token_of(*qp);
  if (ch.watched.contains(token) || !watch(ch.epfd, token, true)) return false;
  try {
    ch.watched.emplace(token, soft_comp_channel::watched_link{qp, watch});
  } catch (const std::bad_alloc&) {
    (void)watch(ch.epfd, token, false);
    return false;
  }
  return true;
}

}  // namespace

void watch_link(const std::shared_ptr<soft_qp>& qp) {
  try {
    watch_fn watch;
    {
      const std::lock_guard lock(qp->mutex);
      if (qp->state != qp_state::ready) return;
      watch = qp->link.watch;
    }
    if (!watch) return;
    bool all = true;
    bool any = false;
    for (soft_comp_channel* ch : channels_of(*qp)) {
      if (ch == nullptr) continue;
      any = true;
      all = watch_in(*ch, qp, watch) && all;
    }
    // Half watched is not watched: the link is released to the progress
    // thread whenever a CQ is armed, as without a watch (a table entry left
    // behind only costs a look; detach removes it).
    qp->watched.store(any && all);
  } catch (const std::bad_alloc&) {
    qp->watched.store(false);
  }
}

void arm(soft_cq& cq) noexcept {
  {
    const std::lock_guard lock(cq.mutex);
    cq.armed = true;
  }
  try {
    drive_links(cq, drive::release);
  } catch (const std::bad_alloc&) {
    // The links' leases lapse by themselves, a millisecond after the last poll.
  }
}

void channel_idle(soft_comp_channel& ch) noexcept {
  const std::lock_guard lock(ch.mutex);
  try {
    for (soft_cq* cq : ch.members) drive_links(*cq, drive::release);
  } catch (const std::bad_alloc&) {
    // The ack ticker sends what is pending within limits::ack_delay.
  }
}

void fire(soft_comp_channel& ch, soft_cq& cq) {
  soft_cq* self = &cq;
  // The channel's own reader takes this event before it returns: no token.
  if (&ch == reading)
    ch.fired.push_silent(self);
  else
    ch.fired.push(self);
}

soft_comp_channel::soft_comp_channel(std::error_code& ec) noexcept
    : fired(ec), epfd(::epoll_create1(EPOLL_CLOEXEC)) {
  if (ec) return;
  if (epfd < 0) {
    ec = {errno, std::system_category()};
    return;
  }
  // Blocking, as an ibv_comp_channel's fd (see provider.hpp).
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  if (::epoll_ctl(epfd, EPOLL_CTL_ADD, fired.fd(), &ev) != 0) ec = {errno, std::system_category()};
}

soft_comp_channel::~soft_comp_channel() {
  if (epfd >= 0) ::close(epfd);
}

std::error_code next_event(soft_comp_channel& ch, soft_cq*& out) {
  for (;;) {
    if (ch.fired.try_pop(out)) return {};
    {
      const reading_scope scope(ch);
      move_woken_links(ch);
      if (ch.fired.try_pop(out)) return {};
    }
    channel_idle(ch);
    if (nonblocking(ch.epfd)) return {EAGAIN, std::system_category()};
    pollfd ready{ch.epfd, POLLIN, 0};
    if (::poll(&ready, 1, -1) < 0 && errno != EINTR) return {errno, std::system_category()};
  }
}

void forget_events(soft_cq& cq) {
  if (cq.channel != nullptr)
    (void)cq.channel->fired.extract([&cq](soft_cq* c) { return c == &cq; });
}

}  // namespace arpma::provider::soft_dp

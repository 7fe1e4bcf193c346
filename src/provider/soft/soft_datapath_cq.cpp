// The soft provider's CQs as a poll sees them: taking completions, moving
// the links of the CQ's QPs on the polling thread, and arming (which gives
// those links back to the progress thread).
#include "provider/soft/soft_datapath.hpp"

#include <algorithm>
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

/// Moves the links of the CQ's QPs on this thread (`how`: poll or release;
/// a poll of an armed CQ only peeks). The QP locks are taken after the CQ's
/// is released (completing takes them in the other order).
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
    std::shared_ptr<const std::function<void(drive)>> progress;
    {
      const std::lock_guard lock(qp->mutex);
      if (qp->state == qp_state::ready) progress = qp->link.progress;
    }
    if (progress && *progress) (*progress)(how);
  }
  users.clear();
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
  forget(*qp->send_cq, qp.get());
  if (qp->recv_cq != qp->send_cq) forget(*qp->recv_cq, qp.get());
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

void forget_events(soft_cq& cq) {
  if (cq.channel != nullptr)
    (void)cq.channel->fired.extract([&cq](soft_cq* c) { return c == &cq; });
}

}  // namespace arpma::provider::soft_dp

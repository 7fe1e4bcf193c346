// The soft provider's verbs objects that need no link: PDs, completion
// channels, CQs, MRs and SRQs.
#include "provider/handle_cast.hpp"
#include "provider/soft/soft_datapath.hpp"
#include "provider/soft/soft_provider.hpp"

#include <memory>
#include <new>
#include <vector>

namespace arpma::provider {
namespace {

using soft_dp::soft_comp_channel;
using soft_dp::soft_cq;
using soft_dp::soft_pd;
using soft_dp::soft_srq;

std::error_code sys(int err) noexcept { return {err, std::system_category()}; }

}  // namespace

device_caps soft_provider::caps(const device* dev) const noexcept {
  if (!owns(dev)) return {};
  return {.native_atomic_write = true, .native_flush = true};
}

result<pd*> soft_provider::alloc_pd(device* dev) {
  if (!owns(dev)) return sys(EINVAL);
  return handle<pd>(new soft_pd);
}

std::error_code soft_provider::dealloc_pd(pd* h) noexcept {
  auto* p = as<soft_pd>(h);
  if (p->users > 0) return sys(EBUSY);
  delete p;
  return {};
}

result<comp_channel*> soft_provider::create_comp_channel(device* dev) {
  if (!owns(dev)) return sys(EINVAL);
  std::error_code ec;
  auto channel = std::make_unique<soft_comp_channel>(ec);
  if (ec) return ec;
  return handle<comp_channel>(channel.release());
}

std::error_code soft_provider::destroy_comp_channel(comp_channel* h) noexcept {
  auto* channel = as<soft_comp_channel>(h);
  {
    const std::lock_guard lock(channel->mutex);
    if (!channel->members.empty()) return sys(EBUSY);
  }
  delete channel;
  return {};
}

int soft_provider::comp_channel_fd(const comp_channel* h) const noexcept {
  return as<const soft_comp_channel>(h)->epfd;
}

result<cq*> soft_provider::create_cq(device* dev, int cqe, comp_channel* channel) {
  if (!owns(dev) || cqe <= 0) return sys(EINVAL);
  auto* c = new soft_cq;
  c->channel = as<soft_comp_channel>(channel);
  c->cqe = cqe;
  if (c->channel != nullptr) {
    try {
      const std::lock_guard lock(c->channel->mutex);
      c->channel->members.push_back(c);
    } catch (const std::bad_alloc&) {
      delete c;
      return sys(ENOMEM);
    }
  }
  return handle<cq>(c);
}

std::error_code soft_provider::destroy_cq(cq* h) noexcept {
  auto* c = as<soft_cq>(h);
  if (c->qps > 0) return sys(EBUSY);
  if (c->channel != nullptr) {
    soft_dp::forget_events(*c);
    {
      const std::lock_guard lock(c->channel->mutex);
      std::erase(c->channel->members, c);
    }
  }
  delete c;
  return {};
}

std::error_code soft_provider::req_notify_cq(cq* h, bool /*solicited_only*/) {
  // Every soft completion counts as solicited: one event for the next one.
  soft_dp::arm(*as<soft_cq>(h));
  return {};
}

result<std::size_t> soft_provider::poll_cq(cq* h, std::span<work_completion> out) {
  return soft_dp::poll(*as<soft_cq>(h), out);
}

result<cq*> soft_provider::get_cq_event(comp_channel* h) {
  soft_cq* fired = nullptr;
  if (const std::error_code ec = soft_dp::next_event(*as<soft_comp_channel>(h), fired)) return ec;
  return handle<cq>(fired);
}

void soft_provider::ack_cq_events(cq* /*h*/, unsigned /*count*/) noexcept {
  // Events are copied out of the channel: nothing waits for acknowledgements.
}

result<mr*> soft_provider::reg_mr(pd* p, void* addr, std::size_t length, int access) {
  return soft_dp::register_mr(as<soft_pd>(p), addr, length, access);
}

std::error_code soft_provider::dereg_mr(mr* h) noexcept { return soft_dp::deregister_mr(h); }

// Soft regions are plain memory, resident or faulted in by the copy that
// touches them: every prefetch is done already. ibv's values are checked as
// a device with On-Demand Paging would.
std::error_code soft_provider::advise_mr(mr* h, std::size_t /*offset*/, std::uint32_t /*length*/,
                                         int advice, std::uint32_t flags) {
  constexpr int prefetch_no_fault = 2;     // IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT
  constexpr std::uint32_t flag_flush = 1;  // IBV_ADVISE_MR_FLAG_FLUSH
  if (h == nullptr || advice < 0 || advice > prefetch_no_fault || (flags & ~flag_flush) != 0)
    return sys(EINVAL);
  return {};
}

std::uint32_t soft_provider::mr_lkey(const mr* h) const noexcept { return soft_dp::lkey_of(h); }

std::uint32_t soft_provider::mr_rkey(const mr* h) const noexcept { return soft_dp::rkey_of(h); }

result<srq*> soft_provider::create_srq(pd* p, std::uint32_t max_wr, std::uint32_t max_sge) {
  if (p == nullptr || max_wr == 0 || max_sge > 1) return sys(EINVAL);
  auto* s = new soft_srq;
  s->pd = as<soft_pd>(p);
  s->max_wr = max_wr;
  ++s->pd->users;
  return handle<srq>(s);
}

std::error_code soft_provider::destroy_srq(srq* h) noexcept {
  auto* s = as<soft_srq>(h);
  if (s->qps > 0) return sys(EBUSY);
  --s->pd->users;
  delete s;
  return {};
}

std::error_code soft_provider::post_srq_recv(srq* h, const recv_wr& wr) {
  return soft_dp::post_srq_recv(*as<soft_srq>(h), wr);
}

}  // namespace arpma::provider

// Chooses the provider for new peers and finds the provider of a device.
#include "provider/fault_provider.hpp"
#include "provider/provider.hpp"
#include "provider/soft/soft_provider.hpp"
#include "provider/verbs/verbs_provider.hpp"
#include "support/fault.hpp"
#include "support/log.hpp"

#include <infiniband/verbs.h>

#include <cstdlib>
#include <string_view>

namespace arpma::provider {
namespace {

provider* override_provider = nullptr;

provider& real_verbs() {
  static verbs_provider instance;
  return instance;
}

provider& real_soft() {
  static soft_provider instance;
  return instance;
}

// With fault injection on (support/fault.hpp), every caller gets the real provider behind a
// fault_provider, so both soft and verbs have the same fault points.
#ifdef ARPMA_FAULT_INJECTION
provider& verbs() {
  static fault_provider wrapped(real_verbs());
  return fault::enabled() ? static_cast<provider&>(wrapped) : real_verbs();
}

provider& soft() {
  static fault_provider wrapped(real_soft());
  return fault::enabled() ? static_cast<provider&>(wrapped) : real_soft();
}
#else
provider& verbs() { return real_verbs(); }
provider& soft() { return real_soft(); }
#endif

bool rdma_device_listed() {
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list != nullptr) ibv_free_device_list(list);
  return count > 0;
}

provider& choose_from_environment() {
  const char* env = std::getenv("ARPMA_PROVIDER");  // NOLINT(concurrency-mt-unsafe): read once
  const std::string_view choice = env != nullptr ? env : "auto";
  if (choice == "verbs") return verbs();
  if (choice == "soft") return soft();
  if (choice != "auto")
    ARPMA_LOG(log_level::warning, "ARPMA_PROVIDER=%s is unknown; choosing automatically", env);
  provider& chosen = rdma_device_listed() ? verbs() : soft();
  ARPMA_LOG(log_level::info, "provider: %s", chosen.name());
  return chosen;
}

}  // namespace

const char* to_string(cm_event_type type) noexcept {
  switch (type) {
    case cm_event_type::addr_resolved: return "ADDR_RESOLVED";
    case cm_event_type::addr_error: return "ADDR_ERROR";
    case cm_event_type::route_resolved: return "ROUTE_RESOLVED";
    case cm_event_type::route_error: return "ROUTE_ERROR";
    case cm_event_type::connect_request: return "CONNECT_REQUEST";
    case cm_event_type::connect_response: return "CONNECT_RESPONSE";
    case cm_event_type::connect_error: return "CONNECT_ERROR";
    case cm_event_type::unreachable: return "UNREACHABLE";
    case cm_event_type::rejected: return "REJECTED";
    case cm_event_type::established: return "ESTABLISHED";
    case cm_event_type::disconnected: return "DISCONNECTED";
    case cm_event_type::device_removal: return "DEVICE_REMOVAL";
    case cm_event_type::addr_change: return "ADDR_CHANGE";
    case cm_event_type::timewait_exit: return "TIMEWAIT_EXIT";
    case cm_event_type::other: break;
  }
  return "OTHER";
}

// Lifecycle defaults: a provider that has not got them says so.
namespace {
std::error_code not_supported() noexcept {
  return std::make_error_code(std::errc::operation_not_supported);
}
}  // namespace

std::error_code provider::bind_addr(cm_id*, const sockaddr*) { return not_supported(); }
std::error_code provider::listen(cm_id*, int) { return not_supported(); }
std::uint16_t provider::local_port(const cm_id*) const noexcept { return 0; }
std::error_code provider::connect(cm_id*, const conn_param&) { return not_supported(); }
std::error_code provider::accept(cm_id*, const conn_param&) { return not_supported(); }
std::error_code provider::reject(cm_id*, const void*, std::uint8_t) { return not_supported(); }
std::error_code provider::disconnect(cm_id*) { return not_supported(); }
std::error_code provider::migrate_id(cm_id*, event_channel*) { return not_supported(); }
void provider::set_context(cm_id*, std::uint64_t) noexcept {}

// Data-path defaults, for providers (and test fakes) without one.
device_caps provider::caps(const device*) const noexcept { return {}; }
result<mr*> provider::reg_mr(pd*, void*, std::size_t, int) { return not_supported(); }
std::error_code provider::dereg_mr(mr*) noexcept { return not_supported(); }
std::uint32_t provider::mr_lkey(const mr*) const noexcept { return 0; }
std::uint32_t provider::mr_rkey(const mr*) const noexcept { return 0; }
std::error_code provider::advise_mr(mr*, std::size_t, std::uint32_t, int, std::uint32_t) {
  return not_supported();
}
std::error_code provider::post_send(cm_id*, const send_wr&) { return not_supported(); }
std::error_code provider::post_recv(cm_id*, const recv_wr&) { return not_supported(); }
result<std::size_t> provider::poll_cq(cq*, std::span<work_completion>) { return not_supported(); }
result<cq*> provider::get_cq_event(comp_channel*) { return not_supported(); }
void provider::ack_cq_events(cq*, unsigned) noexcept {}
result<srq*> provider::create_srq(pd*, std::uint32_t, std::uint32_t) { return not_supported(); }
std::error_code provider::destroy_srq(srq*) noexcept { return not_supported(); }
std::error_code provider::post_srq_recv(srq*, const recv_wr&) { return not_supported(); }

provider& default_provider() {
  if (override_provider != nullptr) return *override_provider;
  static provider& chosen = choose_from_environment();
  return chosen;
}

provider* provider_of(const device* dev) noexcept {
  if (dev == nullptr) return nullptr;
  if (override_provider != nullptr && override_provider->owns(dev)) return override_provider;
  if (soft().owns(dev)) return &soft();
  provider& v = verbs();
  return v.owns(dev) ? &v : nullptr;
}

scoped_override::scoped_override(provider& p) noexcept : previous_(override_provider) {
  override_provider = &p;
}

scoped_override::~scoped_override() { override_provider = previous_; }

}  // namespace arpma::provider

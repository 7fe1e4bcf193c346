#include "arpma/peer.hpp"

#include "arpma/error.hpp"
#include "core/peer_state.hpp"
#include "support/log.hpp"

#include <cerrno>
#include <string>

namespace arpma {

namespace detail {

std::error_code peer_state::release() noexcept {
  if (pd == nullptr) return {};
  const std::error_code ec = prov.dealloc_pd(pd);
  pd = nullptr;
  if (ec) ARPMA_LOG_FAILURE("dealloc pd", ec);
  return ec;
}

}  // namespace detail

result<::ibv_context*> get_ibv_context(std::string_view addr, ibv_context_type type) {
  if (addr.empty() || (type != ibv_context_type::local && type != ibv_context_type::remote))
    return make_error_code(errc::invalid_argument);
  try {
    const std::string host(addr);
    return provider::default_provider().find_device(host.c_str(), type == ibv_context_type::remote);
  } catch (const std::bad_alloc&) {
    return make_error_code(errc::no_memory);
  }
}

result<bool> is_odp_capable(::ibv_context* context) noexcept {
  if (context == nullptr) return make_error_code(errc::invalid_argument);
  provider::provider* prov = provider::provider_of(context);
  if (prov == nullptr) return make_error_code(errc::invalid_argument);
  return prov->caps(context).odp;
}

result<peer> peer::create(::ibv_context* context) {
  if (context == nullptr) return make_error_code(errc::invalid_argument);
  provider::provider* prov = provider::provider_of(context);
  if (prov == nullptr) return make_error_code(errc::invalid_argument);
  auto pd = prov->alloc_pd(context);
  if (!pd) {
    ARPMA_LOG_FAILURE("alloc pd", pd.error());
    // librpma: ENOMEM is an allocation failure, anything else the provider's.
    if (pd.error() == std::errc::not_enough_memory) return make_error_code(errc::no_memory);
    return pd.error();
  }
  try {
    return peer(std::make_shared<detail::peer_state>(*prov, context, pd.value()));
  } catch (const std::bad_alloc&) {
    (void)prov->dealloc_pd(pd.value());
    return make_error_code(errc::no_memory);
  }
}

peer::peer(std::shared_ptr<detail::peer_state> state) noexcept : state_(std::move(state)) {}

peer::~peer() = default;

::ibv_context* peer::context() const noexcept { return state_ ? state_->dev : nullptr; }

std::error_code peer::close() noexcept {
  std::error_code ec;
  if (state_ && state_.use_count() == 1) ec = state_->release();
  state_.reset();
  return ec;
}

}  // namespace arpma

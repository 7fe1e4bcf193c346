// Memory registrations and their 21-byte descriptors.
#include "arpma/mr.hpp"

#include "arpma/error.hpp"
#include "core/mr_state.hpp"
#include "support/log.hpp"

#include <cstring>
#include <limits>

namespace arpma {
namespace detail {
namespace {

void put_le(std::uint8_t* out, std::uint64_t value, std::size_t bytes) noexcept {
  for (std::size_t i = 0; i < bytes; ++i) out[i] = static_cast<std::uint8_t>(value >> (8 * i));
}

std::uint64_t get_le(const std::uint8_t* in, std::size_t bytes) noexcept {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < bytes; ++i) value |= static_cast<std::uint64_t>(in[i]) << (8 * i);
  return value;
}

mr_descriptor encode(std::uint64_t addr, std::uint64_t size, std::uint32_t rkey, int usage) {
  mr_descriptor out{};
  put_le(out.data(), addr, 8);
  put_le(out.data() + 8, size, 8);
  put_le(out.data() + 16, rkey, 4);
  out[20] = static_cast<std::uint8_t>(usage);
  return out;
}

}  // namespace

int usage_to_access(int usage, bool native_flush) noexcept {
  namespace a = provider::access;
  int access = 0;
  // A flush is an RDMA read of the region where it is emulated (librpma's APM).
  if ((usage & (mr_usage::read_src | mr_usage::flush_type_visibility |
                mr_usage::flush_type_persistent)) != 0)
    access |= a::remote_read;
  if ((usage & (mr_usage::read_dst | mr_usage::write_src | mr_usage::recv)) != 0)
    access |= a::local_write;
  if ((usage & mr_usage::write_dst) != 0) access |= a::remote_write | a::local_write;
  if (native_flush && (usage & mr_usage::flush_type_visibility) != 0) access |= a::flush_global;
  if (native_flush && (usage & mr_usage::flush_type_persistent) != 0) access |= a::flush_persistent;
  return access;
}

std::error_code local_mr_state::dereg() noexcept {
  if (mr == nullptr) return {};
  const auto ec = peer->prov.dereg_mr(mr);
  if (ec) ARPMA_LOG_FAILURE("deregister memory", ec);
  mr = nullptr;
  return ec;
}

provider::sge local_mr_state::slice(std::size_t offset, std::size_t len) const noexcept {
  provider::sge out;
  out.addr = reinterpret_cast<std::uintptr_t>(ptr) + offset;  // NOLINT: an address for the NIC
  out.length = static_cast<std::uint32_t>(len);
  out.lkey = lkey();
  return out;
}

}  // namespace detail

result<local_mr> local_mr::reg(const peer& p, void* ptr, std::size_t size, int usage) {
  if (!detail::access::state(p) || ptr == nullptr || size == 0 || usage == 0 ||
      (usage & ~mr_usage::all) != 0)
    return make_error_code(errc::invalid_argument);
  auto& state = *detail::access::state(p);
  const auto caps = state.prov.caps(state.dev);
  const int access = detail::usage_to_access(usage, caps.native_flush);
  auto registered = state.prov.reg_mr(state.pd, ptr, size, access);
  // Memory the device cannot pin (FS-DAX): an On-Demand Paging registration
  // where the device has it, as librpma.
  if (!registered && caps.odp && registered.error() == std::errc::operation_not_supported)
    registered = state.prov.reg_mr(state.pd, ptr, size, access | provider::access::on_demand);
  if (!registered) {
    ARPMA_LOG_FAILURE("register memory", registered.error());
    return registered.error();
  }
  try {
    return local_mr(std::make_unique<detail::local_mr_state>(detail::access::state(p),
                                                             registered.value(), ptr, size, usage));
  } catch (const std::bad_alloc&) {
    (void)state.prov.dereg_mr(registered.value());
    return make_error_code(errc::no_memory);
  }
}

local_mr::local_mr() noexcept = default;
local_mr::local_mr(std::unique_ptr<detail::local_mr_state> state) noexcept
    : state_(std::move(state)) {}
local_mr::local_mr(local_mr&&) noexcept = default;
local_mr& local_mr::operator=(local_mr&&) noexcept = default;
local_mr::~local_mr() = default;

void* local_mr::ptr() const noexcept { return state_ ? state_->ptr : nullptr; }
std::size_t local_mr::size() const noexcept { return state_ ? state_->size : 0; }
int local_mr::usage() const noexcept { return state_ ? state_->usage : 0; }

mr_descriptor local_mr::descriptor() const noexcept {
  if (!state_) return {};
  return detail::encode(reinterpret_cast<std::uintptr_t>(state_->ptr),  // NOLINT: wire address
                        state_->size, state_->rkey(), state_->usage);
}

std::error_code local_mr::advise(std::size_t offset, std::size_t len, mr_advice advice,
                                 std::uint32_t flags) const noexcept {
  if (!state_ || !state_->contains(offset, len) || len > UINT32_MAX)
    return make_error_code(errc::invalid_argument);
  const auto ec = state_->peer->prov.advise_mr(state_->mr, offset, static_cast<std::uint32_t>(len),
                                               static_cast<int>(advice), flags);
  if (ec) ARPMA_LOG_FAILURE("advise mr", ec);
  return ec;
}

std::error_code local_mr::dereg() noexcept {
  if (!state_) return {};
  const auto ec = state_->dereg();
  state_.reset();
  return ec;
}

result<remote_mr> remote_mr::from_descriptor(std::span<const std::uint8_t> desc) {
  if (desc.size() < mr_descriptor_size) {
    ARPMA_LOG(log_level::error, "incorrect size of the descriptor: %zu bytes (at least %zu)",
              desc.size(), mr_descriptor_size);
    return make_error_code(errc::invalid_argument);
  }
  remote_mr out;
  out.usage_ = desc[20];
  if (out.usage_ == 0) {
    ARPMA_LOG(log_level::error, "usage type of memory is not set");
    return make_error_code(errc::invalid_argument);
  }
  out.addr_ = detail::get_le(desc.data(), 8);
  out.size_ = detail::get_le(desc.data() + 8, 8);
  out.rkey_ = static_cast<std::uint32_t>(detail::get_le(desc.data() + 16, 4));
  return out;
}

mr_descriptor remote_mr::descriptor() const noexcept {
  return detail::encode(addr_, size_, rkey_, usage_);
}

}  // namespace arpma

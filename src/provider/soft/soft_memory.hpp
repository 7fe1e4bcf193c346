// How the soft provider touches application memory it was given: a
// registration is refused where ibv_reg_mr would refuse it, and every copy
// into or out of registered memory reports a fault instead of taking one
// (docs/soft-provider.md, "Memory safety"). A NIC keeps registered pages
// pinned; the soft provider cannot, so an application that unmaps a region
// it registered gets failed accesses, never a crashed process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <system_error>

namespace arpma::provider::soft_mem {

/// 0 when [addr, addr + length) could be registered for `writable` (or
/// read-only) access: EINVAL for a range that wraps the address space, EFAULT
/// when part of it is not mapped, not readable, or (writable) not writable —
/// the errnos ibv_reg_mr gives.
[[nodiscard]] std::error_code check_registrable(const void* addr, std::size_t length,
                                                bool writable);

/// Copies `n` bytes to registered memory at `dst`; false if any of it is not
/// mapped writable (nothing is known about how much was written then).
[[nodiscard]] bool copy_to_region(void* dst, const void* src, std::size_t n) noexcept;

/// Copies `n` bytes of registered memory at `src` out; false if any of it is
/// not mapped readable.
[[nodiscard]] bool copy_from_region(void* dst, const void* src, std::size_t n) noexcept;

/// One 8-byte store to an 8-byte aligned registered address (a local reader
/// sees the old or the new value); false if the page cannot be written.
[[nodiscard]] bool store_u64_to_region(void* dst, std::uint64_t value) noexcept;

/// Whether copies are fault-safe here: a SIGSEGV/SIGBUS handler of the soft
/// provider is installed (the first registration installs it, chained to any
/// handler before it). Without one (sigaction refused it), plain copies are
/// used and only the registration check protects.
[[nodiscard]] bool copies_are_guarded() noexcept;

/// For bench/soft_datapath_bench only, which alternates rounds with and
/// without the guard to measure what it costs: plain copies while `off`.
void unguarded_for_benchmark(bool off) noexcept;

}  // namespace arpma::provider::soft_mem

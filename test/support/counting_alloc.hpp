// Heap allocations counted at the C allocator's replaced entry points (link
// test/support/counting_alloc.cpp into the program; operator new and Asio's
// aligned_alloc both end there): on the calling thread, and in
// the whole process.
#pragma once

#include <cstdint>

namespace arpma::test {

/// Allocations made by the calling thread so far.
[[nodiscard]] std::uint64_t thread_allocations() noexcept;
/// Allocations made by every thread so far.
[[nodiscard]] std::uint64_t all_allocations() noexcept;

}  // namespace arpma::test

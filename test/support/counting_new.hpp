// Heap allocations counted by a replaced global operator new (link
// test/support/counting_new.cpp into the program): on the calling thread, and in
// the whole process.
#pragma once

#include <cstdint>

namespace arpma::test {

/// Allocations made by the calling thread so far.
[[nodiscard]] std::uint64_t thread_allocations() noexcept;
/// Allocations made by every thread so far.
[[nodiscard]] std::uint64_t all_allocations() noexcept;

}  // namespace arpma::test

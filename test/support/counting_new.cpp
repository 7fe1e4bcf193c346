// The replaced global allocation functions (their own translation unit, so
// the compiler never sees malloc and operator delete paired inline).
#include "support/counting_new.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<std::uint64_t> all_count{0};
thread_local std::uint64_t thread_count = 0;

void* counted(std::size_t n) {
  ++thread_count;
  all_count.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n == 0 ? 1 : n);  // NOLINT(cppcoreguidelines-no-malloc)
}
void* counted_aligned(std::size_t n, std::align_val_t a) {
  ++thread_count;
  all_count.fetch_add(1, std::memory_order_relaxed);
  const auto align = static_cast<std::size_t>(a);
  return std::aligned_alloc(align, (n + align - 1) / align * align);
}
}  // namespace

void* operator new(std::size_t n) {
  if (void* p = counted(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = counted(n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  if (void* p = counted_aligned(n, a)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) {
  if (void* p = counted_aligned(n, a)) return p;
  throw std::bad_alloc();
}
// NOLINTBEGIN(cppcoreguidelines-no-malloc)
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
// NOLINTEND(cppcoreguidelines-no-malloc)

std::uint64_t arpma::test::thread_allocations() noexcept { return thread_count; }
std::uint64_t arpma::test::all_allocations() noexcept {
  return all_count.load(std::memory_order_relaxed);
}

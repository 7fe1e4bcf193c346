// Allocations counted where every path ends: the C allocator's entry points,
// replaced for the whole process (glibc supports that) and forwarded to
// glibc's own. Counting only a replaced operator new missed Asio's recycling
// allocator, which falls back to aligned_alloc when its per-thread cache has
// no block to give (and so did a coroutine frame past what it recycles).
// libstdc++'s operator new calls malloc, and its aligned form aligned_alloc,
// so those are counted too. Not under sanitizers, which own these symbols.
#include "support/counting_alloc.hpp"

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>

// NOLINTBEGIN(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp,cppcoreguidelines-no-malloc)
extern "C" {
void* __libc_malloc(std::size_t n);
void* __libc_calloc(std::size_t count, std::size_t n);
void* __libc_realloc(void* p, std::size_t n);
void* __libc_memalign(std::size_t align, std::size_t n);
void* __libc_valloc(std::size_t n);
void* __libc_pvalloc(std::size_t n);
void __libc_free(void* p);
}

namespace {
std::atomic<std::uint64_t> all_count{0};
thread_local std::uint64_t thread_count = 0;  // trivial: no allocation of its own

void count() noexcept {
  ++thread_count;
  all_count.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

extern "C" {
void* malloc(std::size_t n) noexcept {
  count();
  return __libc_malloc(n);
}
void* calloc(std::size_t count_of, std::size_t n) noexcept {
  count();
  return __libc_calloc(count_of, n);
}
void* realloc(void* p, std::size_t n) noexcept {
  count();
  return __libc_realloc(p, n);
}
void free(void* p) noexcept { __libc_free(p); }
void* memalign(std::size_t align, std::size_t n) noexcept {
  count();
  return __libc_memalign(align, n);
}
void* aligned_alloc(std::size_t align, std::size_t n) noexcept {
  count();
  return __libc_memalign(align, n);
}
int posix_memalign(void** out, std::size_t align, std::size_t n) noexcept {
  if (align % sizeof(void*) != 0 || (align & (align - 1)) != 0) return EINVAL;
  count();
  void* p = __libc_memalign(align, n);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
void* valloc(std::size_t n) noexcept {
  count();
  return __libc_valloc(n);
}
void* pvalloc(std::size_t n) noexcept {
  count();
  return __libc_pvalloc(n);
}
}
// NOLINTEND(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp,cppcoreguidelines-no-malloc)

std::uint64_t arpma::test::thread_allocations() noexcept { return thread_count; }
std::uint64_t arpma::test::all_allocations() noexcept {
  return all_count.load(std::memory_order_relaxed);
}

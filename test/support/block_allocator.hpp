// One block of storage handed out again and again: a handler's associated
// allocator for tests and benchmarks that show an operation takes its
// storage from there. A second request while the block is taken (or one
// larger than it) goes to the heap.
#pragma once

#include <cstddef>
#include <memory>

namespace arpma::test {

struct one_block {
  alignas(std::max_align_t) unsigned char bytes[512];
  bool used = false;
  int taken = 0;  ///< how many times the block was handed out
};

template <class T>
struct block_allocator {
  using value_type = T;
  one_block* b;
  explicit block_allocator(one_block* from) noexcept : b(from) {}
  template <class U>
  explicit block_allocator(const block_allocator<U>& o) noexcept : b(o.b) {}
  T* allocate(std::size_t n) {
    if (b->used || n * sizeof(T) > sizeof b->bytes) return std::allocator<T>().allocate(n);
    b->used = true;
    ++b->taken;
    return reinterpret_cast<T*>(b->bytes);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (reinterpret_cast<unsigned char*>(p) == b->bytes) {
      b->used = false;
      return;
    }
    std::allocator<T>().deallocate(p, n);
  }
  bool operator==(const block_allocator& o) const noexcept { return b == o.b; }
};

}  // namespace arpma::test

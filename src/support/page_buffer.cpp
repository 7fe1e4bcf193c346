#include "support/page_buffer.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace arpma::detail {

namespace {

std::size_t page_size() noexcept {
  static const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

std::size_t whole_pages(std::size_t n) noexcept {
  const std::size_t page = page_size();
  return (n + page - 1) / page * page;
}

#ifdef MADV_POPULATE_WRITE
constexpr int populate_write = MADV_POPULATE_WRITE;
#else
constexpr int populate_write = 23;  // Linux 5.14's value; older headers lack it
#endif

void* map(std::size_t len) {
  void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return p;
}

}  // namespace

page_buffer::page_buffer(page_buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

page_buffer& page_buffer::operator=(page_buffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

page_buffer::~page_buffer() { release(); }

void page_buffer::release() noexcept {
  if (mapped_ != 0)
    (void)::munmap(data_, mapped_);
  else
    std::free(data_);  // NOLINT(cppcoreguidelines-no-malloc): realloc's counterpart
  data_ = nullptr;
  size_ = mapped_ = 0;
}

void page_buffer::resize(std::size_t n) {
  if (n <= size_) return;
  if (n <= heap_max) {                 // so far on the heap (or nothing): realloc keeps the bytes
    void* p = std::realloc(data_, n);  // NOLINT(cppcoreguidelines-no-malloc)
    if (p == nullptr) throw std::bad_alloc();
    data_ = static_cast<std::uint8_t*>(p);
  } else if (const std::size_t want = whole_pages(n); mapped_ == 0) {
    void* p = map(want);
    if (size_ != 0) std::memcpy(p, data_, size_);
    std::free(data_);  // NOLINT(cppcoreguidelines-no-malloc)
    data_ = static_cast<std::uint8_t*>(p);
    mapped_ = want;
  } else if (want > mapped_) {
    void* p = ::mremap(data_, mapped_, want, MREMAP_MAYMOVE);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<std::uint8_t*>(p);
    mapped_ = want;
  }
  size_ = n;
}

void page_buffer::reset(std::size_t n) {
  // A mapping shrinks in place: its first pages stay resident for the next
  // large frame (each page faulted in again cost a trap; on a hypervisor,
  // tens of microseconds), the rest go back to the kernel at once.
  if (const std::size_t keep = whole_pages(n); mapped_ != 0 && n > heap_max && keep <= mapped_) {
    if (keep < mapped_) (void)::munmap(data_ + keep, mapped_ - keep);
    mapped_ = keep;
    size_ = n;
    return;
  }
  release();
  resize(n);
}

void page_buffer::populate(std::size_t from, std::size_t to) noexcept {
  if (mapped_ == 0 || to > mapped_) return;
  const std::size_t page = page_size();
  const std::size_t first = from / page * page;
  const std::size_t end = whole_pages(to);
  // Best effort: kernels before 5.14 answer EINVAL, and the pages then fault in as written.
  if (end > first) (void)::madvise(data_ + first, end - first, populate_write);
}

}  // namespace arpma::detail

// A growable byte buffer whose large sizes live in an anonymous mapping of their own, for the
// soft provider's receive buffers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace arpma::detail {

/// Bytes that stay on the heap up to `heap_max` and move to their own mmap(2) region beyond:
/// there, growing keeps the contents without a copy (mremap), only the pages written become
/// resident, and resetting or destroying the buffer returns them to the kernel at once. A link's
/// 256 KiB receive buffer used to be a vector: zero-filled at each link's first data, and under
/// connection churn its blocks, freed between long-lived small objects, fragmented malloc's
/// arenas (the soak's RSS grew 12 MB with the heap flat). Small buffers stay on the heap so that
/// tens of thousands of idle links do not cost a mapping each (vm.max_map_count).
class page_buffer {
 public:
  static constexpr std::size_t heap_max = std::size_t{64} << 10;

  page_buffer() noexcept = default;
  page_buffer(const page_buffer&) = delete;
  page_buffer& operator=(const page_buffer&) = delete;
  page_buffer(page_buffer&& other) noexcept;
  page_buffer& operator=(page_buffer&& other) noexcept;
  ~page_buffer();

  [[nodiscard]] std::uint8_t* data() noexcept { return data_; }
  [[nodiscard]] const std::uint8_t* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// Whether the bytes are in a mapping of their own (for tests).
  [[nodiscard]] bool mapped() const noexcept { return mapped_ != 0; }

  /// At least `n` bytes, the first size() kept (the rest unspecified). Never shrinks. Throws
  /// std::bad_alloc when memory is refused; the buffer is then unchanged.
  void resize(std::size_t n);
  /// Drops the contents and keeps `n` bytes (0: none); a mapping shrinks in place, keeping its
  /// first pages resident. Throws std::bad_alloc as resize does; the buffer is then empty.
  void reset(std::size_t n);
  /// Makes the pages of bytes [from, to) resident now, in one call, where writing them would
  /// fault each in (for bytes about to be received); nothing on the heap or past the mapping.
  void populate(std::size_t from, std::size_t to) noexcept;

 private:
  void release() noexcept;

  std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;    // what was asked for
  std::size_t mapped_ = 0;  // the mapping's length (whole pages); 0: on the heap or nothing
};

}  // namespace arpma::detail

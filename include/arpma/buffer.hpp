// Registered-buffer slices, the arguments of every data operation:
// arpma::local_buffer (a range of a local_mr) and arpma::remote_buffer (a
// range of a remote_mr).
//
// After asio::mutable_registered_buffer: a slice names its registration
// together with its range, so an operation takes two arguments instead of
// five easily swapped numbers. Unlike Asio's, which clamps, the range is
// checked when the slice is made (arpma::buffer returns errc::invalid_argument
// for one leaving its region), so no operation is handed offsets past its
// region. The name follows asio::buffer(registered_buffer, n).
#pragma once

#include "arpma/detail/access.hpp"
#include "arpma/error.hpp"
#include "arpma/mr.hpp"
#include "arpma/result.hpp"

#include <cstddef>
#include <cstdint>

namespace arpma {

/// [offset, offset + size) of a local registration. A view: the local_mr
/// must stay registered while a slice of it is used (moving the local_mr
/// keeps its slices valid). Built from a local_mr, it is the whole region.
class local_buffer {
 public:
  /// No region, length 0: an empty transfer where an operation allows one.
  local_buffer() noexcept = default;
  /// The whole of `mr` (empty if `mr` is).
  local_buffer(const local_mr& mr) noexcept  // NOLINT(google-explicit-constructor): as asio::buffer
      : state_(detail::access::state(mr)),
        data_(static_cast<std::uint8_t*>(mr.ptr())),
        size_(mr ? mr.size() : 0) {}

  [[nodiscard]] void* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// Where the slice starts within its region.
  [[nodiscard]] std::size_t offset() const noexcept { return offset_; }
  /// Whether it names a region.
  explicit operator bool() const noexcept { return state_ != nullptr; }

  /// [offset, offset + length) of this slice. Errors: errc::invalid_argument
  /// (no region, or a range leaving this slice).
  [[nodiscard]] result<local_buffer> slice(std::size_t offset, std::size_t length) const noexcept {
    if (state_ == nullptr || offset > size_ || length > size_ - offset)
      return make_error_code(errc::invalid_argument);
    local_buffer part = *this;
    part.data_ += offset;
    part.offset_ += offset;
    part.size_ = length;
    return part;
  }

 private:
  friend struct detail::access;
  const detail::local_mr_state* state_ = nullptr;
  std::uint8_t* data_ = nullptr;
  std::size_t offset_ = 0;
  std::size_t size_ = 0;
};

/// [offset, offset + size) of the other side's region: a value (it holds a
/// copy of the remote_mr). Built from a remote_mr, it is the whole region.
class remote_buffer {
 public:
  remote_buffer() noexcept = default;
  /// The whole of `mr`.
  remote_buffer(
      const remote_mr& mr) noexcept  // NOLINT(google-explicit-constructor): as asio::buffer
      : region_(mr), size_(mr.size()) {}

  /// The region it is a slice of.
  [[nodiscard]] const remote_mr& region() const noexcept { return region_; }
  /// The peer's address of its first byte.
  [[nodiscard]] std::uint64_t addr() const noexcept { return region_.addr() + offset_; }
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }

  /// [offset, offset + length) of this slice. Errors: errc::invalid_argument
  /// (a region never decoded — usage 0 — or a range leaving this slice).
  [[nodiscard]] result<remote_buffer> slice(std::uint64_t offset,
                                            std::uint64_t length) const noexcept {
    if (region_.usage() == 0 || offset > size_ || length > size_ - offset)
      return make_error_code(errc::invalid_argument);
    remote_buffer part = *this;
    part.offset_ += offset;
    part.size_ = length;
    return part;
  }

 private:
  remote_mr region_;
  std::uint64_t offset_ = 0;
  std::uint64_t size_ = 0;
};

/// [offset, offset + length) of `mr`, checked: errc::invalid_argument for an
/// empty `mr` or a range leaving it.
[[nodiscard]] inline result<local_buffer> buffer(const local_mr& mr, std::size_t offset,
                                                 std::size_t length) noexcept {
  return local_buffer(mr).slice(offset, length);
}
/// [offset, offset + length) of `mr`, checked: errc::invalid_argument for a
/// region never decoded or a range leaving it.
[[nodiscard]] inline result<remote_buffer> buffer(const remote_mr& mr, std::uint64_t offset,
                                                  std::uint64_t length) noexcept {
  return remote_buffer(mr).slice(offset, length);
}

}  // namespace arpma

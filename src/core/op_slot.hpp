// Storage for the one operation at a time that an object keeps queued on its
// own behalf (a busy poll's next turn, a channel's wait), given to Asio as the
// handler's associated allocator. Asio's own per-thread cache holds two blocks
// per purpose and goes to the heap when they are taken or too small: a wait
// after the busy poll slept, or a turn queued beside the soft provider's posts,
// allocated now and then (test/alloc, counting aligned_alloc).
#pragma once

#include "core/asio.hpp"

#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/post.hpp>

#include <array>
#include <cstddef>
#include <memory>
#include <utility>

namespace arpma::detail {

/// One block, reused; its owner never has two operations in flight from it
/// (a second, if any, goes to the heap).
class op_slot {
 public:
  static constexpr std::size_t capacity = 320;

  op_slot() = default;
  op_slot(const op_slot&) = delete;
  op_slot& operator=(const op_slot&) = delete;
  ~op_slot() = default;

  /// The block, for `n` bytes aligned to `align`; nullptr when it is in use
  /// or too small.
  [[nodiscard]] void* take(std::size_t n, std::size_t align) noexcept {
    if (busy_ || n > capacity || align > alignof(std::max_align_t)) return nullptr;
    busy_ = true;
    return storage_.data();
  }
  /// Whether `p` is the block (free again now).
  bool give_back(const void* p) noexcept {
    if (p != storage_.data()) return false;
    busy_ = false;
    return true;
  }

 private:
  alignas(std::max_align_t) std::array<std::byte, capacity> storage_{};
  bool busy_ = false;
};

/// The allocator that hands out an op_slot's block, or the heap's.
template <class T>
class op_slot_allocator {
 public:
  using value_type = T;

  explicit op_slot_allocator(op_slot& slot) noexcept : slot_(&slot) {}
  // Implicit, as rebinding an allocator requires.
  template <class U>
  // NOLINTNEXTLINE(google-explicit-constructor)
  op_slot_allocator(const op_slot_allocator<U>& other) noexcept : slot_(other.slot()) {}

  [[nodiscard]] T* allocate(std::size_t n) {
    if (void* p = slot_->take(n * sizeof(T), alignof(T))) return static_cast<T*>(p);
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (!slot_->give_back(p)) std::allocator<T>().deallocate(p, n);
  }
  [[nodiscard]] op_slot* slot() const noexcept { return slot_; }

  template <class U>
  bool operator==(const op_slot_allocator<U>& other) const noexcept {
    return slot_ == other.slot();
  }
  template <class U>
  bool operator!=(const op_slot_allocator<U>& other) const noexcept {
    return slot_ != other.slot();
  }

 private:
  op_slot* slot_;
};

/// `handler` with its operation's storage in `slot`.
template <class Handler>
[[nodiscard]] auto in_slot(op_slot& slot, Handler&& handler) {
  return asio::bind_allocator(op_slot_allocator<void>(slot), std::forward<Handler>(handler));
}

/// Posts `f` to `ex`, its storage in `slot` where `ex` is an io_context's
/// executor. Through the type-erased executor the handler's allocator is
/// dropped (any_io_executor has no allocator property) and the block comes
/// from Asio's cache; other executors still take it from there. (A strand
/// would pass the allocator on to its own invoker as well: two blocks.)
template <class F>
void post_in_slot(const asio::any_io_executor& ex, op_slot& slot, F&& f) {
  if (const auto* io = ex.target<asio::io_context::executor_type>())
    asio::post(*io, in_slot(slot, std::forward<F>(f)));
  else
    asio::post(ex, std::forward<F>(f));
}

}  // namespace arpma::detail

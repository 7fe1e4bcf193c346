// A first-in, first-out queue on one growing ring buffer: what the
// providers' queues (send queues, CQs, event queues) need of std::deque (push at the back, pop
// at the front, walk in order), without deque's node allocation every few
// elements as a steady queue moves along. It only grows (doubling), so a
// queue that stays under its high-water mark allocates nothing.
#pragma once

#include <cstddef>
#include <iterator>
#include <utility>
#include <vector>

namespace arpma::provider {

template <class T>
class ring {
 public:
  template <class R, class V>
  class basic_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = V*;
    using reference = V&;
    basic_iterator() = default;
    basic_iterator(R* r, std::size_t i) noexcept : r_(r), i_(i) {}
    reference operator*() const noexcept { return r_->at(i_); }
    pointer operator->() const noexcept { return &r_->at(i_); }
    basic_iterator& operator++() noexcept {
      ++i_;
      return *this;
    }
    basic_iterator operator++(int) noexcept { return {r_, i_++}; }
    bool operator==(const basic_iterator& o) const noexcept { return i_ == o.i_; }

   private:
    R* r_ = nullptr;
    std::size_t i_ = 0;
  };
  using iterator = basic_iterator<ring, T>;
  using const_iterator = basic_iterator<const ring, const T>;

  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  T& front() noexcept { return at(0); }
  [[nodiscard]] const T& front() const noexcept { return at(0); }
  T& back() noexcept { return at(count_ - 1); }
  T& at(std::size_t i) noexcept { return slots_[(head_ + i) % slots_.size()]; }
  [[nodiscard]] const T& at(std::size_t i) const noexcept {
    return slots_[(head_ + i) % slots_.size()];
  }

  void push_back(const T& value) {
    if (count_ == slots_.size()) grow();
    slots_[(head_ + count_) % slots_.size()] = value;
    ++count_;
  }
  void pop_front() noexcept { pop_front(1); }
  void pop_front(std::size_t n) noexcept {
    head_ = slots_.empty() ? 0 : (head_ + n) % slots_.size();
    count_ -= n;
  }
  void clear() noexcept {
    head_ = 0;
    count_ = 0;
  }

  iterator begin() noexcept { return {this, 0}; }
  iterator end() noexcept { return {this, count_}; }
  [[nodiscard]] const_iterator begin() const noexcept { return {this, 0}; }
  [[nodiscard]] const_iterator end() const noexcept { return {this, count_}; }

 private:
  void grow() {
    std::vector<T> bigger(slots_.empty() ? 16 : slots_.size() * 2);
    for (std::size_t i = 0; i < count_; ++i) bigger[i] = std::move(at(i));
    slots_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
};

}  // namespace arpma::provider

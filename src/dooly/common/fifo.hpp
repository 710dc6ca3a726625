#pragma once
// A first-in first-out queue over one contiguous buffer: push at the back, pop at the front, random access and
// binary search in between. The sampler thread's queues (pending events, recent segments, the power trace)
// are filled and emptied at every tick, one push per kernel edge: std::deque allocates and frees a block every
// few hundred elements as they move, and a std::vector with a head index checks its capacity twice per push.
// This keeps live items in buf_[head_, tail_): a push is one compare and one store; when the buffer is full, the
// popped slots are reclaimed in one move if they are at least half of it, else it doubles. So a steady stream
// allocates nothing and moves little; the buffer stays at the high-water mark, which the callers bound.
#include <algorithm>
#include <cstddef>
#include <vector>

namespace dooly {

template <typename T>
class Fifo {
 public:
  using iterator = T*;
  using const_iterator = const T*;

  bool empty() const noexcept { return head_ == tail_; }
  size_t size() const noexcept { return tail_ - head_; }

  T& front() noexcept { return buf_[head_]; }
  const T& front() const noexcept { return buf_[head_]; }
  T& back() noexcept { return buf_[tail_ - 1]; }
  const T& back() const noexcept { return buf_[tail_ - 1]; }
  T& operator[](size_t i) noexcept { return buf_[head_ + i]; }
  const T& operator[](size_t i) const noexcept { return buf_[head_ + i]; }

  iterator begin() noexcept { return buf_.data() + head_; }
  iterator end() noexcept { return buf_.data() + tail_; }
  const_iterator begin() const noexcept { return buf_.data() + head_; }
  const_iterator end() const noexcept { return buf_.data() + tail_; }

  void push_back(const T& item) {
    if (tail_ == buf_.size()) [[unlikely]]
      make_room();
    buf_[tail_++] = item;
  }
  iterator insert(const_iterator pos, const T& item) {
    const size_t i = static_cast<size_t>(pos - begin());  // among the live items: still right after a reclaim
    if (tail_ == buf_.size()) make_room();
    T* at = begin() + i;
    std::move_backward(at, end(), end() + 1);
    *at = item;
    ++tail_;
    return at;
  }

  void pop_front() noexcept { pop_front(1); }
  void pop_front(size_t n) noexcept {  // n <= size()
    head_ += n;
    if (head_ == tail_) head_ = tail_ = 0;
  }
  void clear() noexcept { head_ = tail_ = 0; }

 private:
  // Full: reclaim the popped slots in one move instead of growing, when they are at least half. A queue that
  // stays below its high-water mark moves each item at most once, and rarely: only when the buffer fills up,
  // not every time half of what it holds has been popped.
  void make_room() {
    if (head_ >= kCompactAt && 2 * head_ >= tail_) {
      std::move(begin(), end(), buf_.data());
      tail_ -= head_;
      head_ = 0;
      return;
    }
    buf_.resize(std::max<size_t>(kFirst, 2 * buf_.size()));
  }
  static constexpr size_t kCompactAt = 256;
  static constexpr size_t kFirst = 16;
  std::vector<T> buf_;  // its size is the capacity; slots outside [head_, tail_) hold stale values
  size_t head_ = 0, tail_ = 0;
};

}  // namespace dooly

#pragma once
// A first-in first-out queue over one contiguous vector: push at the back, pop at the front, random access and
// binary search in between. The sampler thread's queues (pending events, recent segments, the power trace)
// are filled and emptied at every tick; std::deque allocates and frees a block every few hundred elements as
// they move, this reuses one buffer (popped slots are reclaimed in one move when the buffer is full and they
// are at least half of it), so a steady stream allocates nothing and moves little. Capacity stays at the
// high-water mark, which the callers bound.
#include <cstddef>
#include <vector>

namespace dooly {

template <typename T>
class Fifo {
 public:
  using iterator = typename std::vector<T>::iterator;
  using const_iterator = typename std::vector<T>::const_iterator;

  bool empty() const noexcept { return head_ == items_.size(); }
  size_t size() const noexcept { return items_.size() - head_; }

  T& front() noexcept { return items_[head_]; }
  const T& front() const noexcept { return items_[head_]; }
  T& back() noexcept { return items_.back(); }
  const T& back() const noexcept { return items_.back(); }
  T& operator[](size_t i) noexcept { return items_[head_ + i]; }
  const T& operator[](size_t i) const noexcept { return items_[head_ + i]; }

  iterator begin() noexcept { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  iterator end() noexcept { return items_.end(); }
  const_iterator begin() const noexcept { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  const_iterator end() const noexcept { return items_.end(); }

  void push_back(const T& item) {
    reclaim_if_full();
    items_.push_back(item);
  }
  iterator insert(const_iterator pos, const T& item) {
    const auto i = pos - begin();  // among the live items: still right after the popped slots are reclaimed
    reclaim_if_full();
    return items_.insert(begin() + i, item);
  }

  void pop_front() noexcept {
    if (++head_ == items_.size()) {
      items_.clear();
      head_ = 0;
    }
  }
  void clear() noexcept {
    items_.clear();
    head_ = 0;
  }

 private:
  // Full: reclaim the popped slots in one move instead of growing, when they are at least half. A queue that
  // stays below its high-water mark moves each item at most once, and rarely: only when the buffer fills up,
  // not every time half of what it holds has been popped.
  void reclaim_if_full() noexcept {
    if (items_.size() < items_.capacity() || head_ < kCompactAt || 2 * head_ < items_.size()) return;
    items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
  static constexpr size_t kCompactAt = 256;
  std::vector<T> items_;
  size_t head_ = 0;  // items_[0, head_) are popped
};

}  // namespace dooly

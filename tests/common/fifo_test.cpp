#include "dooly/common/fifo.hpp"

#include <algorithm>
#include <deque>
#include <random>

#include <gtest/gtest.h>

namespace dooly {
namespace {

TEST(Fifo, BehavesLikeADequeUnderARandomMixOfPushesPopsAndInserts) {
  Fifo<int> fifo;
  std::deque<int> ref;
  std::mt19937 rng(7);
  int next = 0;
  for (int step = 0; step < 200'000; ++step) {
    const unsigned r = rng() % 100;
    if (r < 55) {
      fifo.push_back(next);
      ref.push_back(next);
      ++next;
    } else if (r < 97) {
      if (!ref.empty()) {
        ASSERT_EQ(fifo.front(), ref.front());
        fifo.pop_front();
        ref.pop_front();
      }
    } else if (!ref.empty()) {  // an insert in the middle (late events go back into time order)
      const size_t at = rng() % ref.size();
      fifo.insert(fifo.begin() + static_cast<std::ptrdiff_t>(at), -step);
      ref.insert(ref.begin() + static_cast<std::ptrdiff_t>(at), -step);
    }
    ASSERT_EQ(fifo.size(), ref.size());
    ASSERT_EQ(fifo.empty(), ref.empty());
    if (!ref.empty() && step % 997 == 0) {
      ASSERT_TRUE(std::equal(fifo.begin(), fifo.end(), ref.begin(), ref.end()));
      const size_t i = rng() % ref.size();
      ASSERT_EQ(fifo[i], ref[i]);
      ASSERT_EQ(fifo.back(), ref.back());
    }
  }
}

TEST(Fifo, ASteadyStreamReusesOneBuffer) {
  // Push k, pop k, many times over: once at its high-water mark the buffer never moves again.
  Fifo<long> fifo;
  for (long i = 0; i < 1000; ++i) fifo.push_back(i);
  const long* first = &fifo.front();
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 1000; ++i) fifo.pop_front();
    EXPECT_TRUE(fifo.empty());
    for (long i = 0; i < 1000; ++i) fifo.push_back(round * 1000 + i);
    EXPECT_EQ(&fifo.front(), first) << "round " << round;
  }
}

TEST(Fifo, InsertsLandInPlaceWhenTheyTriggerReclaimingThePoppedSlots) {
  // A queue held at ~300 live items while thousands pass through: its buffer fills again and again with the
  // popped half, and each time the next push or insert reclaims those slots first. Inserts at every such
  // moment (and in between) must land where they were aimed, as in a deque.
  Fifo<int> fifo;
  std::deque<int> ref;
  int next = 0;
  for (int i = 0; i < 300; ++i, ++next) {
    fifo.push_back(next);
    ref.push_back(next);
  }
  for (int step = 0; step < 20'000; ++step) {
    fifo.pop_front();
    ref.pop_front();
    if (step % 7 == 0) {
      const size_t at = static_cast<size_t>(step) % ref.size();
      fifo.insert(fifo.begin() + static_cast<std::ptrdiff_t>(at), -step);
      ref.insert(ref.begin() + static_cast<std::ptrdiff_t>(at), -step);
      fifo.pop_front();
      ref.pop_front();
    }
    fifo.push_back(next);
    ref.push_back(next);
    ++next;
    ASSERT_EQ(fifo.size(), ref.size());
    ASSERT_EQ(fifo.front(), ref.front()) << step;
    ASSERT_EQ(fifo.back(), ref.back()) << step;
  }
  EXPECT_TRUE(std::equal(fifo.begin(), fifo.end(), ref.begin(), ref.end()));
}

TEST(Fifo, SupportsBinarySearchOverWhatIsLeft) {
  Fifo<int> fifo;
  for (int i = 0; i < 2000; ++i) fifo.push_back(2 * i);
  for (int i = 0; i < 1500; ++i) fifo.pop_front();  // compacts at least once
  auto it = std::lower_bound(fifo.begin(), fifo.end(), 3101);
  ASSERT_NE(it, fifo.end());
  EXPECT_EQ(*it, 3102);
  EXPECT_EQ(fifo.front(), 3000);
}

}  // namespace
}  // namespace dooly

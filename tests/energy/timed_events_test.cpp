#include "dooly/energy/timed_events.hpp"

#include <vector>

#include <gtest/gtest.h>

namespace dooly::energy {
namespace {

std::vector<Event> release(TimedEvents& s, int64_t horizon) {
  std::vector<Event> out;
  s.release(horizon, [&](const Event& e) { out.push_back(e); });
  return out;
}

TEST(TimedEvents, ReleasesOnlyWhatIsOlderThanTheHorizonInTimeOrder) {
  TimedEvents s(64);
  // Records of two streams arrive out of order (stream 2's buffer first).
  ASSERT_TRUE(s.add_window(1, 0, 2, 300, 500, flags::nested));
  ASSERT_TRUE(s.add_window(0, 0, 1, 100, 400, flags::nested));
  const auto first = release(s, 450);
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[0].t_ns, 100);
  EXPECT_EQ(first[1].t_ns, 300);
  EXPECT_EQ(first[2].t_ns, 400);
  EXPECT_FALSE(first[2].begin);
  EXPECT_EQ(first[2].thread, 1u);
  EXPECT_EQ(s.size(), 1u);
  const auto rest = release(s, 1000);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].t_ns, 500);
  EXPECT_EQ(s.released_ns(), 1000);
}

TEST(TimedEvents, AtOneInstantEndsComeBeforeBegins) {
  TimedEvents s(64);
  ASSERT_TRUE(s.add_window(1, 0, 1, 200, 300, flags::nested));  // added first, starts where the other ends
  ASSERT_TRUE(s.add_window(0, 0, 1, 100, 200, flags::nested));
  const auto out = release(s, 1000);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_FALSE(out[1].begin);
  EXPECT_EQ(out[1].key, 0u);
  EXPECT_TRUE(out[2].begin);
  EXPECT_EQ(out[2].key, 1u);
}

TEST(TimedEvents, AnEmptyWindowGetsOneNanosecond) {
  TimedEvents s(64);
  ASSERT_TRUE(s.add_window(0, 0, 1, 100, 100, flags::nested));
  const auto out = release(s, 1000);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].t_ns, 101);
}

TEST(TimedEvents, FullDropsWholeWindowsAndCounts) {
  TimedEvents s(5);
  EXPECT_TRUE(s.add_window(0, 0, 1, 1, 2, flags::nested));
  EXPECT_TRUE(s.add_window(0, 0, 1, 3, 4, flags::nested));
  EXPECT_FALSE(s.add_window(0, 0, 1, 5, 6, flags::nested));  // 4 + 2 > 5: neither edge is kept
  EXPECT_EQ(s.size(), 4u);
  EXPECT_EQ(s.dropped_full(), 1u);
}

TEST(TimedEvents, AnAcceptedBeginKeepsRoomForItsEnd) {
  TimedEvents s(4);
  ASSERT_TRUE(s.add_begin(7, -1, 0, 10, 0));
  EXPECT_TRUE(s.add_window(0, 0, 1, 11, 12, flags::nested));   // 1 + 1 reserved + 2 = 4
  EXPECT_FALSE(s.add_window(0, 0, 1, 13, 14, flags::nested));  // no room left: the end's slot is held
  s.add_end(7, -1, 0, 20, 0);                                  // never refused
  EXPECT_EQ(s.size(), 4u);
  EXPECT_EQ(s.dropped_full(), 1u);
}

TEST(TimedEvents, LateWindowsAreDroppedAndLateEndsMovedUp) {
  TimedEvents s(64);
  ASSERT_TRUE(s.add_begin(7, -1, 0, 10, 0));
  (void)release(s, 500);
  EXPECT_FALSE(s.add_window(0, 0, 1, 400, 600, flags::nested));  // begins before what was released
  EXPECT_EQ(s.dropped_late(), 1u);
  s.add_end(7, -1, 0, 450, 0);  // its begin went out: the end still closes it, at the released instant
  EXPECT_EQ(s.ends_moved(), 1u);
  const auto out = release(s, 1000);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].t_ns, 500);
}

}  // namespace
}  // namespace dooly::energy

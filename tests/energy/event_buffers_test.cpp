#include "dooly/energy/event_buffers.hpp"

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace dooly::energy {
namespace {

// Everything published, as the sampler receives it (drain_in_order's sink), appended to `out`.
void drain(EventBuffers& buffers, std::vector<EventBuffers::Drained>& out) {
  std::vector<EventBuffers::Drained> scratch;
  buffers.drain_in_order(scratch, [&](uint32_t thread, const RawEvent& e) { out.push_back({thread, e}); });
}

TEST(EventBuffers, EveryThreadsEventsArriveInOrderWhileDrainedConcurrently) {
  EventBuffers buffers(1024);
  constexpr int kThreads = 4, kEvents = 50000;
  std::atomic<bool> done{false};
  std::vector<std::vector<uint32_t>> seen(kThreads + 8);  // by ring index: keys in arrival order
  std::vector<EventBuffers::Drained> out;
  std::thread consumer([&] {
    while (!done.load()) {
      out.clear();
      drain(buffers, out);
      for (const auto& d : out) seen[d.thread].push_back(d.event.key);
    }
    out.clear();
    drain(buffers, out);
    for (const auto& d : out) seen[d.thread].push_back(d.event.key);
  });
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t)
    producers.emplace_back([&] {
      for (int i = 0; i < kEvents; ++i) buffers.record(static_cast<KeyId>(i), 0, (i & 1) != 0, 1);
    });
  for (auto& p : producers) p.join();
  done = true;
  consumer.join();
  uint64_t received = 0;
  for (const auto& keys : seen) {
    received += keys.size();
    for (size_t i = 1; i < keys.size(); ++i) ASSERT_LT(keys[i - 1], keys[i]) << "a ring reordered its events";
  }
  EXPECT_EQ(received + buffers.dropped(), static_cast<uint64_t>(kThreads) * kEvents);
}

TEST(EventBuffers, DrainInOrderMergesThreadsByTimeAndPassesOneThreadStraightThrough) {
  EventBuffers buffers(1 << 16);
  constexpr int kThreads = 3, kEvents = 20000;
  std::atomic<bool> done{false};
  std::vector<std::vector<uint32_t>> seen(kThreads + 8);
  std::vector<EventBuffers::Drained> scratch;
  uint64_t received = 0, batches_out_of_order = 0;
  auto drain = [&] {
    uint64_t last_ticks = 0;
    bool first = true;
    buffers.drain_in_order(scratch, [&](uint32_t thread, const RawEvent& e) {
      if (!first && e.ticks < last_ticks) ++batches_out_of_order;
      first = false;
      last_ticks = e.ticks;
      seen[thread].push_back(e.key);
      ++received;
    });
  };
  std::thread consumer([&] {
    while (!done.load()) drain();
    drain();
  });
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t)
    producers.emplace_back([&] {
      for (int i = 0; i < kEvents; ++i) buffers.record(static_cast<KeyId>(i), 0, (i & 1) == 0, 1);
    });
  for (auto& p : producers) p.join();
  done = true;
  consumer.join();
  EXPECT_EQ(batches_out_of_order, 0u) << "a drain handed over events out of time order";
  for (const auto& keys : seen)
    for (size_t i = 1; i < keys.size(); ++i) ASSERT_LT(keys[i - 1], keys[i]) << "a thread's events were reordered";
  EXPECT_EQ(received + buffers.dropped(), static_cast<uint64_t>(kThreads) * kEvents);

  // One thread only: straight from its ring, and the slots are free again afterwards (nothing twice).
  EventBuffers one(64);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 20; ++i) one.record(static_cast<KeyId>(round * 100 + i), 0, (i & 1) == 0, 1);
    std::vector<uint32_t> keys;
    one.drain_in_order(scratch, [&](uint32_t, const RawEvent& e) { keys.push_back(e.key); });
    ASSERT_EQ(keys.size(), 20u) << "round " << round;
    for (int i = 0; i < 20; ++i) EXPECT_EQ(keys[i], static_cast<uint32_t>(round * 100 + i));
  }
  EXPECT_EQ(one.dropped(), 0u);
}

TEST(EventBuffers, ASinkThatThrowsDoesNotGetTheSameEventsTwice) {
  EventBuffers buffers(64);
  for (int i = 0; i < 10; ++i) buffers.record(static_cast<KeyId>(i), 0, (i & 1) == 0, 1);
  std::vector<EventBuffers::Drained> scratch;
  std::vector<uint32_t> seen;
  EXPECT_THROW(buffers.drain_in_order(scratch, [&](uint32_t, const RawEvent& e) {
    if (e.key == 4) throw std::runtime_error("sink failed");
    seen.push_back(e.key);
  }), std::runtime_error);
  buffers.drain_in_order(scratch, [&](uint32_t, const RawEvent& e) { seen.push_back(e.key); });
  EXPECT_EQ(seen, (std::vector<uint32_t>{0, 1, 2, 3, 5, 6, 7, 8, 9}));  // the failing one is lost, none twice
}

TEST(EventBuffers, FullRingDropsWholeWindowsAndCounts) {
  // 100 nested windows opened before any is closed, into a ring of 16: a begin is kept only while its end's
  // slot can be reserved (8 windows), everything inside a dropped window is dropped too, ends included.
  EventBuffers buffers(16);
  for (int i = 0; i < 100; ++i) buffers.record(static_cast<KeyId>(i), 0, true, 1);
  for (int i = 99; i >= 0; --i) buffers.record(static_cast<KeyId>(i), 0, false, 1);
  std::vector<EventBuffers::Drained> out;
  drain(buffers, out);
  ASSERT_EQ(out.size(), 16u);
  EXPECT_EQ(buffers.dropped(), 184u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(out[i].event.key, static_cast<KeyId>(i));
    EXPECT_EQ(out[i].event.begin, 1);
    EXPECT_EQ(out[15 - i].event.key, static_cast<KeyId>(i));  // its end, in LIFO order
    EXPECT_EQ(out[15 - i].event.begin, 0);
  }
  // After a drain there is room again, and a free (non-nested) window goes through whole.
  buffers.record(2, 3, true, 0);
  buffers.record(2, 3, false, 0);
  out.clear();
  drain(buffers, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].event.key, 2u);
  EXPECT_EQ(out[1].event.device, 3);
  EXPECT_EQ(out[1].event.begin, 0);
}

TEST(EventBuffers, AFreeEndFromAnotherThreadIsStrayNotAFullRing) {
  // Free windows (flags 0) into a ring of 16: 8 begins are kept (each holds its end's slot), the rest dropped.
  EventBuffers buffers(16);
  for (int i = 0; i < 10; ++i) buffers.record(static_cast<KeyId>(i), 0, true, 0);
  EXPECT_EQ(buffers.dropped(), 2u);
  // Their ends are a full ring's too, though other free windows are open on the thread: counted with the drops
  // (by key: neither takes a kept window's reserved slot), not as strays.
  for (int i = 9; i >= 8; --i) buffers.record(static_cast<KeyId>(i), 0, false, 0);
  EXPECT_EQ(buffers.dropped(), 4u);
  EXPECT_EQ(buffers.stray_ends(), 0u);
  // An end from a thread that began nothing is a stray: ignored, counted apart, no ring is full.
  std::thread other([&] { buffers.record(3, 0, false, 0); });
  other.join();
  EXPECT_EQ(buffers.dropped(), 4u);
  EXPECT_EQ(buffers.stray_ends(), 1u);
  // The kept windows end on their own thread, every end stored.
  for (int i = 7; i >= 0; --i) buffers.record(static_cast<KeyId>(i), 0, false, 0);
  std::vector<EventBuffers::Drained> out;
  drain(buffers, out);
  ASSERT_EQ(out.size(), 16u);
  EXPECT_EQ(buffers.dropped(), 4u);
  EXPECT_EQ(buffers.stray_ends(), 1u);
}

TEST(EventBuffers, AcceptTurnsRecordingOffAndOnForEveryThreadPresentAndFuture) {
  EventBuffers buffers(64);
  std::vector<EventBuffers::Drained> out;
  buffers.record(1, -1, true, 1);  // this thread registers while accepting
  buffers.accept(false);
  buffers.record(1, -1, false, 1);
  std::thread([&] { buffers.record(2, 0, true, 1); }).join();  // a thread that registers while not accepting
  drain(buffers, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(buffers.dropped(), 0u);  // not taken is not dropped
  buffers.accept(true);
  buffers.record(3, -1, false, 1);
  std::thread([&] {
    buffers.record(4, 5, true, 0);
    buffers.record(4, 5, false, 0);
  }).join();
  out.clear();
  drain(buffers, out);
  ASSERT_EQ(out.size(), 3u);
  // Every field as written (the second half of an event is stored as one computed word).
  EXPECT_EQ(out[0].event.key, 3u);
  EXPECT_EQ(out[0].event.device, -1);
  EXPECT_EQ(out[0].event.begin, 0);
  EXPECT_EQ(out[0].event.flags, 1);
  EXPECT_EQ(out[1].event.key, 4u);
  EXPECT_EQ(out[1].event.device, 5);
  EXPECT_EQ(out[1].event.begin, 1);
  EXPECT_EQ(out[1].event.flags, 0);
  EXPECT_NE(out[0].thread, out[1].thread);
}

TEST(EventBuffers, EachThreadKeepsOneShareInEachBuffersAcrossUsingOthers) {
  EventBuffers a(64), b(64);
  EventBuffers::Thread* ta = a.local();
  ASSERT_NE(ta, nullptr);
  EventBuffers::Thread* tb = b.local();
  ASSERT_NE(tb, nullptr);
  EXPECT_NE(tb, ta);
  EXPECT_EQ(a.local(), ta);  // the same share again after using other buffers (one thread-local slot for all)
  EXPECT_EQ(b.local(), tb);
  EventBuffers::Thread* other = nullptr;
  std::thread([&] { other = a.local(); }).join();
  EXPECT_NE(other, nullptr);
  EXPECT_NE(other, ta);
}

TEST(TickConverter, MapsTicksOntoTheSteadyClock) {
  TickConverter c;
  c.calibrate_initial();
  const uint64_t t = ticks();
  const int64_t ns = now_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  c.calibrate();
  // Interpolated between the two calibration pairs: within a few microseconds of the steady read.
  EXPECT_NEAR(static_cast<double>(c.to_ns(t)), static_cast<double>(ns), 20'000.0);
  const uint64_t t2 = ticks();
  const int64_t ns2 = now_ns();
  EXPECT_NEAR(static_cast<double>(c.to_ns(t2)), static_cast<double>(ns2), 20'000.0);
}

}  // namespace
}  // namespace dooly::energy

// Iteration period detection on synthetic allocation sequences.
#include <gtest/gtest.h>

#include "profiler/periodicity.hpp"

using namespace tierpack;

namespace {
/// Feeds one iteration: `layers` activations piling up, their frees, then a few temporaries.
/// Returns true if the detector fired during it.
bool feed_iteration(PeriodDetector& d, int layers, std::uint64_t base) {
  bool fired = false;
  std::uint64_t live = base;
  for (int l = 0; l < layers; ++l) {
    fired |= d.feed(1, live);  // same key every layer
    live += 100;
  }
  for (int l = 0; l < layers; ++l) {
    fired |= d.feed(2, live);
    live -= 100;
  }
  for (int k = 0; k < 3; ++k) fired |= d.feed(3, live);
  return fired;
}
}  // namespace

TEST(PeriodDetector, RepeatedLayersAreNotTheIteration) {
  PeriodDetector d({.min_period = 4, .max_history = 1 << 20});
  // One long forward of 40 identical layers: the key repeats but live bytes grow.
  for (int l = 0; l < 40; ++l) EXPECT_FALSE(d.feed(7, 1000 + 100 * static_cast<std::uint64_t>(l)));
  EXPECT_FALSE(d.found());
}

TEST(PeriodDetector, FindsTheIterationAndPutsTheBoundaryAtLowestLiveMemory) {
  PeriodDetector d({.min_period = 4, .max_history = 1 << 20});
  for (int s = 0; s < 5; ++s) d.feed(100 + static_cast<std::uint64_t>(s), 10 * static_cast<std::uint64_t>(s));
  int fired_at = -1;
  for (int it = 0; it < 10 && fired_at < 0; ++it)
    if (feed_iteration(d, 6, 1000)) fired_at = it;
  ASSERT_TRUE(d.found());
  EXPECT_EQ(d.period(), 15u);  // 6 + 6 + 3
  EXPECT_LE(fired_at, 4);
  // Lowest live memory within the period: the first activation of an iteration (live == 1000) ties
  // with... nothing lower; the temporaries run at 1000 too, the earliest wins: position 5 + k*15.
  EXPECT_EQ((d.boundary() - 5) % 15, 0u);
}

TEST(PeriodDetector, AShortRepeatEarlyOnIsNotAccepted) {
  PeriodDetector d({.min_period = 2, .max_history = 1 << 20});
  // A long non-periodic stretch, 4 copies of a 2-allocation pattern, and more non-periodic work:
  // the repeat covers too little of what was seen to be the training loop.
  for (std::uint64_t i = 0; i < 100; ++i) d.feed(1000 + i, i);
  for (int i = 0; i < 4; ++i) {
    d.feed(1, 0);
    d.feed(2, 0);
  }
  for (std::uint64_t i = 0; i < 100; ++i) d.feed(5000 + i, i);
  EXPECT_FALSE(d.found());
}

TEST(PeriodDetector, GivesUpAfterItsHistoryLimit) {
  PeriodDetector d({.min_period = 4, .max_history = 50});
  for (std::uint64_t i = 0; i < 60; ++i) d.feed(i, i);
  EXPECT_TRUE(d.gave_up());
  EXPECT_FALSE(d.found());
}

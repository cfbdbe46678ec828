// RunPhases: the order of the phases, the divergence streak and its limit (Note [Diverged iterations]).
#include "runtime/phases.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"

namespace tierpack {
namespace {

RunPhases planned(int limit) {
  RunPhases p(RunPhaseOptions{.divergence_limit = limit});
  p.record();
  p.end_iteration();
  p.follow();
  return p;
}

TEST(RunPhases, WarmUpThenRecordingThenPlanned) {
  RunPhases p;
  EXPECT_EQ(p.phase(), RunPhase::warmup);
  p.end_iteration();
  EXPECT_EQ(p.phase(), RunPhase::warmup) << "the warm-up lasts until the runtime starts recording";
  p.record();
  EXPECT_EQ(p.phase(), RunPhase::recording);
  EXPECT_EQ(p.recorded(), 0);
  p.end_iteration();
  p.end_iteration();
  EXPECT_EQ(p.phase(), RunPhase::recording) << "recording lasts until a plan is made";
  EXPECT_EQ(p.recorded(), 2);
  EXPECT_FALSE(p.following());
  p.follow();
  EXPECT_EQ(p.phase(), RunPhase::planned);
  EXPECT_TRUE(p.following());
  EXPECT_EQ(std::string(to_string(p.phase())), "planned");
}

TEST(RunPhases, AGivenPlanIsFollowedWithoutRecording) {
  RunPhases p;
  p.follow();
  EXPECT_TRUE(p.following());
}

TEST(RunPhases, OutOfOrderTransitionsAreRefused) {
  RunPhases p = planned(3);
  EXPECT_THROW(p.record(), logic_error) << "no recording under a plan";
  EXPECT_THROW(p.follow(), logic_error) << "a plan is in force already";
  RunPhases q;
  q.record();
  EXPECT_THROW(q.record(), logic_error);
}

TEST(RunPhases, DivergenceOutsideAPlanChangesNothing) {
  RunPhases p;
  EXPECT_FALSE(p.diverge());
  EXPECT_EQ(p.phase(), RunPhase::warmup);
  p.record();
  EXPECT_FALSE(p.diverge());
  EXPECT_EQ(p.phase(), RunPhase::recording);
  EXPECT_EQ(p.divergent_streak(), 0);
}

TEST(RunPhases, ADivergedIterationSuspendsThePlanUntilItEnds) {
  RunPhases p = planned(3);
  EXPECT_FALSE(p.diverge());
  EXPECT_EQ(p.phase(), RunPhase::suspended);
  EXPECT_FALSE(p.following());
  EXPECT_FALSE(p.diverge()) << "one iteration diverges once";
  EXPECT_EQ(p.divergent_streak(), 1);
  p.end_iteration();
  EXPECT_EQ(p.phase(), RunPhase::planned) << "the next iteration follows the plan again";
  EXPECT_EQ(p.divergent_streak(), 1) << "the streak ends only with a followed iteration";
}

TEST(RunPhases, AFollowedIterationEndsTheStreak) {
  RunPhases p = planned(3);
  for (int round = 0; round < 4; ++round) {
    p.diverge();
    p.end_iteration();
    p.diverge();
    p.end_iteration();
    EXPECT_EQ(p.divergent_streak(), 2);
    p.end_iteration();  // followed
    EXPECT_EQ(p.divergent_streak(), 0);
    EXPECT_EQ(p.phase(), RunPhase::planned) << "round " << round << ": 2 in a row, then a followed one";
  }
}

TEST(RunPhases, TheLimitInARowTurnsThePlanOffForGood) {
  for (int limit = 1; limit <= 4; ++limit) {
    RunPhases p = planned(limit);
    for (int i = 1; i < limit; ++i) {
      EXPECT_FALSE(p.diverge()) << "limit " << limit << ", divergence " << i;
      p.end_iteration();
    }
    EXPECT_TRUE(p.diverge()) << "limit " << limit;
    EXPECT_EQ(p.phase(), RunPhase::off);
    EXPECT_EQ(p.divergent_streak(), limit);
    // Never back on: not at the iteration's end, not by a later one, not by a new plan.
    for (int i = 0; i < 3; ++i) {
      p.end_iteration();
      EXPECT_FALSE(p.diverge());
      EXPECT_EQ(p.phase(), RunPhase::off);
    }
    EXPECT_THROW(p.follow(), logic_error);
    EXPECT_THROW(p.record(), logic_error);
    EXPECT_EQ(p.phase(), RunPhase::off);
  }
}

TEST(RunPhases, APlanThatCouldNotBeMadeIsOffForGood) {
  RunPhases p;
  p.record();
  p.turn_off();
  p.end_iteration();
  EXPECT_EQ(p.phase(), RunPhase::off);
  EXPECT_THROW(p.follow(), logic_error);
}

TEST(RunPhases, TheDefaultLimitIsThree) {
  // Note [Diverged iterations]: the end of an epoch (a short last batch, then an evaluation or a barrier)
  // gives two odd iterations in a row, which the default lets pass.
  RunPhases p;
  EXPECT_EQ(p.options().divergence_limit, 3);
  p.follow();
  for (int i = 0; i < 2; ++i) {
    EXPECT_FALSE(p.diverge());
    p.end_iteration();
  }
  EXPECT_TRUE(p.following());
  EXPECT_TRUE(p.diverge());
}

}  // namespace
}  // namespace tierpack

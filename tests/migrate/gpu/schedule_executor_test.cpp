// ScheduleExecutor driving the GPU mover on the twin (its tick clock): moves are issued on the clock,
// prefetches land before they are needed, and the counters say what happened.
#include "migrate/schedule_executor.hpp"

#include "core/error.hpp"
#include "tests/migrate/gpu/mover_fixture.hpp"

namespace tierpack::gpu::testing {
namespace {

using ExecutorTest = MoverTest<TwinKind>;

Move move(GroupId g, MoveKind k, OpIndex issue_after, OpIndex needed_by = kAfterIteration) {
  Move m;
  m.group = g;
  m.kind = k;
  m.from = k == MoveKind::evict ? 0 : 1;
  m.to = k == MoveKind::evict ? 1 : 0;
  m.issue_after = issue_after;
  m.needed_by = needed_by;
  return m;
}

TEST_F(ExecutorTest, RunsTheScheduleOnTheClockAcrossIterations) {
  make(16);
  const StreamHandle s = streams_[0];
  auto g0 = make_group(2, 1, s);
  auto g1 = make_group(2, 2, s);
  // g0: idle in (3, 8); g1: idle from 5 to the next iteration's 2 (wraps).
  std::vector<Move> schedule = {move(0, MoveKind::evict, 3), move(0, MoveKind::prefetch, 5, 8),
                                move(1, MoveKind::evict, 5), move(1, MoveKind::prefetch, 0, 2)};
  mover_->bind_groups({{0, g0.arena}, {1, g1.arena}});
  ScheduleExecutor ex(*mover_, schedule);
  for (int it = 0; it < 3; ++it) {
    ex.begin_iteration(s);
    for (std::int64_t c = 1; c <= 10; ++c) {
      ex.advance(c, s);
      if (c == 2) {
        EXPECT_EQ(alloc_->residency(g1.arena).host_bytes, 0u) << "g1 needed at 2";
      }
      if (c == 8) {
        EXPECT_EQ(alloc_->residency(g0.arena).host_bytes, 0u) << "g0 needed at 8";
      }
    }
    ex.end_iteration(s);
    check(g0, s);
    check(g1, s);
  }
  mover_->drain();
  sync_all();
  EXPECT_EQ(dev_->take_mismatches(), 0u);
  const MoverCounters c = mover_->counters();
  EXPECT_EQ(c.evictions, 6u);
  EXPECT_EQ(c.misses, 0u);
  EXPECT_EQ(ex.ensured_misses(), 0u);
}

// Note [Away when the plan starts]: a group whose time away wraps around the iteration's end (g1), and
// one kept on the host for good (g2, no prefetch), leave when the plan takes over; a group idle only
// inside the iteration (g0) stays until its eviction's point.
TEST_F(ExecutorTest, GroupsAwayWhenAnIterationStartsLeaveWhenThePlanTakesOver) {
  make(16);
  const StreamHandle s = streams_[0];
  auto g0 = make_group(1, 1, s);
  auto g1 = make_group(1, 2, s);
  auto g2 = make_group(1, 3, s);
  mover_->bind_groups({{0, g0.arena}, {1, g1.arena}, {2, g2.arena}});
  ScheduleExecutor ex(*mover_,
                      {move(0, MoveKind::evict, 3), move(0, MoveKind::prefetch, 5, 8), move(1, MoveKind::evict, 5),
                       move(1, MoveKind::prefetch, 0, 2), move(2, MoveKind::evict, 6)});
  EXPECT_EQ(ex.evict_away_at_start(s), 2u);
  mover_->drain();
  EXPECT_EQ(alloc_->residency(g0.arena).host_bytes, 0u) << "g0 leaves at clock 3, not before";
  EXPECT_GT(alloc_->residency(g1.arena).host_bytes, 0u);
  EXPECT_GT(alloc_->residency(g2.arena).host_bytes, 0u);
  ex.begin_iteration(s);
  for (std::int64_t c = 1; c <= 10; ++c) ex.advance(c, s);
  ex.end_iteration(s);
  mover_->drain();
  check(g0, s);
  check(g1, s);
  check(g2, s);
  sync_all();
  EXPECT_EQ(dev_->take_mismatches(), 0u);
  EXPECT_EQ(ex.ensured_misses(), 0u);
}

// Note [Repairing the schedule]: a use the plan missed, reported by a verified remap.
TEST_F(ExecutorTest, RepairPostponesAnEvictionPastAMissedUseOrDropsTheRoundTrip) {
  make(16);
  const StreamHandle s = streams_[0];
  auto g0 = make_group(1, 1, s);
  auto g1 = make_group(1, 2, s);
  // g0 idle in (3, 30) with its prefetch issued at 20; g1 idle from 5 to the next iteration's 2.
  mover_->bind_groups({{0, g0.arena}, {1, g1.arena}});
  ScheduleExecutor ex(*mover_, {move(0, MoveKind::evict, 3), move(0, MoveKind::prefetch, 20, 30),
                                move(1, MoveKind::evict, 5), move(1, MoveKind::prefetch, 0, 2)});
  auto issue_of = [&](GroupId g, MoveKind k) {
    for (const Move& m : ex.schedule())
      if (m.group == g && m.kind == k) return static_cast<std::int64_t>(m.issue_after);
    return std::int64_t{-100};
  };
  // Seen by an eviction at clock 10: g0's eviction now starts after 10, its prefetch is unchanged.
  EXPECT_NE(ex.repair(0, MoveKind::evict, 10).find("after clock 10"), std::string::npos);
  EXPECT_EQ(issue_of(0, MoveKind::evict), 10);
  EXPECT_EQ(issue_of(0, MoveKind::prefetch), 20);
  EXPECT_EQ(ex.moves(), 4u);
  // Seen again past the prefetch's issue point: the round trip goes, g0 stays resident.
  EXPECT_NE(ex.repair(0, MoveKind::evict, 25).find("dropped"), std::string::npos);
  EXPECT_EQ(issue_of(0, MoveKind::evict), -100);
  EXPECT_EQ(issue_of(0, MoveKind::prefetch), -100);
  EXPECT_EQ(ex.moves(), 2u);
  // g1's eviction wraps to the next iteration: a use seen late in the iteration postpones it.
  EXPECT_NE(ex.repair(1, MoveKind::evict, 9).find("after clock 9"), std::string::npos);
  EXPECT_EQ(issue_of(1, MoveKind::evict), 9);
  // A write seen by a prefetch: the group was needed before it arrived: the round trip goes.
  EXPECT_NE(ex.repair(1, MoveKind::prefetch, 1).find("dropped"), std::string::npos);
  EXPECT_EQ(ex.moves(), 0u);
  EXPECT_EQ(ex.repair(7, MoveKind::evict, 3), "") << "a group the schedule does not move";
  // The repaired schedule still runs.
  ex.begin_iteration(s);
  for (std::int64_t c = 1; c <= 10; ++c) ex.advance(c, s);
  ex.end_iteration(s);
  mover_->drain();
  EXPECT_EQ(alloc_->residency(g0.arena).host_bytes + alloc_->residency(g1.arena).host_bytes, 0u);
}

TEST_F(ExecutorTest, RejectsAScheduleForAnUnboundGroup) {
  make(4);
  EXPECT_THROW(ScheduleExecutor(*mover_, {move(3, MoveKind::evict, 1)}), tierpack::logic_error);
}

}  // namespace
}  // namespace tierpack::gpu::testing

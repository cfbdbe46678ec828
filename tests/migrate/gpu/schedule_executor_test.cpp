// ScheduleExecutor on the twin: moves are issued on the clock, prefetches land before they are
// needed, and the counters say what happened.
#include "migrate/gpu/schedule_executor.hpp"

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
  ScheduleExecutor ex(*mover_, schedule, {{0, g0.arena}, {1, g1.arena}});
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

TEST_F(ExecutorTest, RejectsAScheduleForAnUnboundGroup) {
  make(4);
  EXPECT_THROW(ScheduleExecutor(*mover_, {move(3, MoveKind::evict, 1)}, {}), tierpack::logic_error);
}

}  // namespace
}  // namespace tierpack::gpu::testing

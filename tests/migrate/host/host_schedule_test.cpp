// ScheduleExecutor driving the host mover through the Mover interface on op events (as the host runtime
// does): moves issued at their own op's end and only there, late prefetches counted, never waited for;
// and which mover serves which pair of tier kinds (mover_for).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "migrate/host/host_mover.hpp"
#include "migrate/schedule_executor.hpp"
#include "platform/fault_injecting_os.hpp"
#include "tests/migrate/host/host_test_util.hpp"

namespace tierpack::host {
namespace {

using testing::fast_and_far;

struct Fixture {
  FaultInjectingOs os{system_os()};
  std::unique_ptr<HostArenaAllocator> alloc;
  std::vector<void*> blocks;
  std::size_t page = system_os().page_size();

  Fixture() {
    HostAllocatorOptions o;
    o.os = &os;
    alloc = std::make_unique<HostArenaAllocator>(fast_and_far(), o);
  }
  ~Fixture() {
    for (void* b : blocks) alloc->deallocate(b);
  }
  /// One touched block of 4 pages in group g on tier `tier`.
  void* group(GroupId g, TierId tier = 0) {
    void* p = alloc->allocate(4 * page, TensorClass::activation, tier, {0, g});
    std::memset(p, 0x5a, 4 * page);
    blocks.push_back(p);
    return p;
  }
  TierId tier_of(void* p) { return alloc->lookup(p)->tier; }
};

Move evict(GroupId g, OpIndex after) { return {.group = g, .kind = MoveKind::evict, .from = 0, .to = 1, .issue_after = after}; }
Move prefetch(GroupId g, OpIndex after, OpIndex needed) {
  return {.group = g, .kind = MoveKind::prefetch, .from = 1, .to = 0, .issue_after = after, .needed_by = needed};
}

// Ops nest (op 1 runs inside op 0): each op's moves go when that op ends, not when a later-begun op does.
TEST(HostSchedule, OpEventsIssueEachMoveAtItsOwnOpsEnd) {
  Fixture f;
  void* before = f.group(1);
  void* outer = f.group(2);
  void* inner = f.group(3);
  void* back = f.group(4, 1);
  HostMover mover(*f.alloc, MoverOptions{.worker = false});  // moves run inside submit: their order shows
  ScheduleExecutor ex(mover, {evict(1, kBeforeIteration), evict(2, 0), evict(3, 1), prefetch(4, 1, 3)});
  ex.begin_op_iteration();
  EXPECT_EQ(f.tier_of(before), 1);
  EXPECT_EQ(f.tier_of(outer), 0);
  ex.op_begin(0);
  ex.op_begin(1);
  EXPECT_EQ(f.tier_of(inner), 0) << "op 1 has not ended";
  ex.op_end(1);
  EXPECT_EQ(f.tier_of(inner), 1);
  EXPECT_EQ(f.tier_of(back), 0);
  EXPECT_EQ(f.tier_of(outer), 0) << "op 0 (the outer op) has not ended";
  ex.op_end(0);
  EXPECT_EQ(f.tier_of(outer), 1);
  ex.op_begin(2);
  ex.op_end(2);
  const MoveCounters c = mover.take_counters();
  EXPECT_EQ(c.moves_submitted, 4u);
  EXPECT_EQ(c.moves_complete, 4u);
  EXPECT_EQ(c.moves_late, 0u);
  EXPECT_EQ(ex.take_log().moves.size(), 4u);
  // The next iteration issues them again.
  ex.begin_op_iteration();
  EXPECT_EQ(mover.counters().moves_submitted, 1u);
}

// A prefetch still moving when its op begins is counted late once and never waited for; one whose
// issuing op has not ended when it is needed is not issued early, and counted late when it is still
// moving as a later op begins (as HostMover::reached counts every queued prefetch).
TEST(HostSchedule, LatePrefetchesAreCountedNeverWaitedFor) {
  Fixture f;
  f.group(6);
  f.group(7, 1);
  f.group(8, 1);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> entered{0};
  f.os.on_move_pages([&] {
    if (entered.fetch_add(1) == 0) gate.wait();  // hold the first move mid-way
  });
  HostMover mover(*f.alloc);
  ScheduleExecutor ex(mover, {evict(6, kBeforeIteration), prefetch(7, kBeforeIteration, 2), prefetch(8, 3, 4)});
  ex.begin_op_iteration();
  while (entered.load() == 0) std::this_thread::yield();
  ex.op_begin(0);
  ex.op_end(0);
  ex.op_begin(1);
  EXPECT_EQ(mover.counters().moves_late, 0u) << "not needed yet";
  ex.op_begin(2);  // op 2 holds op 3 (and op 4 inside it)
  ex.op_begin(3);
  EXPECT_EQ(mover.counters().moves_late, 1u) << "late once, however many ops begin";
  EXPECT_EQ(ex.ensured_misses(), 1u);
  ex.op_begin(4);
  EXPECT_EQ(mover.counters().moves_submitted, 2u) << "group 8's prefetch waits for op 3's end";
  ex.op_end(4);
  ex.op_end(3);
  EXPECT_EQ(mover.counters().moves_submitted, 3u);
  ex.op_end(2);
  ex.op_begin(5);
  EXPECT_EQ(mover.counters().moves_late, 2u) << "group 8's prefetch, queued behind the held move";
  release.set_value();
  mover.wait_idle();
  const MoveCounters c = mover.take_counters();
  EXPECT_EQ(c.moves_complete, 3u);
  EXPECT_EQ(c.moves_late, 2u);
  const ExecutionLog log = ex.take_log();
  EXPECT_EQ(log.moves.size(), 3u);
  EXPECT_TRUE(log.stalls.empty()) << "the host mover never waits";
}

TEST(HostSchedule, RejectsNothingTheHostMoverCanMove) {
  Fixture f;
  HostMover mover(*f.alloc);
  EXPECT_NO_THROW(ScheduleExecutor(mover, {evict(99, 0)}));
}

TEST(MoverFor, EachTierPairHasItsMover) {
  EXPECT_EQ(mover_for(TierKind::host_dram, TierKind::far_memory), MoverKind::host_pages);
  EXPECT_EQ(mover_for(TierKind::far_memory, TierKind::host_dram), MoverKind::host_pages);
  EXPECT_EQ(mover_for(TierKind::host_dram, TierKind::host_dram), MoverKind::host_pages);
  EXPECT_EQ(mover_for(TierKind::gpu, TierKind::host_dram), MoverKind::device_groups);
  EXPECT_EQ(mover_for(TierKind::host_dram, TierKind::gpu), MoverKind::device_groups);
  EXPECT_EQ(mover_for(TierKind::gpu, TierKind::far_memory), MoverKind::none);
  EXPECT_EQ(mover_for(TierKind::gpu, TierKind::gpu), MoverKind::none);
}

}  // namespace
}  // namespace tierpack::host

// HostMover: per-page status handling with injected errors, retries, call-level failures, mbind
// moves, the worker queue, late prefetches and shutdown with moves in flight; the schedule executor
// driving it on op events (as the host runtime does), and mover_for's table of tier pairs.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "migrate/host/host_mover.hpp"
#include "migrate/schedule_executor.hpp"
#include "platform/fault_injecting_os.hpp"
#include "tests/migrate/host/host_test_util.hpp"

namespace tierpack::host {
namespace {

using testing::checksum;
using testing::fast_and_far;

struct Fixture {
  FaultInjectingOs os{system_os()};
  std::unique_ptr<HostArenaAllocator> alloc;
  std::vector<char*> blocks;
  std::size_t page = system_os().page_size();

  Fixture() {
    HostAllocatorOptions o;
    o.os = &os;
    alloc = std::make_unique<HostArenaAllocator>(fast_and_far(), o);
  }
  ~Fixture() {
    for (char* b : blocks) alloc->deallocate(b);
  }
  /// `n` blocks of `pages` pages each in group g on tier 0, touched (first `touched` pages).
  std::vector<char*> group(GroupId g, int n, std::size_t pages, std::size_t touched = ~std::size_t{0}) {
    std::vector<char*> out;
    for (int i = 0; i < n; ++i) {
      char* p = static_cast<char*>(alloc->allocate(pages * page, TensorClass::activation, 0, {i, g}));
      std::memset(p, 0x5a + i, std::min(touched, pages) * page);
      out.push_back(p);
      blocks.push_back(p);
    }
    return out;
  }
};

TEST(HostMover, CompleteMoveRechargesTheGroupAndCountsBytes) {
  Fixture f;
  auto blocks = f.group(1, 4, 16);
  const auto sum = checksum(blocks[0], 16 * f.page);
  HostMover mover(*f.alloc, {.worker = false});
  MoveResult r = mover.move_now(1, 1, MoveKind::evict);
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.counters.moves_complete, 1u);
  EXPECT_GE(r.counters.pages_moved, 4u * 16);
  EXPECT_EQ(r.counters.bytes_to_slow, r.counters.pages_moved * f.page);
  EXPECT_EQ(r.counters.bytes_to_fast, 0u);
  EXPECT_TRUE(r.counters.failures_by_errno.empty());
  EXPECT_EQ(f.alloc->lookup(blocks[2])->tier, 1);
  EXPECT_EQ(f.alloc->usage(0).resident, 0u);
  EXPECT_EQ(checksum(blocks[0], 16 * f.page), sum);
  // Ranges are re-bound to the target node so purged pages refault there.
  int mode = 0, node = -1;
  ASSERT_EQ(system_os().policy_of(blocks[0], &mode, &node), 0);
  EXPECT_EQ(node, f.alloc->node_of(1));
  r = mover.move_now(1, 0, MoveKind::prefetch);
  EXPECT_GT(r.counters.bytes_to_fast, 0u);
  EXPECT_EQ(f.alloc->lookup(blocks[2])->tier, 0);
}

TEST(HostMover, UntouchedAndZeroPagesAreSkippedNotFailures) {
  Fixture f;
  auto blocks = f.group(2, 1, 32, /*touched=*/8);
  volatile char sink = blocks[0][20 * f.page];  // a read maps the zero page (-EFAULT on 6.12)
  (void)sink;
  // Where THP backs the block, the first touch populated all of it; count what the kernel says.
  // The group's range can be a page longer than the block (jemalloc offsets large blocks by a
  // random cache line).
  std::size_t untouched = 0, range_pages = 0;
  for (const PageRange& pr : f.alloc->group_ranges(2)) {
    for (int s : testing::page_nodes(reinterpret_cast<void*>(pr.begin), pr.bytes())) {
      untouched += s == -ENOENT;
      ++range_pages;
    }
  }
  HostMover mover(*f.alloc, {.worker = false});
  MoveResult r = mover.move_now(2, 1, MoveKind::evict);
  EXPECT_TRUE(r.complete) << r.counters.summary();
  EXPECT_EQ(r.counters.pages_absent, untouched);
  EXPECT_EQ(r.counters.pages_absent + r.counters.pages_zero + r.counters.pages_moved, range_pages);
  EXPECT_EQ(r.counters.pages_failed, 0u);
}

TEST(HostMover, BusyPagesAreRetriedThenReported) {
  Fixture f;
  auto blocks = f.group(3, 2, 8);
  f.os.fail_page(blocks[0] + 3 * f.page, -EBUSY, 2);  // busy twice, then fine
  HostMover mover(*f.alloc, {.max_retries = 5, .worker = false});
  MoveResult r = mover.move_now(3, 1, MoveKind::evict);
  EXPECT_TRUE(r.complete) << r.counters.summary();
  // A real kernel may add an EBUSY of its own (a just-migrated page not yet on an LRU list).
  EXPECT_GE(r.counters.pages_retried, 2u);
  EXPECT_EQ(f.alloc->lookup(blocks[0])->tier, 1);

  f.os.fail_page(blocks[1], -EBUSY, 100);  // busy for good
  r = mover.move_now(3, 0, MoveKind::prefetch);
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(r.counters.moves_partial, 1u);
  EXPECT_GE(r.counters.pages_retried, 5u);
  EXPECT_GE(r.counters.failures_by_errno.at(EBUSY), 1u);
  EXPECT_EQ(f.alloc->lookup(blocks[1])->tier, 1) << "a partial move leaves the charge where it was";
  EXPECT_EQ(mover.counters().moves_partial, 1u);
  EXPECT_NE(mover.counters().summary().find("EBUSY x"), std::string::npos) << mover.counters().summary();
}

TEST(HostMover, AccessFaultAndCallFailuresAreCountedByErrnoAndDataStays) {
  Fixture f;
  auto blocks = f.group(4, 3, 8);
  std::vector<std::uint64_t> sums;
  for (char* b : blocks) sums.push_back(checksum(b, 8 * f.page));
  f.os.fail_page(blocks[0] + f.page, -EACCES);
  f.os.fail_page(blocks[1] + 2 * f.page, -EFAULT);
  f.os.fail_page(blocks[2], -ENOMEM);
  HostMover mover(*f.alloc, {.worker = false});
  MoveResult r = mover.move_now(4, 1, MoveKind::evict);
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(r.counters.failures_by_errno.at(EACCES), 1u);
  EXPECT_EQ(r.counters.failures_by_errno.count(EFAULT), 0u) << "no data there: skipped, not failed";
  EXPECT_EQ(r.counters.pages_zero, 1u);
  EXPECT_EQ(r.counters.failures_by_errno.at(ENOMEM), 1u);
  EXPECT_EQ(r.counters.pages_failed, 2u);

  f.os.fail_next(OsCall::move_pages, ENOMEM, 1, /*moving_only=*/true);  // the whole call fails
  r = mover.move_now(4, 1, MoveKind::evict);
  EXPECT_FALSE(r.complete);
  EXPECT_GE(r.counters.failures_by_errno.at(ENOMEM), 3u * 8);

  f.os.fail_next(OsCall::move_pages, EBUSY, 1, true);  // a busy call is retried
  r = mover.move_now(4, 1, MoveKind::evict);
  EXPECT_TRUE(r.complete) << r.counters.summary();
  for (std::size_t i = 0; i < blocks.size(); ++i) EXPECT_EQ(checksum(blocks[i], 8 * f.page), sums[i]);
}

TEST(HostMover, MbindMethodMovesWholeRangesAndReportsEio) {
  Fixture f;
  auto blocks = f.group(5, 2, 8);
  HostMover mover(*f.alloc, {.method = MoverOptions::Method::mbind, .worker = false});
  MoveResult r = mover.move_now(5, 1, MoveKind::evict);
  EXPECT_TRUE(r.complete) << r.counters.summary();
  EXPECT_GE(r.counters.pages_moved, 16u);
  f.os.fail_next(OsCall::bind, EIO, 1, /*moving_only=*/true);
  r = mover.move_now(5, 0, MoveKind::prefetch);
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(r.counters.failures_by_errno.at(EIO), 1u);
  f.os.fail_next(OsCall::bind, EBUSY, 1, true);  // busy: retried page by page with move_pages
  r = mover.move_now(5, 0, MoveKind::prefetch);
  EXPECT_TRUE(r.complete) << r.counters.summary();
  EXPECT_GT(r.counters.pages_retried, 0u);
}

TEST(HostMover, EmptyGroupIsANoOp) {
  Fixture f;
  HostMover mover(*f.alloc, {.worker = false});
  MoveResult r = mover.move_now(77, 1, MoveKind::evict);
  EXPECT_EQ(r.counters.moves_empty, 1u);
  EXPECT_EQ(r.counters.pages_moved, 0u);
  EXPECT_THROW(mover.move_now(77, 9, MoveKind::evict), logic_error);
}

TEST(HostMover, HugePageStrideMovesEveryPage) {
  Fixture f;
  HostAllocatorOptions o;
  o.os = &f.os;
  o.huge_pages = true;
  HostArenaAllocator alloc(fast_and_far(), o);
  char* p = static_cast<char*>(alloc.allocate(8u << 20, TensorClass::persistent, 0, {0, 9}));
  std::memset(p, 3, 8u << 20);
  const auto sum = checksum(p, 8u << 20);
  HostMover mover(alloc, {.huge_page_stride = true, .worker = false});
  MoveResult r = mover.move_now(9, 1, MoveKind::evict);
  EXPECT_TRUE(r.complete) << r.counters.summary();
  EXPECT_EQ(r.counters.pages_moved, (8u << 20) / f.page);
  auto [on, off] = testing::pages_on(p, 8u << 20, alloc.node_of(1));
  EXPECT_EQ(off, 0u);
  EXPECT_EQ(on, (8u << 20) / f.page);
  EXPECT_EQ(checksum(p, 8u << 20), sum);
  alloc.deallocate(p);
}

TEST(HostMover, WorkerRunsQueuedMovesAndCountsLatePrefetches) {
  Fixture f;
  auto blocks = f.group(6, 2, 4);
  f.group(7, 1, 4);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> entered{0};
  f.os.on_move_pages([&] {
    if (entered.fetch_add(1) == 0) gate.wait();  // hold the first move mid-way
  });
  HostMover mover(*f.alloc);
  Move evict{.group = 6, .kind = MoveKind::evict, .from = 0, .to = 1};
  Move prefetch{.group = 7, .kind = MoveKind::prefetch, .from = 1, .to = 0, .issue_after = 2, .needed_by = 5};
  mover.submit(evict);
  mover.submit(prefetch);
  while (entered.load() == 0) std::this_thread::yield();
  EXPECT_TRUE(mover.in_flight(6));
  EXPECT_TRUE(mover.in_flight(7));
  mover.reached(4);
  EXPECT_EQ(mover.counters().moves_late, 0u) << "not needed yet";
  mover.reached(5);
  mover.reached(6);
  EXPECT_EQ(mover.counters().moves_late, 1u) << "late once, however many ops begin";
  release.set_value();
  mover.wait_idle();
  EXPECT_FALSE(mover.in_flight(6));
  MoveCounters c = mover.take_counters();
  EXPECT_EQ(c.moves_submitted, 2u);
  EXPECT_EQ(c.moves_complete, 2u);
  EXPECT_EQ(mover.counters().moves_complete, 0u) << "take_counters resets";
  EXPECT_EQ(f.alloc->lookup(blocks[0])->tier, 1);
}

// Note [Prefetches respect the budget]: a prefetch never lifts the fast tier above its budget.
TEST(HostMover, PrefetchWithoutRoomStaysOnTheSlowTierAndLosesNothing) {
  Fixture f;
  auto a = f.group(20, 1, 8);
  auto b = f.group(21, 1, 8);
  const auto sum_b = checksum(b[0], 8 * f.page);
  HostMover mover(*f.alloc, {.worker = false});
  ASSERT_TRUE(mover.move_now(21, 1, MoveKind::evict).complete);
  f.alloc->set_budget(0, 8 * f.page);  // room for one group
  mover.submit({.group = 21, .kind = MoveKind::prefetch, .from = 1, .to = 0});
  EXPECT_EQ(f.alloc->lookup(b[0])->tier, 1) << "no room: the group stays where it is";
  EXPECT_EQ(mover.counters().moves_over_budget, 1u);
  EXPECT_LE(f.alloc->usage(0).resident, 8 * f.page);
  EXPECT_EQ(checksum(b[0], 8 * f.page), sum_b);
  // Once an eviction makes room, the same prefetch is done.
  mover.submit({.group = 20, .kind = MoveKind::evict, .from = 0, .to = 1});
  mover.submit({.group = 21, .kind = MoveKind::prefetch, .from = 1, .to = 0});
  EXPECT_EQ(f.alloc->lookup(b[0])->tier, 0);
  EXPECT_EQ(f.alloc->lookup(a[0])->tier, 1);
  EXPECT_EQ(mover.counters().moves_over_budget, 1u);
  EXPECT_EQ(checksum(b[0], 8 * f.page), sum_b);
}

// The room a prefetch needs is reserved when it starts: an allocation made while its pages move finds
// the fast tier full (the caller then places it on the slow tier) instead of lifting the tier over its
// budget once the group lands.
TEST(HostMover, AnAllocationWhileAPrefetchMovesFindsItsRoomTaken) {
  Fixture f;
  auto g = f.group(40, 1, 8);
  const auto sum = checksum(g[0], 8 * f.page);
  HostMover mover(*f.alloc, {.worker = false});
  ASSERT_TRUE(mover.move_now(40, 1, MoveKind::evict).complete);
  const std::uint64_t budget = f.alloc->usage(0).resident + f.alloc->group_bytes(40);
  f.alloc->set_budget(0, budget);  // room for the group and nothing else
  f.alloc->reset_peak(0);
  bool tried = false, refused = false;
  f.os.on_move_pages([&] {
    if (tried) return;
    tried = true;
    try {
      f.alloc->deallocate(f.alloc->allocate(4 * f.page, TensorClass::activation, 0));
    } catch (const out_of_memory&) {
      refused = true;
    }
  });
  mover.submit({.group = 40, .kind = MoveKind::prefetch, .from = 1, .to = 0});
  f.os.on_move_pages(nullptr);
  ASSERT_TRUE(tried) << "the prefetch should have called move_pages";
  EXPECT_TRUE(refused) << "the group's room was free to take while it moved";
  EXPECT_EQ(f.alloc->lookup(g[0])->tier, 0);
  EXPECT_EQ(f.alloc->usage(0).resident, budget) << "the reservation became the group's charge, once";
  EXPECT_LE(f.alloc->usage(0).peak, budget);
  EXPECT_EQ(checksum(g[0], 8 * f.page), sum);
  // Evicted again, the group's charge leaves the fast tier entirely (nothing of the reservation stays).
  ASSERT_TRUE(mover.move_now(40, 1, MoveKind::evict).complete);
  EXPECT_EQ(f.alloc->usage(0).resident, budget - f.alloc->group_bytes(40));
}

// A block that joins a group while the group's pages move (the plan puts a new tensor into it) was
// not moved: it must stay charged to the tier its pages are on. Charging it to the target tier took
// the fast tier over its budget by the size of such blocks (the two-rank DDP example at 50%).
TEST(HostMover, ABlockThatJoinsAGroupWhileItMovesStaysWhereItWasAllocated) {
  Fixture f;
  auto g = f.group(41, 1, 8);
  HostMover mover(*f.alloc, {.worker = false});
  ASSERT_TRUE(mover.move_now(41, 1, MoveKind::evict).complete);
  const std::uint64_t budget = f.alloc->usage(0).resident + f.alloc->group_bytes(41);
  f.alloc->set_budget(0, budget);  // room for the group as it is when the prefetch starts
  f.alloc->reset_peak(0);
  char* late = nullptr;
  f.os.on_move_pages([&] {
    if (late) return;
    late = static_cast<char*>(f.alloc->allocate(4 * f.page, TensorClass::activation, 1, {7, 41}));  // on the slow tier
    std::memset(late, 0x33, 4 * f.page);
  });
  mover.submit({.group = 41, .kind = MoveKind::prefetch, .from = 1, .to = 0});
  f.os.on_move_pages(nullptr);
  ASSERT_NE(late, nullptr) << "the prefetch should have called move_pages";
  EXPECT_EQ(f.alloc->lookup(g[0])->tier, 0) << "the group's moved blocks are on the fast tier";
  EXPECT_EQ(f.alloc->lookup(late)->tier, 1) << "the block that joined during the move was not moved";
  EXPECT_EQ(f.alloc->usage(0).resident, budget);
  EXPECT_LE(f.alloc->usage(0).peak, budget) << "the fast tier went over its budget";
  f.alloc->deallocate(late);
}

TEST(HostMover, PrefetchQueuedBeforeItsEvictionWaitsForIt) {
  Fixture f;
  auto a = f.group(30, 1, 8);
  auto b = f.group(31, 1, 8);
  f.group(32, 1, 4);
  {
    HostMover sync(*f.alloc, {.worker = false});
    ASSERT_TRUE(sync.move_now(31, 1, MoveKind::evict).complete);
    ASSERT_TRUE(sync.move_now(32, 1, MoveKind::evict).complete);
  }
  f.alloc->set_budget(0, 8 * f.page);  // group 30 fills it
  f.alloc->reset_peak(0);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> entered{0};
  f.os.on_move_pages([&] {
    if (entered.fetch_add(1) == 0) gate.wait();  // hold the first move so the next two queue up
  });
  HostMover mover(*f.alloc);
  mover.submit({.group = 32, .kind = MoveKind::prefetch, .from = 1, .to = 1});  // held: an unrelated move
  while (entered.load() == 0) std::this_thread::yield();
  // The plan's order, but the eviction arrives after the prefetch (a late eviction).
  mover.submit({.group = 31, .kind = MoveKind::prefetch, .from = 1, .to = 0});
  mover.submit({.group = 30, .kind = MoveKind::evict, .from = 0, .to = 1});
  release.set_value();
  mover.wait_idle();
  EXPECT_EQ(f.alloc->lookup(b[0])->tier, 0) << "the prefetch went behind the eviction, then ran";
  EXPECT_EQ(f.alloc->lookup(a[0])->tier, 1);
  EXPECT_EQ(mover.counters().moves_over_budget, 0u);
  EXPECT_LE(f.alloc->usage(0).peak, 8 * f.page) << "the fast tier never went above its budget";
}

TEST(HostMover, ShutdownWithMovesInFlightDropsTheQueueAndLosesNothing) {
  Fixture f;
  std::vector<std::vector<char*>> groups;
  for (GroupId g = 0; g < 8; ++g) groups.push_back(f.group(g, 2, 8));
  std::vector<std::uint64_t> sums;
  for (auto& g : groups) {
    for (char* b : g) sums.push_back(checksum(b, 8 * f.page));
  }
  {
    HostMover mover(*f.alloc);
    for (int round = 0; round < 20; ++round) {
      for (GroupId g = 0; g < 8; ++g) {
        mover.submit(Move{.group = g, .kind = MoveKind::evict, .to = static_cast<TierId>((round + g) % 2)});
      }
    }
  }  // destroyed with most moves still queued
  std::size_t i = 0;
  for (auto& g : groups) {
    for (char* b : g) EXPECT_EQ(checksum(b, 8 * f.page), sums[i++]);
  }
}


// The schedule executor driving the host mover through the Mover interface on op events, as the host
// runtime does: moves issued at their own op's end and only there, late prefetches counted, never waited
// for; and which mover serves which pair of tier kinds (mover_for).

TierId tier_of(Fixture& f, void* p) { return f.alloc->lookup(p)->tier; }
Move evict(GroupId g, OpIndex after) {
  return {.group = g, .kind = MoveKind::evict, .from = 0, .to = 1, .issue_after = after};
}
Move prefetch(GroupId g, OpIndex after, OpIndex needed) {
  return {.group = g, .kind = MoveKind::prefetch, .from = 1, .to = 0, .issue_after = after, .needed_by = needed};
}

// Ops nest (op 1 runs inside op 0): each op's moves go when that op ends, not when a later-begun op does.
TEST(HostSchedule, OpEventsIssueEachMoveAtItsOwnOpsEnd) {
  Fixture f;
  void* before = f.group(1, 1, 4)[0];
  void* outer = f.group(2, 1, 4)[0];
  void* inner = f.group(3, 1, 4)[0];
  void* back = f.group(4, 1, 4)[0];
  HostMover mover(*f.alloc, MoverOptions{.worker = false});  // moves run inside submit: their order shows
  mover.move_now(4, 1, MoveKind::evict);
  mover.take_counters();
  ScheduleExecutor ex(mover, {evict(1, kBeforeIteration), evict(2, 0), evict(3, 1), prefetch(4, 1, 3)});
  ex.begin_op_iteration();
  EXPECT_EQ(tier_of(f, before), 1);
  EXPECT_EQ(tier_of(f, outer), 0);
  ex.op_begin(0);
  ex.op_begin(1);
  EXPECT_EQ(tier_of(f, inner), 0) << "op 1 has not ended";
  ex.op_end(1);
  EXPECT_EQ(tier_of(f, inner), 1);
  EXPECT_EQ(tier_of(f, back), 0);
  EXPECT_EQ(tier_of(f, outer), 0) << "op 0 (the outer op) has not ended";
  ex.op_end(0);
  EXPECT_EQ(tier_of(f, outer), 1);
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
  f.group(6, 1, 4);
  f.group(7, 1, 4);
  f.group(8, 1, 4);
  std::mutex held;
  std::unique_lock hold(held);  // the first move waits mid-way until this is let go
  std::atomic<bool> entered{false};
  f.os.on_move_pages([&] {
    if (!entered.exchange(true)) {
      std::lock_guard wait(held);
    }
  });
  HostMover mover(*f.alloc);
  ScheduleExecutor ex(mover, {evict(6, kBeforeIteration), prefetch(7, kBeforeIteration, 2), prefetch(8, 3, 4)});
  ex.begin_op_iteration();
  while (!entered.load()) std::this_thread::yield();
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
  hold.unlock();
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

// HostRuntime: class routing by sequence position, divergence, budget fallback, op-driven moves,
// one-node behaviour.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "runtime/host/host_runtime.hpp"
#include "tests/migrate/host/host_test_util.hpp"

namespace tierpack::host {
namespace {

/// Groups: 0 persistent home fast, 1 activation home fast (evicted after op 1, prefetched after
/// op 3 for op 5), 2 temporary home slow.
Plan small_plan(const Topology& topo) {
  Plan p;
  p.topology = topo;
  p.fast_tier = 0;
  p.slow_tier = 1;
  auto group = [&](GroupId id, TensorClass c, TierId home) {
    PageGroup g;
    g.id = id;
    g.cls = c;
    g.home = home;
    p.groups.push_back(g);
  };
  group(0, TensorClass::persistent, 0);
  group(1, TensorClass::activation, 0);
  group(2, TensorClass::temporary, 1);
  auto place = [&](std::int64_t seq, std::uint64_t bytes, TensorClass c, GroupId g) {
    TensorPlacement t;
    t.tensor = static_cast<TensorId>(p.placements.size());
    t.seq = seq;
    t.bytes = bytes;
    t.cls = c;
    t.group = g;
    p.placements.push_back(t);
  };
  place(0, 1000, TensorClass::activation, 1);
  place(1, 64 << 10, TensorClass::activation, 1);
  place(2, 300, TensorClass::temporary, 2);
  p.schedule.push_back(Move{.group = 1, .kind = MoveKind::evict, .from = 0, .to = 1, .issue_after = 1});
  p.schedule.push_back(Move{.group = 1, .kind = MoveKind::prefetch, .from = 1, .to = 0, .issue_after = 3, .needed_by = 5});
  return p;
}

HostRuntimeOptions sync_mover() {
  HostRuntimeOptions o;
  o.mover.worker = false;  // deterministic tests: moves run at submit
  return o;
}

TEST(HostRuntime, WithoutAPlanEverythingGoesToTheDefaultClassOnTheFastTier) {
  HostRuntime rt(Config{}, testing::fast_and_far());
  EXPECT_FALSE(rt.has_plan());
  EXPECT_EQ(rt.fast_tier(), 0);
  EXPECT_EQ(rt.slow_tier(), std::optional<TierId>(1));
  rt.begin_iteration();
  void* p = rt.allocate(4096);
  auto info = rt.allocator().lookup(p);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->cls, TensorClass::iteration);
  EXPECT_EQ(info->tier, 0);
  EXPECT_EQ(info->seq, 0);
  EXPECT_EQ(info->group, kNoGroup);
  rt.deallocate(p);
  rt.end_iteration();
  EXPECT_EQ(rt.last_iteration().unplanned, 1u);
  EXPECT_TRUE(rt.take_execution_log().moves.empty()) << "no plan, no executor";
  EXPECT_NE(rt.plan_summary().find("no plan"), std::string::npos) << rt.plan_summary();
}

TEST(HostRuntime, RoutesBySequencePositionAndMovesAtOpBoundaries) {
  const Topology topo = testing::fast_and_far();
  HostRuntime rt(Config{}, topo, sync_mover());
  rt.set_plan(small_plan(topo));
  EXPECT_NE(rt.plan_summary().find("3 groups, 2 moves"), std::string::npos) << rt.plan_summary();
  for (int it = 0; it < 3; ++it) {
    rt.begin_iteration();
    char* a = static_cast<char*>(rt.allocate(1000));
    char* b = static_cast<char*>(rt.allocate(64 << 10));
    char* c = static_cast<char*>(rt.allocate(300));
    char* d = static_cast<char*>(rt.allocate(77));  // beyond the plan
    std::memset(b, 9, 64 << 10);
    EXPECT_EQ(rt.allocator().lookup(a)->group, 1u);
    EXPECT_EQ(rt.allocator().lookup(b)->cls, TensorClass::activation);
    EXPECT_EQ(rt.allocator().lookup(c)->tier, 1) << "group 2 lives on the slow tier";
    EXPECT_EQ(rt.allocator().lookup(c)->cls, TensorClass::temporary);
    EXPECT_EQ(rt.allocator().lookup(d)->group, kNoGroup);
    for (OpIndex op = 0; op < 7; ++op) {
      rt.on_op_begin(op);
      if (op == 2) {
        EXPECT_EQ(rt.allocator().lookup(b)->tier, 1) << "evicted after op 1";
      }
      if (op == 5) {
        EXPECT_EQ(rt.allocator().lookup(b)->tier, 0) << "back before op 5";
      }
      rt.on_op_end(op);
    }
    for (int i = 0; i < (64 << 10); ++i) ASSERT_EQ(b[i], 9);
    EXPECT_EQ(rt.execution_log_so_far().moves.size(), 2u) << "looked at, not taken";
    for (void* p : {a, b, c, d}) rt.deallocate(p);
    rt.end_iteration();
    const IterationStats s = rt.last_iteration();
    EXPECT_EQ(s.iteration, it);
    EXPECT_EQ(s.planned, 3u);
    EXPECT_EQ(s.unplanned, 1u);
    EXPECT_TRUE(s.divergence.empty());
    EXPECT_EQ(s.moves.moves_complete, 2u) << s.moves.summary();
    EXPECT_EQ(s.moves.moves_late, 0u);
    EXPECT_GT(s.moves.bytes_to_slow, 0u);
    EXPECT_GT(s.moves.bytes_to_fast, 0u);
    // The executor's log of the iteration (what `tierpack run` writes as the statistics' moves).
    const ExecutionLog log = rt.take_execution_log();
    ASSERT_EQ(log.moves.size(), 2u);
    EXPECT_EQ(log.moves[0].move.kind, MoveKind::evict);
    EXPECT_EQ(log.moves[1].move.kind, MoveKind::prefetch);
    for (const ExecutedMove& m : log.moves) {
      EXPECT_EQ(m.move.group, 1u);
      EXPECT_TRUE(m.done) << "the synchronous mover is done at submit";
      EXPECT_LE(m.start_ns, m.end_ns);
    }
    EXPECT_LE(log.moves[0].start_ns, log.moves[1].start_ns);
    EXPECT_TRUE(rt.take_execution_log().moves.empty()) << "taking the log clears it";
  }
}

TEST(HostRuntime, ADivergentIterationFallsBackAndSaysWhyThenThePlanIsTurnedOff) {
  const Topology topo = testing::fast_and_far();
  HostRuntime rt(Config{}, topo, sync_mover());
  rt.set_plan(small_plan(topo));
  const int limit = sync_mover().phases.divergence_limit;
  for (int it = 0; it < limit; ++it) {
    rt.begin_iteration();
    void* a = rt.allocate(1000);
    void* b = rt.allocate(12345);  // the plan expected 64 KiB
    void* c = rt.allocate(300);
    EXPECT_EQ(rt.allocator().lookup(b)->group, kNoGroup);
    EXPECT_EQ(rt.allocator().lookup(c)->tier, 0) << "after divergence: default placement";
    rt.on_op_end(1);  // the eviction is not issued any more
    for (void* p : {a, b, c}) rt.deallocate(p);
    rt.end_iteration();
    const IterationStats s = rt.last_iteration();
    EXPECT_EQ(s.mismatched, 1u);
    EXPECT_NE(s.divergence.find("allocation 1 is 12345 bytes, the plan expected 65536"), std::string::npos)
        << s.divergence;
    EXPECT_EQ(s.moves.moves_submitted, 0u);
    EXPECT_TRUE(rt.take_execution_log().moves.empty());
    // What `tierpack run` reports (issue 26): in force at the start, not followed, turned off after the
    // limit's diverged iteration in a row.
    EXPECT_TRUE(s.had_plan);
    EXPECT_FALSE(s.followed());
    EXPECT_EQ(s.turned_off, it == limit - 1);
  }
  EXPECT_FALSE(rt.has_plan());
  EXPECT_NE(rt.last_iteration().divergence.find("plan turned off"), std::string::npos);
  rt.begin_iteration();
  rt.end_iteration();
  EXPECT_FALSE(rt.last_iteration().had_plan) << "the iteration after the plan was turned off has none";
  EXPECT_FALSE(rt.last_iteration().followed());
  EXPECT_FALSE(rt.last_iteration().turned_off);
}

TEST(HostRuntime, FastBudgetOverflowGoesToTheSlowTier) {
  Config cfg;
  cfg.fast_budget.bytes = 1u << 20;
  HostRuntime rt(cfg, testing::fast_and_far());
  rt.begin_iteration();
  std::vector<void*> blocks;
  for (int i = 0; i < 6; ++i) blocks.push_back(rt.allocate(256u << 10));
  EXPECT_LE(rt.allocator().usage(0).resident, 1u << 20);
  EXPECT_EQ(rt.allocator().lookup(blocks.back())->tier, 1);
  rt.end_iteration();
  EXPECT_EQ(rt.last_iteration().fallbacks, 2u);
  EXPECT_LE(rt.last_iteration().fast_peak, 1u << 20);
  for (void* p : blocks) rt.deallocate(p);
}

TEST(HostRuntime, PersistentBlocksAreFoundByAddressAndBroughtHome) {
  const Topology topo = testing::fast_and_far();
  HostRuntime rt(Config{}, topo, sync_mover());
  rt.begin_iteration();
  char* param = static_cast<char*>(rt.allocate(32 << 10));
  std::memset(param, 4, 32 << 10);
  rt.end_iteration();
  Plan p = small_plan(topo);
  p.groups[0].home = 1;  // parameters live on the slow tier in this plan
  TensorPlacement t;
  t.tensor = 99;
  t.seq = -1;
  t.address = reinterpret_cast<std::uintptr_t>(param);
  t.bytes = 32 << 10;
  t.cls = TensorClass::persistent;
  t.group = 0;
  p.placements.push_back(t);
  rt.set_plan(p);
  auto info = rt.allocator().lookup(param);
  EXPECT_EQ(info->group, 0u);
  EXPECT_EQ(info->tier, 1);
  for (int i = 0; i < (32 << 10); ++i) ASSERT_EQ(param[i], 4);
  rt.deallocate(param);
}

TEST(HostRuntime, RejectsPlansForTiersThisMachineLacks) {
  const Topology topo = testing::fast_and_far();
  HostRuntime rt(Config{}, topo);
  Plan p = small_plan(topo);
  Tier gpu;
  gpu.kind = TierKind::gpu;
  gpu.name = "gpu0";
  p.topology.add(gpu);
  p.groups[2].home = 2;
  EXPECT_THROW(rt.set_plan(p), logic_error);
  EXPECT_FALSE(rt.has_plan());
}

TEST(HostRuntime, OneNodeEmptyPlanMovesNothing) {
  Topology one;
  Tier t;
  t.name = "dram0";
  t.numa_node = 0;
  one.add(t);
  HostRuntime rt(Config{}, one);
  EXPECT_FALSE(rt.slow_tier());
  Plan p;
  p.topology = one;
  rt.set_plan(p);
  EXPECT_NE(rt.plan_summary().find("nothing to move"), std::string::npos) << rt.plan_summary();
  rt.begin_iteration();
  void* a = rt.allocate(100);
  rt.on_op_end(0);
  rt.deallocate(a);
  rt.end_iteration();
  EXPECT_EQ(rt.last_iteration().moves.moves_submitted, 0u);
}

}  // namespace
}  // namespace tierpack::host

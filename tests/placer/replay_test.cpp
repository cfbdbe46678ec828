// The simulator: copy timing on the link, stalls when copies are late, hard budgets, baselines.
#include <gtest/gtest.h>

#include "placer/baselines.hpp"
#include "placer/compare.hpp"
#include "placer/copy_engine.hpp"
#include "placer/planner.hpp"
#include "placer/replay.hpp"
#include "placer/timeline.hpp"
#include "placer/cost_model.hpp"
#include "core/error.hpp"
#include "tests/placer/hand_profile.hpp"
#include "tests/support/synthetic_profile.hpp"

using namespace tierpack;
using namespace tierpack::placer;
using tierpack::test::HandProfile;
using tierpack::test::host_model;

namespace {

constexpr std::uint64_t MiB = 1ull << 20;

Profile one_activation() {
  HandProfile h(10);
  h.tensor(8 * MiB, 0, 9, {0, 9}, kTensorSavedForBackward);
  for (int i = 2; i <= 7; ++i) h.tensor(8 * MiB, i, i, {i});
  return h.done();
}

PlanOptions host_budget(std::uint64_t bytes) {
  PlanOptions o;
  o.device = -1;
  o.fast_budget.bytes = bytes;
  return o;
}

// A 300-tensor synthetic GPU profile, planned at half its peak on GPU 0.
Profile gpu_profile() {
  synth::SyntheticOptions so;
  so.tensors = 300;
  return synth::make_synthetic_profile(so);
}

PlanOptions gpu_half_budget() {
  PlanOptions o;
  o.device = 0;
  o.fast_budget.fraction = 0.5;
  return o;
}

}  // namespace

TEST(CopyEngine, SharesAFullDuplexLinkAndSerialisesAHalfDuplexOne) {
  CostModel c;
  c.to_fast_bytes_per_ns = c.to_slow_bytes_per_ns = 55;
  c.both_ways_bytes_per_ns = 100;
  c.full_duplex = true;
  c.move_overhead_ns = 0;
  std::vector<double> done(2, -1);
  CopyEngine::Hooks hooks{[](std::size_t) { return true; }, [](std::size_t, double) {},
                          [&](std::size_t j, double t) { done[j] = t; }};
  {
    CopyEngine e(c, hooks);
    e.submit(0, true, 1'000'000);
    e.submit(1, false, 1'000'000);
    e.advance_to(CopyEngine::kNever);
    EXPECT_NEAR(done[0], 1e6 / 50, 1e-6);  // both ways at once: 100 GB/s shared
    EXPECT_NEAR(done[1], 1e6 / 50, 1e-6);
  }
  c.full_duplex = false;
  {
    CopyEngine e(c, hooks);
    e.submit(0, true, 1'000'000);
    e.submit(1, false, 1'000'000);
    e.advance_to(CopyEngine::kNever);
    EXPECT_NEAR(done[0], 1e6 / 55, 1e-6);
    EXPECT_NEAR(done[1], 2e6 / 55, 1e-6);
  }
  // A copy to the fast tier waits for memory; an eviction behind it on a shared queue goes first.
  bool room = false;
  CopyEngine::Hooks gated{[&](std::size_t) { return room; }, [](std::size_t, double) {},
                          [&](std::size_t j, double t) { done[j] = t; if (j == 1) room = true; }};
  CopyEngine e(c, gated);
  e.submit(0, true, 1'000'000);
  e.submit(1, false, 1'000'000);
  e.advance_to(CopyEngine::kNever);
  EXPECT_NEAR(done[1], 1e6 / 55, 1e-6);
  EXPECT_NEAR(done[0], 2e6 / 55, 1e-6);
}

TEST(Replay, AnEmptyPlanTakesTheProfiledTime) {
  const Profile p = one_activation();
  const Plan plan = make_plan(p, host_model(), host_budget(64 * MiB));
  const ReplayResult r = replay_plan(p, plan, host_model());
  EXPECT_DOUBLE_EQ(r.step_ns, 10e6);
  EXPECT_DOUBLE_EQ(r.stall_ns, 0);
  EXPECT_EQ(r.bytes_to_fast + r.bytes_to_slow, 0u);
  EXPECT_EQ(r.fast_peak_bytes, 16 * MiB);
  ASSERT_EQ(r.occupancy.size(), 10u);
  EXPECT_EQ(r.occupancy[3].fast_bytes, 16 * MiB);
}

TEST(Replay, ASlowerLinkThanPlannedStallsButKeepsTheBudget) {
  const Profile p = one_activation();
  const Plan plan = make_plan(p, host_model(10), host_budget(8 * MiB));
  ASSERT_EQ(plan.schedule.size(), 2u);
  const ReplayResult planned = replay_plan(p, plan, host_model(10));
  EXPECT_DOUBLE_EQ(planned.stall_ns, 0);
  // On a 2 GB/s link the eviction takes 4.2 ms: op 2 waits for the memory, op 9 for the prefetch.
  const ReplayResult slow = replay_plan(p, plan, host_model(2));
  EXPECT_GT(slow.stall_ns, 3e6);
  EXPECT_NEAR(slow.step_ns, 10e6 + slow.stall_ns, 1);
  EXPECT_LE(slow.fast_peak_bytes, 8 * MiB);
  EXPECT_EQ(slow.budget_overruns, 0u);
  EXPECT_EQ(slow.bytes_to_fast, 8 * MiB);
  EXPECT_GT(slow.moves[1].late_ns, 0);
}

TEST(Replay, BaselinesOnTheSameProfile) {
  const Profile p = one_activation();
  const BaselineSetup s = make_baseline_setup(host_model(), -1, 8 * MiB);
  const ReplayResult all = replay_all_fast(p, s);
  EXPECT_FALSE(all.fits);
  EXPECT_TRUE(replay_all_fast(p, make_baseline_setup(host_model(), -1, 16 * MiB)).fits);
  EXPECT_DOUBLE_EQ(all.step_ns, 10e6);

  // First touch: the activation takes the fast tier, every temporary lands on the slow one.
  const ReplayResult ft = replay_first_touch(p, s);
  EXPECT_EQ(ft.bytes_to_fast + ft.bytes_to_slow, 0u);
  EXPECT_EQ(ft.fast_peak_bytes, 8 * MiB);
  EXPECT_GE(ft.step_ns, all.step_ns);

  const ReplayResult il = replay_interleave(p, s);
  EXPECT_LE(il.fast_peak_bytes, 8 * MiB);

  // LRU: each temporary evicts the activation (or the previous temporary) on demand, and the
  // activation faults back in at op 9.
  const ReplayResult lru = replay_lru(p, s);
  EXPECT_GT(lru.bytes_to_fast, 0u);
  EXPECT_GT(lru.stall_ns, 0);
  EXPECT_LE(lru.fast_peak_bytes, 8 * MiB);
}

TEST(Replay, ComparisonHasEveryPolicy) {
  const Profile p = gpu_profile();
  const PlanOptions o = gpu_half_budget();
  const Comparison c = compare_policies(p, tier_preset("h200-pcie"), o);
  ASSERT_EQ(c.rows.size(), 6u);
  EXPECT_EQ(c.rows[0].policy, "all-fast");
  EXPECT_FALSE(c.rows[0].fits);
  EXPECT_EQ(c.rows[5].policy, "tierpack (page-aware)");
  for (const auto& r : c.rows) {
    EXPECT_GE(r.step_ns, c.reference_step_ns * 0.999) << r.policy;
    if (r.policy != "all-fast") {
      EXPECT_LE(r.fast_peak_bytes, c.budget_bytes) << r.policy;
    }
  }
  EXPECT_EQ(c.rows[5].mixed_class_pages, 0u);
  const std::string table = format_comparison(c);
  EXPECT_NE(table.find("first-touch"), std::string::npos);
  EXPECT_NE(table.find("does not fit"), std::string::npos);
}

// The GPU tier's remaps hold the compute streams (Note [Remap gate]): the simulator charges the
// measured per-GiB hold for every GPU move, less whatever an op stalled anyway; host moves hold nothing.
TEST(Replay, GpuMovesHoldComputeBehindRemapGatesHostMovesDoNot) {
  const Profile p = gpu_profile();
  const PlanOptions o = gpu_half_budget();
  const TierModel model = tier_preset("h200-pcie");
  const Plan plan = make_plan(p, model, o);
  const ReplayResult r = replay_plan(p, plan, model);
  ASSERT_GT(r.bytes_to_slow + r.bytes_to_fast, 0u);
  const CostModel c = make_cost_model(model, choose_tiers(model, 0), 0);
  const double full = c.remap_hold_ns(r.bytes_to_fast, true) + c.remap_hold_ns(r.bytes_to_slow, false);
  EXPECT_GT(c.remap_hold_ns_per_byte_to_fast, 0);
  EXPECT_GT(r.remap_hold_ns, 0);
  EXPECT_LE(r.remap_hold_ns, full * (1 + 1e-9));
  EXPECT_GE(r.step_ns, Timeline(p).iteration_ns() + r.remap_hold_ns + r.stall_ns - 1);

  const Profile h = one_activation();
  const ReplayResult host = replay_plan(h, make_plan(h, host_model(), host_budget(8 * MiB)), host_model());
  EXPECT_GT(host.bytes_to_slow, 0u);
  EXPECT_EQ(host.remap_hold_ns, 0);
}

// Note [Launch times] in placer/cost_model.cpp: a GPU op's profiled time is its launch, so an op
// shorter than its tensors' bytes allow still reads all of them; on a host tier it read only part.
TEST(CostModel, AGpuOpReadsEveryByteItTouchesInPlaceWhateverItsProfiledTime) {
  const TierModel gpu_model = tier_preset("h200-pcie");
  const CostModel gpu = make_cost_model(gpu_model, choose_tiers(gpu_model, 0), 0);
  EXPECT_FALSE(gpu.op_times_bound_traffic);
  const std::uint64_t slow = 1ull << 30, fast = 4ull << 30;
  const double launch_ns = 20e3;  // far below 5 GiB at HBM speed (~1.2 ms)
  const double link_ns = static_cast<double>(slow) / gpu.slow_access_bytes_per_ns;
  EXPECT_GE(gpu.op_ns(launch_ns, fast, slow, 1), link_ns);
  EXPECT_DOUBLE_EQ(gpu.op_ns(launch_ns, fast, 0, 0), launch_ns);  // nothing in place: as profiled

  const CostModel host = make_cost_model(host_model(), choose_tiers(host_model(), -1), -1);
  EXPECT_TRUE(host.op_times_bound_traffic);
  const double all_fast_ns = static_cast<double>(fast + slow) / host.fast_access_bytes_per_ns;
  const double part_ns = all_fast_ns / 100;  // touched a hundredth of its tensors
  const double host_slow_ns = static_cast<double>(slow) / host.slow_access_bytes_per_ns;
  EXPECT_LT(host.op_ns(part_ns, fast, slow, 1), host_slow_ns / 10);
  EXPECT_GE(host.op_ns(part_ns, fast, slow, 1), part_ns);
}

TEST(Timeline, WithIterationTimeScalesEveryTimeAndKeepsTheOrder) {
  const Profile p = one_activation();
  const Profile q = with_iteration_time(p, 2.5e6);  // 10 ms -> 2.5 ms
  EXPECT_EQ(q.iteration_ns, 2'500'000u);
  ASSERT_EQ(q.ops.size(), p.ops.size());
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    EXPECT_EQ(q.ops[i].begin_ns, p.ops[i].begin_ns / 4);
    EXPECT_EQ(q.ops[i].end_ns, p.ops[i].end_ns / 4);
  }
  EXPECT_DOUBLE_EQ(replay_all_fast(q, make_baseline_setup(host_model(), -1, 64 * MiB)).step_ns, 2.5e6);
  EXPECT_THROW(with_iteration_time(p, 0), logic_error);
  Profile none = p;
  none.iteration_ns = 0;
  EXPECT_THROW(with_iteration_time(none, 1e6), logic_error);
}

// The planner on hand-made profiles whose best plan is known.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "placer/plan_check.hpp"
#include "placer/planner.hpp"
#include "placer/replay.hpp"
#include "tests/placer/hand_profile.hpp"

using namespace tierpack;
using namespace tierpack::placer;
using tierpack::test::HandProfile;
using tierpack::test::host_model;

namespace {

constexpr std::uint64_t MiB = 1ull << 20;

PlanOptions host_budget(std::uint64_t bytes) {
  PlanOptions o;
  o.device = -1;
  o.fast_budget.bytes = bytes;
  return o;
}

GroupId group_of(const Plan& plan, TensorId t) {
  for (const auto& p : plan.placements)
    if (p.tensor == t) return p.group;
  ADD_FAILURE() << "tensor " << t << " not placed";
  return 0;
}

std::vector<Move> moves_of(const Plan& plan, GroupId g) {
  std::vector<Move> out;
  for (const auto& m : plan.schedule)
    if (m.group == g) out.push_back(m);
  return out;
}

// An activation used at op 0 and op 9 and 8 MiB temporaries at ops 2..7: with room for one 8 MiB
// group, the activation must leave after op 0 and come back before op 9, nothing else moves.
Profile one_activation() {
  HandProfile h(10);
  h.tensor(8 * MiB, 0, 9, {0, 9}, kTensorSavedForBackward);
  for (int i = 2; i <= 7; ++i) h.tensor(8 * MiB, i, i, {i});
  return h.done();
}

}  // namespace

TEST(Planner, EverythingFitsGivesAnEmptyPlan) {
  const Profile p = one_activation();
  const Plan plan = make_plan(p, host_model(), host_budget(64 * MiB));
  EXPECT_TRUE(plan.empty());
  for (const auto& g : plan.groups) EXPECT_EQ(g.home, plan.fast_tier);
  EXPECT_EQ(plan.prediction.fast_peak_bytes, 16 * MiB);
  EXPECT_DOUBLE_EQ(plan.prediction.step_ns, plan.prediction.baseline_step_ns);
  EXPECT_DOUBLE_EQ(plan.prediction.stall_ns, 0);
  ASSERT_FALSE(plan.notes.empty());
  EXPECT_NE(plan.notes.front().find("nothing moves"), std::string::npos);
  // Without a budget the fast tier's capacity is the budget.
  PlanOptions unlimited;
  unlimited.device = -1;
  EXPECT_TRUE(make_plan(p, host_model(), unlimited).empty());
}

TEST(Planner, EvictsAnActivationAcrossItsGapAndBringsItBack) {
  const Profile p = one_activation();
  const Plan plan = make_plan(p, host_model(), host_budget(8 * MiB));
  ASSERT_TRUE(check_plan(p, plan).ok()) << check_plan(p, plan).problems.front();
  const GroupId a = group_of(plan, 0);
  ASSERT_EQ(plan.schedule.size(), 2u);
  const auto m = moves_of(plan, a);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].kind, MoveKind::evict);
  EXPECT_EQ(m[0].issue_after, 0);
  EXPECT_EQ(m[0].needed_by, 2);  // 8 MiB at 10 GB/s takes 0.85 ms: done before op 2 begins
  EXPECT_EQ(m[1].kind, MoveKind::prefetch);
  EXPECT_EQ(m[1].issue_after, 7);  // op 7's temporary leaves no room before
  EXPECT_EQ(m[1].needed_by, 9);
  EXPECT_EQ(plan.prediction.bytes_to_slow, 8 * MiB);
  EXPECT_EQ(plan.prediction.bytes_to_fast, 8 * MiB);
  EXPECT_EQ(plan.prediction.fast_peak_bytes, 8 * MiB);
  EXPECT_DOUBLE_EQ(plan.prediction.stall_ns, 0);
  EXPECT_DOUBLE_EQ(plan.prediction.step_ns, plan.prediction.baseline_step_ns);
  // Copy times follow the link: overhead + bytes / bandwidth.
  const double copy = plan.schedule[0].predicted_end_ns - plan.schedule[0].predicted_start_ns;
  EXPECT_NEAR(copy, 10e3 + 8.0 * MiB / 10.0, 1.0);
}

TEST(Planner, EvictsWhatIsNeededLast) {
  // Three activations born at ops 0, 1, 2 and used again at ops 11, 10, 9 (backward order); the
  // temporaries of ops 4..7 leave room for two. Belady: the one needed last (born at op 0) goes.
  HandProfile h(12);
  const TensorId a0 = h.tensor(8 * MiB, 0, 11, {0, 11}, kTensorSavedForBackward);
  h.tensor(8 * MiB, 1, 10, {1, 10}, kTensorSavedForBackward);
  h.tensor(8 * MiB, 2, 9, {2, 9}, kTensorSavedForBackward);
  for (int i = 4; i <= 7; ++i) h.tensor(8 * MiB, i, i, {i});
  const Profile p = h.done();
  const Plan plan = make_plan(p, host_model(), host_budget(24 * MiB));
  ASSERT_TRUE(check_plan(p, plan).ok());
  ASSERT_EQ(plan.schedule.size(), 2u);
  EXPECT_EQ(plan.schedule[0].group, group_of(plan, a0));
  EXPECT_EQ(plan.schedule[1].group, group_of(plan, a0));
}

TEST(Planner, OptimizerStateLivesOnTheSlowTierBetweenSteps) {
  // A parameter used by every op, optimizer state used by the last op only, temporaries in between:
  // the state starts on the slow tier, comes in for the optimizer and leaves after (steady state).
  HandProfile h(10);
  h.tensor(8 * MiB, kBeforeIteration, kAfterIteration, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, kTensorParameter);
  const TensorId state = h.tensor(8 * MiB, kBeforeIteration, kAfterIteration, {9}, kTensorOptimizerState);
  for (int i = 1; i <= 7; ++i) h.tensor(8 * MiB, i, i, {i});
  const Profile p = h.done();
  const Plan plan = make_plan(p, host_model(), host_budget(16 * MiB));
  ASSERT_TRUE(check_plan(p, plan).ok()) << check_plan(p, plan).problems.front();
  const GroupId s = group_of(plan, state);
  EXPECT_EQ(plan.groups[s].home, plan.slow_tier);
  const auto m = moves_of(plan, s);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].kind, MoveKind::prefetch);
  EXPECT_EQ(m[0].needed_by, 9);
  EXPECT_EQ(m[1].kind, MoveKind::evict);
  EXPECT_EQ(m[1].issue_after, 9);
  EXPECT_EQ(m[1].needed_by, kAfterIteration);
  EXPECT_EQ(plan.schedule.size(), 2u);  // the parameter is used by every op: it never moves
}

TEST(Planner, AnOpLargerThanTheBudgetReadsInPlace) {
  // Op 3 touches 24 MiB with a budget of 8 MiB: something must be read in place on the slow tier.
  HandProfile h(6);
  h.tensor(16 * MiB, 3, 3, {3});
  h.tensor(8 * MiB, 3, 3, {3});
  h.tensor(4 * MiB, 0, 5, {0, 5});
  const Profile p = h.done();
  const Plan plan = make_plan(p, host_model(), host_budget(8 * MiB));
  const auto check = check_plan(p, plan);
  ASSERT_TRUE(check.ok()) << check.problems.front();
  EXPECT_LE(check.fast_peak, 8 * MiB);
  EXPECT_GT(check.in_place_uses, 0u);
  bool noted = false;
  for (const auto& n : plan.notes) noted = noted || n.find("read in place") != std::string::npos;
  EXPECT_TRUE(noted);
  const ReplayResult r = replay_plan(p, plan, host_model());
  EXPECT_GT(r.in_place_ns, 0);
  EXPECT_EQ(r.budget_overruns, 0u);
}

TEST(Planner, HiddenAccessGroupsNeverMove) {
  // Same as one_activation, but the activation has hidden accesses: it may not move early, so the
  // planner keeps it put and the temporaries go to the slow tier instead.
  HandProfile h(10);
  const TensorId a = h.tensor(8 * MiB, 0, 9, {0, 9}, kTensorSavedForBackward | kTensorHiddenAccess);
  for (int i = 2; i <= 7; ++i) h.tensor(8 * MiB, i, i, {i});
  const Profile p = h.done();
  const Plan plan = make_plan(p, host_model(), host_budget(8 * MiB));
  ASSERT_TRUE(check_plan(p, plan).ok());
  const GroupId g = group_of(plan, a);
  EXPECT_TRUE(plan.groups[g].pinned);
  EXPECT_TRUE(moves_of(plan, g).empty());
  EXPECT_LE(plan.prediction.fast_peak_bytes, 8 * MiB);
}

TEST(Planner, PersistentPlacementsCarryTheirAddress) {
  HandProfile h(4);
  const TensorId w = h.tensor(1 * MiB, kBeforeIteration, kAfterIteration, {0, 3}, kTensorParameter);
  h.tensor(1 * MiB, 1, 2, {1, 2});
  const Profile p = h.done();
  const Plan plan = make_plan(p, host_model(), host_budget(64 * MiB));
  for (const auto& pl : plan.placements) {
    EXPECT_EQ(pl.address, p.tensors[pl.tensor].address);
    EXPECT_EQ(pl.seq, p.tensors[pl.tensor].seq);
  }
  EXPECT_EQ(plan.placements.front().tensor, w);  // seq -1 sorts first
}

TEST(Planner, RejectsWhatItCannotPlan) {
  const Profile p = one_activation();
  PlanOptions o = host_budget(8 * MiB);
  o.policy = "magic";
  EXPECT_THROW(make_plan(p, host_model(), o), logic_error);
  // One tier and a budget below the run: nowhere to move to.
  EXPECT_THROW(make_plan(p, parse_tier_spec("dram:64G"), host_budget(8 * MiB)), logic_error);
  EXPECT_TRUE(make_plan(p, parse_tier_spec("dram:64G"), host_budget(64 * MiB)).empty());
}

TEST(Planner, PlansOnlyTheRequestedDevice) {
  HandProfile h(4, 0);
  h.tensor(4 * MiB, 0, 3, {0, 3});
  Profile p = h.done();
  TensorRecord host = p.tensors[0];
  host.id = 1;
  host.device = -1;
  host.seq = 0;
  p.tensors.push_back(host);
  PlanOptions o;
  o.device = 0;
  const Plan plan = make_plan(p, parse_tier_spec("gpu:24G,host:64G@55GB/s"), o);
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].tensor, 0u);
  EXPECT_EQ(plan.groups.at(0).page_size, 2 * MiB);
  EXPECT_EQ(main_device(p), 0);
}

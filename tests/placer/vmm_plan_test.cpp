// plan_from_trace: pure planning from a traced iteration.
#include "placer/vmm_plan.hpp"

#include <gtest/gtest.h>

#include <map>

#include "core/error.hpp"

namespace tierpack::gpu {
namespace {

constexpr std::uint64_t MiB = 1 << 20;

// A toy training step: `layers` layers allocate two activations each in forward (ticks advance by
// allocations), use them again in backward in reverse order and free them; a persistent optimizer
// state of `state` MiB is used only at the end (the optimizer step).
IterationTrace toy_step(int layers, std::uint64_t act_mib, std::uint64_t state_mib) {
  IterationTrace tr;
  std::int64_t tick = 0, seq = 0;
  std::vector<std::size_t> acts;
  for (int l = 0; l < layers; ++l)
    for (int k = 0; k < 2; ++k) {
      TracedTensor t;
      t.seq = seq++;
      t.bytes = act_mib * MiB;
      t.address = 0x100000000ull + t.seq * 0x10000000ull;
      t.birth = tick++;
      t.uses.push_back({t.birth, t.birth + 1});
      acts.push_back(tr.tensors.size());
      tr.tensors.push_back(t);
    }
  for (int l = layers - 1; l >= 0; --l)
    for (int k = 1; k >= 0; --k) {
      TracedTensor& t = tr.tensors[acts[2 * l + k]];
      // a gradient temporary is allocated and freed around each backward use
      TracedTensor tmp;
      tmp.seq = seq++;
      tmp.bytes = 2 * MiB;
      tmp.birth = tick++;
      t.uses.push_back({tick, tick});
      tmp.uses.push_back({tick, tick});
      tmp.death = tick++;
      t.death = tick++;
      tr.tensors.push_back(tmp);
    }
  TracedTensor state;
  state.seq = -1;
  state.bytes = state_mib * MiB;
  state.segment = 0x900000000ull;
  state.segment_bytes = state.bytes;
  state.uses.push_back({tick, tick + 2});
  tick += 3;
  tr.tensors.push_back(state);
  tr.clock_end = tick;
  return tr;
}

TEST(VmmPlan, NothingMovesWhenTheRunFits) {
  const IterationTrace tr = toy_step(8, 64, 256);
  VmmPlanOptions o;
  o.budget = 100ull << 30;
  const Plan p = plan_from_trace(tr, o);
  EXPECT_TRUE(p.schedule.empty());
  EXPECT_TRUE(p.groups.empty());
  EXPECT_EQ(p.prediction.natural_peak_bytes, (16 * 64 + 256 + 2) * MiB);  // with one gradient temporary
  p.validate();
  // Budget 0 (what the runtime passes when the live peak fits): nothing moves, and it says so
  // without claiming the budget cannot be met.
  const Plan none = plan_from_trace(tr, VmmPlanOptions{});
  EXPECT_TRUE(none.schedule.empty());
  ASSERT_EQ(none.notes.size(), 1u);
  EXPECT_EQ(none.notes[0].find("cannot be met"), std::string::npos) << none.notes[0];
  EXPECT_NE(none.notes[0].find("nothing has to move"), std::string::npos) << none.notes[0];
}

TEST(VmmPlan, MovesGroupsUntilThePredictedPeakFitsAndPrefetchesBeforeUse) {
  const IterationTrace tr = toy_step(12, 64, 256);
  VmmPlanOptions o;
  o.budget = 700 * MiB;  // natural peak: 24 * 64 + 256 = 1792 MiB
  o.min_gap = 4;
  o.group_bytes = 128 * MiB;
  const Plan p = plan_from_trace(tr, o);
  p.validate();
  ASSERT_FALSE(p.schedule.empty());
  EXPECT_LE(p.prediction.fast_peak_bytes, static_cast<std::uint64_t>(o.budget * o.headroom));
  std::map<GroupId, const Move*> evict, prefetch;
  for (const Move& m : p.schedule) (m.kind == MoveKind::evict ? evict : prefetch)[m.group] = &m;
  for (const PageGroup& g : p.groups) {
    ASSERT_TRUE(evict.count(g.id) && prefetch.count(g.id)) << "group " << g.id;
    const Move& e = *evict[g.id];
    const Move& f = *prefetch[g.id];
    for (TensorId t : g.tensors) {
      const TracedTensor& tt = tr.tensors[t];
      for (const TracedUse& u : tt.uses) {
        // every use is before the eviction is issued, or at/after the prefetch is needed
        const bool before = u.to <= e.issue_after;
        const bool after = g.cls == TensorClass::persistent ? true : u.from >= f.needed_by;
        EXPECT_TRUE(before || after) << "group " << g.id << " tensor " << t << " used at " << u.from;
      }
    }
    if (g.cls != TensorClass::persistent) {
      EXPECT_LT(f.issue_after, f.needed_by);
    }
  }
  // The optimizer state (used only at the end) is chosen and wraps to the next iteration.
  bool state_moves = false;
  for (const PageGroup& g : p.groups) state_moves |= g.cls == TensorClass::persistent;
  EXPECT_TRUE(state_moves);
}

TEST(VmmPlan, SaysSoWhenTheBudgetCannotBeMet) {
  const IterationTrace tr = toy_step(4, 64, 0);
  VmmPlanOptions o;
  o.budget = 8 * MiB;
  const Plan p = plan_from_trace(tr, o);
  ASSERT_GE(p.notes.size(), 2u);
  EXPECT_NE(p.notes.back().find("cannot be met"), std::string::npos);
}

// One tensor in an iteration: allocated at `birth`, used in each [from, to], freed at `death`.
TracedTensor one(std::int64_t seq, std::uint64_t mib, std::int64_t birth, std::vector<TracedUse> uses,
                 std::int64_t death) {
  TracedTensor t;
  t.seq = seq;
  t.bytes = mib * MiB;
  t.address = 0x100000000ull + static_cast<std::uint64_t>(seq) * 0x40000000ull;
  t.birth = birth;
  t.death = death;
  t.uses = std::move(uses);
  return t;
}

// A tensor alive across iterations, alone in its allocator segment of `segment_mib` (its size if 0).
TracedTensor carried(std::uint64_t mib, std::vector<TracedUse> uses, std::uint64_t address,
                     std::uint64_t segment_mib = 0) {
  TracedTensor t = one(-1, mib, 0, std::move(uses), -1);
  t.address = address;
  t.segment = address;
  t.segment_bytes = (segment_mib ? segment_mib : mib) * MiB;
  return t;
}

// Note [Choosing what moves]: a big tensor idle for a long time early in the iteration is the
// cheapest move per byte-tick, but the peak is later; only the tensor idle across the peak helps.
TEST(VmmPlan, MovesOnlyWhatLowersThePeak) {
  IterationTrace tr;
  tr.clock_end = 100;
  tr.tensors.push_back(one(0, 200, 0, {{0, 0}, {60, 60}}, 61));     // idle 0..60, under the budget there
  tr.tensors.push_back(one(1, 128, 62, {{62, 62}, {90, 90}}, 91));  // idle across the peak
  tr.tensors.push_back(one(2, 128, 70, {{70, 80}}, 81));            // in use for the whole peak
  VmmPlanOptions o;
  o.budget = 220 * MiB;
  o.headroom = 1.0;
  const Plan p = plan_from_trace(tr, o);
  ASSERT_EQ(p.groups.size(), 1u);
  ASSERT_EQ(p.groups[0].tensors.size(), 1u);
  EXPECT_EQ(p.groups[0].tensors[0], 1u);
  EXPECT_EQ(p.prediction.bytes_to_slow, 128 * MiB);
  EXPECT_LE(p.prediction.fast_peak_bytes, o.budget);
}

// When a tick cannot be brought under the budget (what is there is in use), moves that lower other
// ticks still count, but a group away only where the device has room moves for nothing.
TEST(VmmPlan, AnInfeasibleBudgetDoesNotMoveGroupsThatCannotHelp) {
  IterationTrace tr;
  tr.clock_end = 100;
  tr.tensors.push_back(one(0, 200, 0, {{0, 0}, {60, 60}}, 61));
  tr.tensors.push_back(one(1, 128, 62, {{62, 62}, {90, 90}}, 91));
  tr.tensors.push_back(one(2, 800, 70, {{70, 80}}, 81));
  VmmPlanOptions o;
  o.budget = 500 * MiB;
  o.headroom = 1.0;
  const Plan p = plan_from_trace(tr, o);
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].tensors[0], 1u);
  EXPECT_EQ(p.prediction.fast_peak_bytes, 800 * MiB);
  EXPECT_NE(p.notes.back().find("cannot be met"), std::string::npos);
}

// Note [Groups that live on the host]: state used together with a big activation at one tick cannot
// be moved out of the way (both are in use there); kept in host memory for good, it fits.
TEST(VmmPlan, StateInUseAtAnUnmovablePeakLivesOnTheHost) {
  IterationTrace tr;
  tr.clock_end = 100;
  tr.tensors.push_back(carried(200, {{50, 52}}, 0x900000000ull));
  tr.tensors.push_back(one(0, 300, 40, {{40, 40}, {51, 51}}, 60));
  VmmPlanOptions o;
  o.budget = 400 * MiB;
  o.headroom = 1.0;
  const Plan p = plan_from_trace(tr, o);
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].cls, TensorClass::persistent);
  ASSERT_EQ(p.schedule.size(), 1u) << "evicted once, never brought back";
  EXPECT_EQ(p.schedule[0].kind, MoveKind::evict);
  EXPECT_EQ(p.prediction.bytes_to_slow, 0u) << "nothing moves every iteration";
  EXPECT_LE(p.prediction.fast_peak_bytes, o.budget);
  EXPECT_NE(p.notes.back().find("stay in host memory"), std::string::npos) << p.notes.back();
  p.validate();

  o.host_resident = false;
  const Plan spills = plan_from_trace(tr, o);
  EXPECT_GT(spills.prediction.fast_peak_bytes, o.budget) << "without it the peak spills";
  EXPECT_NE(spills.notes.back().find("cannot be met"), std::string::npos);
}

// Note [Segment slack]: a segment of persistent tensors holds its whole chunks on the device. Here
// the optimizer state is 100 MiB in a 300 MiB segment and is in use at the peak with an activation of
// 300 MiB; moving the other, idle state (200 MiB) out of the way fits if only tensors count (400 MiB),
// but the device then holds 600. Counting the segment, the state in use stays in host memory.
TEST(VmmPlan, APersistentSegmentsFreeSpaceCountsOnTheDevice) {
  IterationTrace tr;
  tr.clock_end = 100;
  tr.tensors.push_back(carried(100, {{50, 52}}, 0x900000000ull, 300));
  tr.tensors.push_back(carried(200, {{10, 10}}, 0xA00000000ull));
  tr.tensors.push_back(one(0, 300, 40, {{40, 60}}, 61));
  VmmPlanOptions o;
  o.budget = 450 * MiB;
  o.headroom = 1.0;
  const Plan p = plan_from_trace(tr, o);
  p.validate();
  EXPECT_LE(p.prediction.fast_peak_bytes, o.budget);
  bool state_on_host = false;
  for (const PageGroup& g : p.groups)
    for (std::uint32_t t : g.tensors)
      if (t == 0) {
        state_on_host = true;
        EXPECT_EQ(g.cls, TensorClass::persistent);
      }
  EXPECT_TRUE(state_on_host) << "the state's 300 MiB segment must leave the device for the peak to fit";
  ASSERT_GE(p.notes.size(), 2u);
  EXPECT_NE(p.notes[p.notes.size() - 2].find("stay in host memory"), std::string::npos) << p.notes[p.notes.size() - 2];
  EXPECT_NE(p.notes.back().find("hold 200.00 MiB of free space"), std::string::npos) << p.notes.back();
}

TEST(VmmPlan, RejectsATensorThatDiesBeforeItIsBorn) {
  IterationTrace tr;
  tr.clock_end = 10;
  TracedTensor t;
  t.seq = 0;
  t.bytes = MiB;
  t.birth = 5;
  t.death = 2;
  tr.tensors.push_back(t);
  EXPECT_THROW(plan_from_trace(tr, {}), tierpack::logic_error);
}

}  // namespace
}  // namespace tierpack::gpu

// Page false sharing: a profile where allocation-order packing puts forward activations (kept until
// backward) on the same pages as iteration-scoped buffers that the forward pass keeps reading. Such a
// mixed group is never idle long enough to move, so page-agnostic packing has to leave it on the slow
// tier and read it in place, while page-aware packing moves the idle activation groups once each way:
// for the same budget fewer bytes cross between the tiers, and the replay shows it.
#include <gtest/gtest.h>

#include "placer/compare.hpp"
#include "placer/page_stats.hpp"
#include "placer/plan_check.hpp"
#include "placer/planner.hpp"
#include "placer/replay.hpp"
#include "tests/placer/hand_profile.hpp"

using namespace tierpack;
using namespace tierpack::placer;
using tierpack::test::HandProfile;
using tierpack::test::host_model;

namespace {

constexpr std::uint64_t KiB = 1024;

// 128 forward ops of 20 us each save a 60.5 KiB activation for the mirrored backward op and allocate a
// 60.5 KiB buffer that every 16th forward op reads until the forward pass ends. In allocation order
// the two alternate.
Profile interleaved_buffers_and_activations() {
  constexpr int kForward = 128, kOps = 2 * kForward, kPeriod = 16;
  HandProfile h(kOps, -1, 20'000);
  for (int i = 0; i < kForward; ++i) {
    h.tensor(60 * KiB + 512, i, kOps - 1 - i, {i, kOps - 1 - i}, kTensorSavedForBackward);
    std::vector<OpIndex> uses;
    for (int u = i; u < kForward; u += kPeriod) uses.push_back(u);
    h.tensor(60 * KiB + 512, i, kForward - 1, uses);
  }
  return h.done();
}

std::uint64_t crossing(const ReplayResult& r) { return r.bytes_to_fast + r.bytes_to_slow + r.in_place_bytes; }

}  // namespace

TEST(FalseSharing, PageAwarePackingMovesFewerBytesForTheSameBudget) {
  const Profile p = interleaved_buffers_and_activations();
  const TierModel model = host_model(10);
  PlanOptions o;
  o.device = -1;
  o.fast_budget.fraction = 0.6;
  const Plan aware = make_plan(p, model, o);
  o.policy = "page-agnostic";
  const Plan agnostic = make_plan(p, model, o);
  ASSERT_TRUE(check_plan(p, aware).ok());
  ASSERT_TRUE(check_plan(p, agnostic).ok());
  EXPECT_EQ(aware.fast_budget_bytes, agnostic.fast_budget_bytes);

  // Allocation order mixes classes on pages and in groups; page-aware packing does not.
  EXPECT_EQ(plan_mixed_class_pages(p, aware), 0u);
  EXPECT_EQ(plan_mixed_class_groups(aware), 0u);
  EXPECT_GT(plan_mixed_class_pages(p, agnostic), 0u);
  EXPECT_GT(plan_mixed_class_groups(agnostic), 0u);
  EXPECT_GT(profile_mixed_class_pages(p, -1), 0u);  // the profiled addresses mix them too

  // Page-aware: the activation groups go to the slow tier once and come back once.
  EXPECT_GT(aware.prediction.bytes_to_slow, 0u);
  EXPECT_EQ(aware.prediction.bytes_to_fast, aware.prediction.bytes_to_slow);

  // The replay (what `tierpack replay` prints) shows fewer bytes crossing, and a shorter step.
  const Comparison c = compare_policies(p, model, o);
  const ReplayResult* ra = nullptr;
  const ReplayResult* rg = nullptr;
  for (const auto& r : c.rows) {
    if (r.policy == "tierpack (page-aware)") ra = &r;
    if (r.policy == "page-agnostic") rg = &r;
  }
  ASSERT_TRUE(ra && rg);
  EXPECT_EQ(ra->bytes_to_slow, aware.prediction.bytes_to_slow);
  EXPECT_EQ(rg->bytes_to_slow, agnostic.prediction.bytes_to_slow);
  EXPECT_LT(crossing(*ra), crossing(*rg)) << "page-aware " << crossing(*ra) << " B, page-agnostic " << crossing(*rg) << " B";
  EXPECT_LT(ra->in_place_bytes, rg->in_place_bytes);
  EXPECT_LT(ra->step_ns, rg->step_ns);
  EXPECT_EQ(ra->mixed_class_pages, 0u);
  EXPECT_GT(rg->mixed_class_pages, 0u);
}

// Lower-bound predictions (Note [Lower-bound predictions] in placer/prediction_bound.hpp): a prediction
// made from traced or launch-time op times, or whose moves hide under compute, says so and why.
#include <gtest/gtest.h>

#include "placer/planner.hpp"
#include "placer/prediction_bound.hpp"
#include "tests/placer/hand_profile.hpp"

using namespace tierpack;
using namespace tierpack::placer;
using tierpack::test::HandProfile;
using tierpack::test::host_model;

namespace {

constexpr std::uint64_t MiB = 1ull << 20;

// An 8 MiB activation used at ops 0 and 9, 8 MiB temporaries at ops 2..7 (1 ms each): with an 8 MiB
// budget the activation leaves after op 0 and comes back before op 9.
Profile one_activation(const std::string& tracer) {
  HandProfile h(10);
  h.tensor(8 * MiB, 0, 9, {0, 9}, kTensorSavedForBackward);
  for (int i = 2; i <= 7; ++i) h.tensor(8 * MiB, i, i, {i});
  Profile p = h.done();
  p.meta.page_tracer = tracer;
  return p;
}

PlanOptions host_budget(std::uint64_t bytes) {
  PlanOptions o;
  o.device = -1;
  o.fast_budget.bytes = bytes;
  return o;
}

bool has(const std::vector<std::string>& v, const std::string& fragment) {
  for (const auto& s : v)
    if (s.find(fragment) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(PredictionBound, TracedOpTimesMakeEveryPredictionALowerBound) {
  for (const char* tracer : {"uffd-wp", "mprotect", "soft-dirty"}) {
    const Profile p = one_activation(tracer);
    const auto r = op_time_reasons(p, -1);
    ASSERT_EQ(r.size(), 1u) << tracer;
    EXPECT_NE(r[0].find(std::string("under the ") + tracer + " page tracer"), std::string::npos) << r[0];
    EXPECT_NE(r[0].find("--page-tracer off"), std::string::npos) << r[0];
    // Even a plan where nothing moves: the profiled step itself is stretched.
    const Plan fits = make_plan(p, host_model(), host_budget(64 * MiB));
    EXPECT_TRUE(has(lower_bound_reasons(p, fits), "page tracer"));
    // Scaled to a measured step (experiment --compute-time): no longer the profile's times.
    EXPECT_TRUE(op_time_reasons(p, -1, /*op_times_scaled=*/true).empty());
  }
  // Untraced host profiles (and those from before the key) have no such reason.
  EXPECT_TRUE(op_time_reasons(one_activation("none"), -1).empty());
  EXPECT_TRUE(op_time_reasons(one_activation(""), -1).empty());
}

TEST(PredictionBound, GpuOpTimesAreLaunchTimes) {
  HandProfile h(4, /*device=*/0);
  h.tensor(MiB, 0, 3, {0, 3});
  Profile p = h.done();
  p.meta.page_tracer = "none";
  const auto r = op_time_reasons(p, 0);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].find("launches on the host thread"), std::string::npos) << r[0];
  EXPECT_NE(r[0].find("--compute-time"), std::string::npos) << r[0];
  EXPECT_TRUE(op_time_reasons(p, 0, true).empty());
}

TEST(PredictionBound, MovesHiddenUnderComputeAreNamed) {
  const Profile p = one_activation("none");
  // 10 GB/s: 8 MiB each way take under 1 ms of the 6 ms between the uses: the prediction is ~1.00x.
  const Plan hidden = make_plan(p, host_model(10), host_budget(8 * MiB));
  ASSERT_FALSE(hidden.empty());
  ASSERT_LE(hidden.prediction.step_ns, 1.01 * hidden.prediction.baseline_step_ns);
  const auto r = lower_bound_reasons(p, hidden);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].find("8.00 MiB out, 8.00 MiB back, 1.68 ms of copying"), std::string::npos) << r[0];
  EXPECT_NE(r[0].find("hide under 10.00 ms of profiled compute"), std::string::npos) << r[0];
  // Nothing moves: nothing to hide, and an untraced host profile has no other reason.
  EXPECT_TRUE(lower_bound_reasons(p, make_plan(p, host_model(10), host_budget(64 * MiB))).empty());
  // A prediction that shows its moves (well above the profiled step) is not flagged for them.
  EXPECT_TRUE(hidden_moves_reason(make_cost_model(host_model(10), choose_tiers(host_model(10), -1), -1), 8 * MiB, 8 * MiB,
                                  1.5 * hidden.prediction.baseline_step_ns, hidden.prediction.baseline_step_ns)
                  .empty());
}

TEST(PredictionBound, CopyTimeFollowsTheLinkKind) {
  CostModel c;
  c.to_fast_bytes_per_ns = 2;
  c.to_slow_bytes_per_ns = 1;
  c.full_duplex = false;
  EXPECT_DOUBLE_EQ(copy_ns(c, 200, 100), 200.0);  // one direction at a time: 100 + 100
  c.full_duplex = true;
  c.both_ways_bytes_per_ns = 3;
  EXPECT_DOUBLE_EQ(copy_ns(c, 200, 100), 100.0);  // busier direction alone
  c.both_ways_bytes_per_ns = 1.5;
  EXPECT_DOUBLE_EQ(copy_ns(c, 200, 100), 200.0);  // the shared link is the limit
}

// Property tests of the planner over thousands of random profiles, tier models and budgets: every plan
// passes check_plan (budget at every op, no use while a group moves, every use finds its group resident
// on a tier the device can read, steady state, pinned groups never move), is deterministic, is empty
// when everything fits, and replays within its budget without overruns. TIERPACK_PROPERTY_CASES
// raises the number of cases (default 2000).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/error.hpp"
#include "placer/plan_check.hpp"
#include "placer/planner.hpp"
#include "placer/replay.hpp"
#include "tests/support/synthetic_profile.hpp"

using namespace tierpack;
using namespace tierpack::placer;

namespace {

int cases() {
  if (const char* env = std::getenv("TIERPACK_PROPERTY_CASES")) return std::max(1, std::atoi(env));
  return 2000;
}

std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

// A random two-tier model for the profile's device: link speeds from 1 to 100 GB/s, half or full duplex.
TierModel random_model(std::uint64_t seed, int device) {
  const std::uint64_t r = mix(seed);
  const double bw = 1e9 * double(1 + r % 100);
  const bool duplex = (r >> 8) % 2 == 0;
  std::string spec = device >= 0 ? "gpu:80G,host:512G@" : "dram:64G,cxl:256G@+80ns/";
  char num[32];
  std::snprintf(num, sizeof num, "%.0fGB/s", bw / 1e9);
  TierModel m = parse_tier_spec(spec + num);
  for (auto& l : m.links) l.full_duplex = duplex;
  return m;
}

struct Case {
  Profile profile;
  TierModel model;
  PlanOptions opts;
};

Case make_case(std::uint64_t i) {
  Case c;
  synth::RandomProfileOptions ro;
  ro.seed = i;
  ro.device = mix(i * 7 + 1) % 3 == 0 ? -1 : 0;
  c.profile = synth::make_random_profile(ro);
  c.model = random_model(i, ro.device);
  c.opts.device = ro.device;
  c.opts.policy = i % 2 ? "page-agnostic" : "page-aware";
  // Budgets from 5% to 120% of the device's peak.
  const double fraction = 0.05 + double(mix(i * 13 + 5) % 116) / 100.0;
  c.opts.fast_budget.bytes = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(fraction * double(c.profile.peak_bytes(ro.device))));
  if (i % 5 == 0) c.opts.group_bytes = 4ull << 20;
  return c;
}

}  // namespace

TEST(PlannerProperties, RandomProfilesKeepEveryInvariant) {
  const int n = cases();
  int planned = 0, nonempty = 0, fitting = 0;
  for (int k = 0; k < n; ++k) {
    const Case c = make_case(static_cast<std::uint64_t>(k));
    SCOPED_TRACE("case " + std::to_string(k) + " (" + c.opts.policy + ", device " + std::to_string(c.opts.device) + ")");
    Plan plan;
    try {
      plan = make_plan(c.profile, c.model, c.opts);
    } catch (const logic_error& e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    ++planned;
    const PlanCheck check = check_plan(c.profile, plan);
    ASSERT_TRUE(check.ok()) << check.problems.front();
    EXPECT_LE(plan.prediction.fast_peak_bytes, plan.fast_budget_bytes);
    EXPECT_EQ(check.fast_peak, plan.prediction.fast_peak_bytes);

    // Deterministic: the same inputs give the same plan.
    ASSERT_EQ(make_plan(c.profile, c.model, c.opts), plan);

    // Everything fits: nothing moves and every group stays on the fast tier.
    if (plan.prediction.natural_peak_bytes <= plan.fast_budget_bytes) {
      ++fitting;
      EXPECT_TRUE(plan.empty());
      for (const auto& g : plan.groups) EXPECT_EQ(g.home, plan.fast_tier);
      EXPECT_DOUBLE_EQ(plan.prediction.stall_ns, 0.0);
    } else {
      nonempty += plan.empty() ? 0 : 1;
    }

    // The replay honours the budget without forcing it, and moves what the plan says.
    ReplayOptions ro;
    ro.count_mixed_pages = false;
    const ReplayResult r = replay_plan(c.profile, plan, c.model, ro);
    EXPECT_EQ(r.budget_overruns, 0u);
    EXPECT_EQ(r.skipped_moves, 0u);
    EXPECT_LE(r.fast_peak_bytes, plan.fast_budget_bytes);
    EXPECT_EQ(r.bytes_to_fast, plan.prediction.bytes_to_fast);
    EXPECT_EQ(r.bytes_to_slow, plan.prediction.bytes_to_slow);
    EXPECT_GE(r.step_ns, 0.999 * plan.prediction.baseline_step_ns);
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_EQ(planned, n);
  // The generator must exercise both regimes for the properties to mean something.
  EXPECT_GT(fitting, n / 20);
  EXPECT_GT(nonempty, n / 5);
}

TEST(PlannerProperties, LargerAndStructuredProfiles) {
  // Fewer cases, bigger profiles: random ones with hundreds of ops and tensors, and synthetic training
  // iterations (forward, backward, optimizer) on the H200 and DDR5+CXL presets.
  const int n = std::max(1, cases() / 20);
  for (int k = 0; k < n; ++k) {
    SCOPED_TRACE("case " + std::to_string(k));
    Profile p;
    TierModel model;
    PlanOptions o;
    if (k % 2 == 0) {
      synth::RandomProfileOptions ro;
      ro.seed = 100000 + static_cast<std::uint64_t>(k);
      ro.device = k % 4 == 0 ? 0 : -1;
      ro.max_ops = 400;
      ro.max_tensors = 600;
      p = synth::make_random_profile(ro);
      model = random_model(static_cast<std::uint64_t>(k), ro.device);
      o.device = ro.device;
    } else {
      synth::SyntheticOptions so;
      so.seed = static_cast<std::uint64_t>(k);
      so.tensors = 200 + static_cast<std::uint32_t>(mix(k) % 800);
      so.device = k % 3 == 0 ? -1 : 0;
      so.hidden_access_fraction = 0.02;
      if (so.device < 0) {
        so.activation_bytes = 256 << 10;
        so.param_bytes = 128 << 10;
      }
      p = synth::make_synthetic_profile(so);
      model = tier_preset(so.device >= 0 ? "h200-pcie" : "ddr5-cxl");
      o.device = so.device;
    }
    o.policy = (k / 2) % 2 ? "page-agnostic" : "page-aware";
    o.fast_budget.fraction = 0.1 + double(mix(static_cast<std::uint64_t>(k) * 3 + 1) % 90) / 100.0;
    const Plan plan = make_plan(p, model, o);
    const PlanCheck check = check_plan(p, plan);
    ASSERT_TRUE(check.ok()) << check.problems.front();
    ReplayOptions ro;
    ro.count_mixed_pages = false;
    const ReplayResult r = replay_plan(p, plan, model, ro);
    EXPECT_EQ(r.budget_overruns, 0u);
    EXPECT_EQ(r.skipped_moves, 0u);
    EXPECT_LE(r.fast_peak_bytes, plan.fast_budget_bytes);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(PlannerProperties, CheckPlanCatchesBrokenPlans) {
  // The checker the properties rely on must be able to fail.
  for (std::uint64_t seed = 1;; ++seed) {
    Case c = make_case(seed * 2);
    c.opts.fast_budget.bytes = std::max<std::uint64_t>(1, c.profile.peak_bytes(c.opts.device) / 3);
    Plan plan = make_plan(c.profile, c.model, c.opts);
    if (plan.schedule.size() < 2) continue;
    ASSERT_TRUE(check_plan(c.profile, plan).ok());

    Plan over = plan;  // a budget the plan was not made for
    over.fast_budget_bytes = plan.prediction.fast_peak_bytes - 1;
    EXPECT_FALSE(check_plan(c.profile, over).ok());

    Plan late = plan;  // a prefetch after an eviction that arrives after its use
    bool made_late = false;
    for (auto& m : late.schedule) {
      if (m.kind != MoveKind::prefetch || m.needed_by == kAfterIteration) continue;
      const bool after_eviction = std::any_of(late.schedule.begin(), late.schedule.end(), [&](const Move& e) {
        return e.group == m.group && e.kind == MoveKind::evict && e.issue_after < m.issue_after;
      });
      if (!after_eviction) continue;
      m.issue_after = m.needed_by;
      m.needed_by = m.needed_by + 1;
      made_late = true;
      break;
    }
    if (!made_late) continue;
    EXPECT_FALSE(check_plan(c.profile, late).ok());

    Plan dropped = plan;  // a prefetch without the eviction before it
    const auto evict = std::find_if(dropped.schedule.begin(), dropped.schedule.end(), [&](const Move& e) {
      return e.kind == MoveKind::evict && std::any_of(dropped.schedule.begin(), dropped.schedule.end(), [&](const Move& m) {
               return m.group == e.group && m.kind == MoveKind::prefetch && m.issue_after > e.issue_after;
             });
    });
    ASSERT_NE(evict, dropped.schedule.end());
    dropped.schedule.erase(evict);
    EXPECT_FALSE(check_plan(c.profile, dropped).ok());
    break;
  }
}

// Inputs for the report tests: a small training-step profile built op by op (forward, backward,
// optimizer), with profiled addresses, host page records (false sharing, hidden accesses) and a
// diverging iteration; a plan and run statistics that match it. Sizes scale with `layers`, so the
// same builder makes the 100k-tensor profile of the size-budget test.
#pragma once

#include <cstdint>
#include <string>

#include "core/plan.hpp"
#include "core/profile.hpp"
#include "core/run_stats.hpp"

namespace tierpack::report::testing {

struct FixtureOptions {
  int layers = 6;
  int temporaries_per_layer = 3;
  int small_host_tensors_per_layer = 4;  ///< host-side buffers that share pages (false sharing)
  std::uint64_t param_bytes = 4ull << 20;
  std::uint64_t activation_bytes = 24ull << 20;
  int device = 0;           ///< device of the big tensors (-1: host-only profile)
  bool addresses = true;    ///< record profiled addresses
  bool page_data = true;    ///< page records + page tracer "uffd-wp"
  int iterations = 6;       ///< observed iterations (one of them diverges when > 3)
};

Profile make_training_profile(const FixtureOptions& opts = {});

/// The placer's plan for the profile's main device at this fast-tier budget, on the profile's tiers.
Plan make_plan(const Profile& profile, std::uint64_t budget_bytes);

/// Run statistics consistent with the plan: occupancy samples, moves, a stall.
RunStats make_run_stats(const Profile& profile, const Plan& plan);

/// Unique scratch directory under the system temp dir (removed by the caller).
std::string scratch_dir(const std::string& name);

}  // namespace tierpack::report::testing

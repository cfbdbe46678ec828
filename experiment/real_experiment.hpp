// Real-nodes mode of `tierpack experiment`: on a machine with at least two NUMA nodes (node 0 fast,
// the next node with memory slow; the QEMU guest of scripts/numa-guest.sh is one), replays a
// profile's memory behaviour for real under each policy and fast-node budget (host_replayer.hpp)
// and measures wall time, bytes migrated and per-node residency. Kernel tiering and DAMON are
// detected and applied when the kernel offers them (kernel_tiering.hpp), else reported as not available.
#pragma once

#include <string>
#include <vector>

#include "core/profile.hpp"
#include "core/tier_spec.hpp"
#include "experiment/experiment_result.hpp"
#include "experiment/model_experiment.hpp"

namespace tierpack::experiment {

struct RealOptions {
  std::vector<BudgetPoint> budgets;
  std::vector<std::string> policies;
  int iterations = 3;        ///< per run; the first is a warm-up and not timed
  double scale = 1.0;        ///< tensor sizes are multiplied by this (to fit a small guest)
  TierModel model;           ///< figures for tierpack's planner; its first two host tiers map to the nodes
  placer::PlanOptions plan;  ///< device (whose tensors are replayed; all on host memory here), group size
  ProgressFn progress;
};

/// Throws logic_error("real mode needs >= 2 NUMA nodes ...") on a machine with one node.
ExperimentResult run_real_experiment(const Profile& profile, const RealOptions& opts);

}  // namespace tierpack::experiment

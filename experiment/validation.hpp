// Simulator validation: predicted step time next to a measured one for the same workload, policy and
// budget (e.g. the H200 GPT-2 runs in bench/results/). `--measured "all-fast=145ms,page-aware@75%=490ms"`
// names the measurements; each is predicted by the calibrated model and the error is reported.
#pragma once

#include <string>
#include <vector>

#include "core/profile.hpp"
#include "core/tier_spec.hpp"
#include "experiment/experiment_result.hpp"
#include "placer/planner.hpp"

namespace tierpack::experiment {

struct Measurement {
  std::string policy;  ///< "all-fast", "page-aware" or "page-agnostic"
  std::string budget;  ///< "75%" or "22G" ("" for all-fast)
  double measured_ns = 0;
};

/// Parses "POLICY[@BUDGET]=DURATION,..." (DURATION: 145ms, 0.49s, 490000us). Throws logic_error.
std::vector<Measurement> parse_measurements(const std::string& text);

/// Predicts each measurement with the model and pairs them. `source` names where the measurements are from.
std::vector<ValidationRow> validate(const Profile& profile, const TierModel& model, const placer::PlanOptions& base,
                                    const std::vector<Measurement>& measured, const std::string& source);

}  // namespace tierpack::experiment

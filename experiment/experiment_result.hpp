// The values `tierpack experiment` produces: one row per (policy, fast-tier budget), whether it came
// from the calibrated model (simulator) or from a real run on NUMA nodes, plus the notes that say
// what was modelled, what was measured and what was not available. Written by results_writer.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tierpack::experiment {

/// The policies an experiment knows, in table order.
inline constexpr const char* kPolicies[] = {"all-fast",       "first-touch", "interleave", "preferred-fast",
                                            "lru-demand",     "kernel-tiering", "damon",   "page-agnostic",
                                            "page-aware"};

/// "all" or a comma list of names from kPolicies; throws logic_error naming an unknown one.
std::vector<std::string> parse_policies(const std::string& text);

struct ResultRow {
  std::string policy;
  std::string budget_label;          ///< as given: "50%" or "4G"
  double budget_fraction = 0;        ///< budget / peak (for the plots' x axis)
  std::uint64_t budget_bytes = 0;
  bool available = true;             ///< false: the policy could not run here (note says why)
  bool fits = true;                  ///< false: the policy needs more fast memory than the budget
  double step_ns = 0;                ///< model: predicted iteration time; real: measured mean wall time
  double slowdown = 0;               ///< step_ns / the all-fast step at this budget's reference
  double stall_ns = 0, in_place_ns = 0;  ///< model only
  std::uint64_t bytes_to_fast = 0, bytes_to_slow = 0;  ///< migrated per iteration
  std::uint64_t in_place_bytes = 0;  ///< model: bytes ops touched on the slow tier
  std::uint64_t fast_peak_bytes = 0; ///< model: simulated; real: highest node-0 residency sampled
  std::uint64_t slow_peak_bytes = 0; ///< real only: highest slow-node residency sampled
  std::uint64_t mixed_class_pages = 0;
  bool emulated = false;             ///< real run in an emulated guest (nodes of equal speed)
  std::string note;

  std::uint64_t bytes_migrated() const { return bytes_to_fast + bytes_to_slow; }
};

/// Predicted vs measured step time of one measured configuration (simulator validation).
struct ValidationRow {
  std::string what;     ///< "GPT-2 large, tierpack 75%"
  double measured_ns = 0;
  double predicted_ns = 0;
  std::string source;   ///< where the measurement comes from
  double error() const { return measured_ns > 0 ? predicted_ns / measured_ns - 1 : 0; }
};

struct ExperimentResult {
  std::string mode;        ///< "model" or "real"
  std::string workload;    ///< profile path or command
  std::string tiers;       ///< tier model / machine description
  std::string fast_tier, slow_tier;
  std::uint64_t peak_bytes = 0;       ///< the profile's peak of live tensor bytes on the device
  double reference_step_ns = 0;       ///< all-fast step
  int iterations = 0;                 ///< real mode: measured iterations per run
  std::vector<ResultRow> rows;
  std::vector<ValidationRow> validation;
  std::vector<std::string> notes;
  /// Model mode: why the predicted step times are lower bounds (Note [Lower-bound predictions] in
  /// placer/prediction_bound.hpp); empty when no reason is known.
  std::vector<std::string> lower_bound;
  std::vector<std::string> commands;  ///< how to reproduce (written into summary.md)
};

}  // namespace tierpack::experiment

// Whether a predicted step time is a lower bound, and why (Note [Lower-bound predictions]). Used by
// `tierpack plan`, the report and `tierpack experiment`, so the three say the same thing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/plan.hpp"
#include "core/profile.hpp"
#include "placer/cost_model.hpp"

namespace tierpack::placer {

// Note [Lower-bound predictions]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The simulator overlaps copies with the profiled ops' times. Anything that makes those times longer
// than a real step's compute hides moves that a real step would wait for, so the predicted step (and
// its slowdown) can only be too low, never too high, for that reason:
//   * op times measured under a page tracer (uffd-wp, soft-dirty, mprotect): the tracer's faults and
//     scans stretch every op touching a watched page (a traced CPU CNN predicted 1.000-1.002x at every
//     budget for every policy, issue 26);
//   * a GPU profile: an op's time is its launch on the host thread with the op observer attached, not
//     its kernel (Note [Launch times] in cost_model.cpp), and the observer stretches the iteration
//     (docs/experiments.md); `tierpack experiment --compute-time` scales the ops to a measured step;
//   * moves that hide under compute: bytes move but the prediction is within 1% of the profiled step.
//     It holds only while a real step computes as long as the profiled one and copies do not slow
//     compute down (contention is not modelled, docs/simulator.md).
// The first two depend on the profile alone (the same for every budget and policy); the third on one
// prediction. A caller that scaled the op times to a measured step passes op_times_scaled.

/// Reasons the profile's op times overstate a real step's compute, for predictions on `device`'s
/// tensors (-1 host). Empty when the caller scaled them to a measured step (op_times_scaled).
std::vector<std::string> op_time_reasons(const Profile& profile, int device, bool op_times_scaled = false);

/// Copy time of a prediction's moves: the busier direction at its own rate on a full-duplex link (or
/// both at the both-ways rate when that is slower); the sum of the two on a half-duplex link.
double copy_ns(const CostModel& cost, std::uint64_t bytes_to_fast, std::uint64_t bytes_to_slow);

/// The reason a prediction's moves hide under compute ("" when nothing moves or the prediction shows
/// them: more than 1% above the profiled step).
std::string hidden_moves_reason(const CostModel& cost, std::uint64_t bytes_to_fast, std::uint64_t bytes_to_slow,
                                double step_ns, double baseline_ns);

/// Every reason a plan's prediction is a lower bound (empty: none known). The plan must have been made
/// from `profile`.
std::vector<std::string> lower_bound_reasons(const Profile& profile, const Plan& plan, bool op_times_scaled = false);

}  // namespace tierpack::placer

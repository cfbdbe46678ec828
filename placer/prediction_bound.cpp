// Lower-bound predictions (see prediction_bound.hpp, Note [Lower-bound predictions]).
#include "placer/prediction_bound.hpp"

#include <algorithm>

#include "core/units.hpp"

namespace tierpack::placer {

std::vector<std::string> op_time_reasons(const Profile& profile, int device, bool op_times_scaled) {
  std::vector<std::string> out;
  if (op_times_scaled) return out;
  const std::string& tracer = profile.meta.page_tracer;
  if (!tracer.empty() && tracer != "none")
    out.push_back("the profile's op times were measured under the " + tracer +
                  " page tracer, which stretches every op that touches a watched page: the longer compute hides moves a "
                  "real step waits for (profile with --page-tracer off for op times)");
  if (device >= 0)
    out.push_back("a GPU profile's op times are the ops' launches on the host thread with the op observer attached, not "
                  "their kernels, and the observer stretches the iteration: the longer compute hides moves a real step "
                  "waits for (`tierpack experiment --compute-time` scales the ops to a measured step)");
  return out;
}

double copy_ns(const CostModel& cost, std::uint64_t bytes_to_fast, std::uint64_t bytes_to_slow) {
  const double up = cost.to_fast_bytes_per_ns > 0 ? static_cast<double>(bytes_to_fast) / cost.to_fast_bytes_per_ns : 0;
  const double down = cost.to_slow_bytes_per_ns > 0 ? static_cast<double>(bytes_to_slow) / cost.to_slow_bytes_per_ns : 0;
  if (!cost.full_duplex) return up + down;
  const double both =
      cost.both_ways_bytes_per_ns > 0 ? static_cast<double>(bytes_to_fast + bytes_to_slow) / cost.both_ways_bytes_per_ns : 0;
  return std::max({up, down, both});
}

std::string hidden_moves_reason(const CostModel& cost, std::uint64_t bytes_to_fast, std::uint64_t bytes_to_slow,
                                double step_ns, double baseline_ns) {
  if (bytes_to_fast + bytes_to_slow == 0 || !(baseline_ns > 0) || step_ns > 1.01 * baseline_ns) return {};
  const double copies = copy_ns(cost, bytes_to_fast, bytes_to_slow);
  return "the moves (" + format_bytes(bytes_to_slow) + " out, " + format_bytes(bytes_to_fast) + " back, " +
         format_duration_ns(copies) + " of copying) hide under " + format_duration_ns(baseline_ns) +
         " of profiled compute: that holds only while a real step computes as long and copies do not slow compute "
         "(not modelled)";
}

std::vector<std::string> lower_bound_reasons(const Profile& profile, const Plan& plan, bool op_times_scaled) {
  std::vector<std::string> out = op_time_reasons(profile, plan.device, op_times_scaled);
  if (plan.slow_tier == plan.fast_tier || plan.fast_tier >= plan.topology.tiers.size() ||
      plan.slow_tier >= plan.topology.tiers.size())
    return out;
  TierChoice tiers;
  tiers.fast = plan.fast_tier;
  tiers.slow = plan.slow_tier;
  const CostModel cost = make_cost_model(plan.topology, tiers, plan.device);
  const auto& pr = plan.prediction;
  if (auto r = hidden_moves_reason(cost, pr.bytes_to_fast, pr.bytes_to_slow, pr.step_ns, pr.baseline_step_ns); !r.empty())
    out.push_back(std::move(r));
  return out;
}

}  // namespace tierpack::placer

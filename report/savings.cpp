// What tierpack would save, from the planner (see savings.hpp).
#include "report/savings.hpp"

#include <algorithm>
#include <future>

#include "core/error.hpp"
#include "placer/cost_model.hpp"
#include "placer/planner.hpp"

namespace tierpack::report {

// Note [Savings from the planner]
// Each row is a real plan: make_plan() classifies, packs page groups, assigns tiers under the budget,
// schedules the moves and predicts the step time with the simulator, exactly as `tierpack plan`
// does. The row reports the plan's predicted fast-tier peak (what the budget saves against the
// profiled peak), the bytes it moves each way per iteration, the copy time of the busier direction
// alone, and the predicted step and stall times. "fits" is false when the plan's fast-tier peak is
// above the budget (the planner spills what it cannot fit to be read in place, and says so in its
// notes). The tier model is the one `--tiers` names, else the plan's, else the profile's (see
// fill_savings in summary.cpp).
std::vector<SavingsRow> plan_at_budgets(const Profile& profile, const TierModel& model, int device, std::uint64_t peak,
                                        const std::vector<std::pair<Budget, std::string>>& budgets) {
  const double bw = fast_to_slow_bandwidth(model, device);
  auto one = [&](const Budget& budget, const std::string& label) {
    SavingsRow row;
    row.label = label;
    row.source = "planner";
    placer::PlanOptions opts;
    opts.device = device;
    opts.fast_budget = budget;
    try {
      const Plan plan = placer::make_plan(profile, model, opts);
      const auto& pr = plan.prediction;
      row.budget_bytes = plan.fast_budget_bytes;
      row.fast_peak_bytes = pr.fast_peak_bytes;
      row.saved_bytes = peak > pr.fast_peak_bytes ? peak - pr.fast_peak_bytes : 0;
      row.fits = pr.fast_peak_bytes <= plan.fast_budget_bytes;
      row.bytes_to_slow = pr.bytes_to_slow;
      row.bytes_to_fast = pr.bytes_to_fast;
      row.moves = plan.schedule.size();
      row.copy_ns = bw > 0 ? static_cast<double>(std::max(pr.bytes_to_fast, pr.bytes_to_slow)) / bw * 1e9 : 0;
      row.step_ns = pr.step_ns;
      row.stall_ns = pr.stall_ns;
      for (const auto& n : plan.notes) row.note += (row.note.empty() ? "" : "; ") + n;
    } catch (const logic_error& e) {
      row.fits = false;
      row.note = std::string("no plan: ") + e.what();
    }
    return row;
  };
  std::vector<std::future<SavingsRow>> pending;
  for (const auto& [budget, label] : budgets) pending.push_back(std::async(std::launch::async, one, budget, label));
  std::vector<SavingsRow> rows;
  for (auto& f : pending) rows.push_back(f.get());
  return rows;
}

double fast_to_slow_bandwidth(const TierModel& model, int device) {
  try {
    const auto tiers = placer::choose_tiers(model, device);
    if (tiers.slow == kNoTier) return 0;
    const Link* l = model.link(tiers.fast, tiers.slow);
    return l ? l->bandwidth_bytes_per_s : 0;
  } catch (const logic_error&) {
    return 0;
  }
}

}  // namespace tierpack::report

// Calibrated-model experiment (see model_experiment.hpp).
#include "experiment/model_experiment.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "experiment/first_touch_model.hpp"
#include "placer/baselines.hpp"
#include "placer/prediction_bound.hpp"
#include "placer/replay.hpp"

namespace tierpack::experiment {

std::vector<std::string> parse_policies(const std::string& text) {
  std::vector<std::string> out;
  if (text == "all") {
    for (const char* p : kPolicies) out.emplace_back(p);
    return out;
  }
  for (std::size_t pos = 0; pos <= text.size();) {
    const std::size_t end = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, end - pos);
    pos = end + 1;
    if (std::find_if(std::begin(kPolicies), std::end(kPolicies), [&](const char* p) { return item == p; }) == std::end(kPolicies)) {
      std::string known;
      for (const char* p : kPolicies) known += std::string(known.empty() ? "" : ", ") + p;
      throw logic_error("unknown policy '" + item + "' (known: all, " + known + ")");
    }
    if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
  }
  // Slowdowns are relative to all-fast: always run it.
  if (std::find(out.begin(), out.end(), "all-fast") == out.end()) out.insert(out.begin(), "all-fast");
  return out;
}

namespace {

ResultRow to_row(const placer::ReplayResult& r, const std::string& policy, const BudgetPoint& b, std::uint64_t budget,
                 std::uint64_t peak, double reference) {
  ResultRow row;
  row.policy = policy;
  row.budget_label = b.label;
  row.budget_bytes = budget;
  row.budget_fraction = peak > 0 ? static_cast<double>(budget) / static_cast<double>(peak) : 1.0;
  row.fits = r.fits;
  row.step_ns = r.step_ns;
  row.slowdown = reference > 0 ? r.step_ns / reference : 0;
  row.stall_ns = r.stall_ns;
  row.in_place_ns = r.in_place_ns;
  row.bytes_to_fast = r.bytes_to_fast;
  row.bytes_to_slow = r.bytes_to_slow;
  row.in_place_bytes = r.in_place_bytes;
  row.fast_peak_bytes = r.fast_peak_bytes;
  row.mixed_class_pages = r.mixed_class_pages;
  row.note = r.note;
  if (r.budget_overruns) row.note += (row.note.empty() ? "" : "; ") + std::to_string(r.budget_overruns) + " budget overrun(s)";
  return row;
}

bool wanted(const ModelOptions& o, const char* policy) {
  return std::find(o.policies.begin(), o.policies.end(), policy) != o.policies.end();
}

}  // namespace

ExperimentResult run_model_experiment(const Profile& profile, const TierModel& model, const ModelOptions& opts) {
  ExperimentResult res;
  res.mode = "model";
  const int device = opts.plan.device;
  res.peak_bytes = profile.peak_bytes(device);
  std::size_t step = 0;
  const std::size_t steps = opts.budgets.size();
  for (const BudgetPoint& b : opts.budgets) {
    ++step;
    placer::PlanOptions o = opts.plan;
    o.fast_budget = b.budget;
    const std::uint64_t budget = placer::resolve_budget(profile, model, o);
    o.fast_budget = Budget{budget, std::nullopt};
    const placer::BaselineSetup setup = placer::make_baseline_setup(model, device, budget);
    if (res.fast_tier.empty()) {
      res.fast_tier = model.at(setup.tiers.fast).name;
      res.slow_tier = setup.tiers.slow == kNoTier ? "-" : model.at(setup.tiers.slow).name;
      if (!setup.tiers.note.empty()) res.notes.push_back(setup.tiers.note);
      for (const auto& a : setup.cost.assumptions) res.notes.push_back("assumed: " + a);
    }
    auto progress = [&](const std::string& policy) {
      if (opts.progress)
        opts.progress("[model " + std::to_string(step) + "/" + std::to_string(steps) + "] budget " + b.label + " (" +
                      format_bytes(budget) + "): " + policy);
    };
    progress("all-fast");
    const placer::ReplayResult ref = placer::replay_all_fast(profile, setup);
    const double reference = ref.step_ns;
    res.reference_step_ns = reference;
    for (const char* policy : kPolicies) {
      if (!wanted(opts, policy)) continue;
      const std::string name = policy;
      if (name != "all-fast") progress(name);
      placer::ReplayResult r;
      if (name == "all-fast") {
        r = ref;
      } else if (name == "first-touch") {
        r = replay_first_touch_pages(profile, setup);
      } else if (name == "interleave") {
        r = placer::replay_interleave(profile, setup);
      } else if (name == "preferred-fast") {
        // The placer's per-tensor first-touch: a tensor's pages go fast while the budget has room when
        // it is born, the rest spill; memory freed by a dead tensor is available again.
        r = placer::replay_first_touch(profile, setup);
      } else if (name == "lru-demand") {
        r = placer::replay_lru(profile, setup);
      } else if (name == "kernel-tiering" || name == "damon") {
        ResultRow row;
        row.policy = name;
        row.budget_label = b.label;
        row.budget_bytes = budget;
        row.budget_fraction = res.peak_bytes ? static_cast<double>(budget) / static_cast<double>(res.peak_bytes) : 1.0;
        row.available = false;
        row.note = name == "kernel-tiering"
                       ? "not available in model mode: the simulator has no model of NUMA-balancing promotion (hint-fault "
                         "sampling) or reclaim-driven demotion; measure it in real mode"
                       : "not available in model mode: the simulator has no model of DAMON's sampled access monitoring "
                         "and migrate_hot/migrate_cold schemes; measure it in real mode";
        res.rows.push_back(row);
        continue;
      } else {
        o.policy = name;
        const Plan plan = placer::make_plan(profile, model, o);
        r = placer::replay_plan(profile, plan, model);
        if (r.mixed_class_groups) r.note += (r.note.empty() ? "" : "; ") + std::to_string(r.mixed_class_groups) + " mixed-class group(s)";
      }
      res.rows.push_back(to_row(r, name, b, budget, res.peak_bytes, reference));
    }
  }
  // Note [Lower-bound predictions]: the profile's op times, then the moves that hide under them.
  res.lower_bound = placer::op_time_reasons(profile, device, opts.op_times_scaled);
  std::size_t moving = 0, hidden = 0;
  for (const auto& row : res.rows) {
    if (!row.available || row.policy == "all-fast" || row.bytes_migrated() == 0) continue;
    ++moving;
    if (row.slowdown <= 1.01) ++hidden;
  }
  if (hidden)
    res.lower_bound.push_back(std::to_string(hidden) + " of the " + std::to_string(moving) +
                              " predictions that migrate bytes are within 1% of all-fast: their moves hide under the "
                              "profiled compute, which holds only while a real step computes as long and copies do not "
                              "slow compute (not modelled)");
  return res;
}

}  // namespace tierpack::experiment

// Policy comparison for `tierpack replay` (see compare.hpp).
#include "placer/compare.hpp"

#include <cstdio>

#include "placer/baselines.hpp"
#include "placer/cost_model.hpp"

namespace tierpack::placer {

Comparison compare_policies(const Profile& profile, const TierModel& model, const PlanOptions& opts, const Plan* plan) {
  Comparison c;
  PlanOptions o = opts;
  if (plan) o.device = plan->device;
  const std::uint64_t budget = plan && !opts.fast_budget.is_set() ? plan->fast_budget_bytes : resolve_budget(profile, model, o);
  o.fast_budget = Budget{budget, std::nullopt};
  c.device = o.device;
  c.budget_bytes = budget;
  c.peak_bytes = profile.peak_bytes(o.device);
  const BaselineSetup setup = make_baseline_setup(model, o.device, budget);
  c.fast_tier = model.at(setup.tiers.fast).name;
  c.slow_tier = setup.tiers.slow == kNoTier ? "-" : model.at(setup.tiers.slow).name;
  if (!setup.tiers.note.empty()) c.notes.push_back(setup.tiers.note);
  for (const auto& a : setup.cost.assumptions) c.notes.push_back("assumed: " + a);

  c.rows.push_back(replay_all_fast(profile, setup));
  c.reference_step_ns = c.rows.back().step_ns;
  c.rows.push_back(replay_first_touch(profile, setup));
  c.rows.push_back(replay_interleave(profile, setup));
  c.rows.push_back(replay_lru(profile, setup));
  PlanOptions agnostic = o;
  agnostic.policy = "page-agnostic";
  const Plan agnostic_plan = make_plan(profile, model, agnostic);
  c.rows.push_back(replay_plan(profile, agnostic_plan, model));
  c.rows.back().policy = "page-agnostic";
  if (plan) {
    if (plan->fast_budget_bytes != budget)
      c.notes.push_back("the plan was made for a budget of " + format_bytes(plan->fast_budget_bytes) +
                        "; it is replayed with that budget, the other policies with " + format_bytes(budget));
    c.rows.push_back(replay_plan(profile, *plan, model));
    c.rows.back().policy = "tierpack (" + plan->policy + ", from file)";
  } else {
    PlanOptions aware = o;
    aware.policy = "page-aware";
    const Plan aware_plan = make_plan(profile, model, aware);
    c.rows.push_back(replay_plan(profile, aware_plan, model));
    c.rows.back().policy = "tierpack (page-aware)";
  }
  return c;
}

std::string format_comparison(const Comparison& c) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "device %s, peak %s; fast tier %s with a budget of %s, slow tier %s\n",
                c.device >= 0 ? ("GPU " + std::to_string(c.device)).c_str() : "host", format_bytes(c.peak_bytes).c_str(),
                c.fast_tier.c_str(), format_bytes(c.budget_bytes).c_str(), c.slow_tier.c_str());
  out += line;
  std::snprintf(line, sizeof line, "%-30s %10s %9s %10s %10s %11s %11s %11s %11s %6s  %s\n", "policy", "step", "slowdown", "stall",
                "in place", "to fast", "to slow", "read slow", "fast peak", "mixed", "note");
  out += line;
  for (const auto& r : c.rows) {
    char slow[32];
    std::snprintf(slow, sizeof slow, "%.3fx", c.reference_step_ns > 0 ? r.step_ns / c.reference_step_ns : 0.0);
    std::string note = r.note;
    if (!r.fits) note = "does not fit: needs " + format_bytes(r.fast_peak_bytes) + " > budget " + format_bytes(c.budget_bytes);
    else if (r.policy == "all-fast") note = "reference" + (note.empty() ? "" : "; " + note);
    if (r.budget_overruns) note += (note.empty() ? "" : "; ") + std::to_string(r.budget_overruns) + " budget overrun(s)";
    std::snprintf(line, sizeof line, "%-30s %10s %9s %10s %10s %11s %11s %11s %11s %6llu  %s\n", r.policy.c_str(),
                  format_duration_ns(r.step_ns).c_str(), slow, format_duration_ns(r.stall_ns).c_str(),
                  format_duration_ns(r.in_place_ns).c_str(), format_bytes(r.bytes_to_fast).c_str(),
                  format_bytes(r.bytes_to_slow).c_str(), format_bytes(r.in_place_bytes).c_str(), format_bytes(r.fast_peak_bytes).c_str(),
                  static_cast<unsigned long long>(r.mixed_class_pages), note.c_str());
    out += line;
  }
  out += "in place: time lost reading the slow tier in place; to fast / to slow: bytes copied per iteration;\n"
         "read slow: bytes ops touched on the slow tier; mixed: pages holding live tensors of different lifetime\n"
         "classes at the same time; slowdown is against all-fast\n";
  for (const auto& n : c.notes) out += "note: " + n + "\n";
  return out;
}

}  // namespace tierpack::placer

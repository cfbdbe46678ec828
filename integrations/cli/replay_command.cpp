// `tierpack replay`: simulates a profile under tierpack's plan and under baseline policies on a tier
// model (placer/compare.hpp) and prints the comparison, or writes it as JSON.
#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/file_envelope.hpp"
#include "core/units.hpp"
#include "core/plan.hpp"
#include "core/profile.hpp"
#include "integrations/cli/args.hpp"
#include "integrations/cli/commands.hpp"
#include "integrations/cli/placer_args.hpp"
#include "placer/compare.hpp"
#include "placer/plan_check.hpp"

namespace tierpack::cli {

const ArgSpec& replay_spec() {
  static const ArgSpec spec{
      .description =
          "  Simulates the profiled iteration on a tier model under tierpack's plan and under baseline\n"
          "  policies (all-fast, first-touch, interleave, LRU-on-demand, page-agnostic), and prints step time,\n"
          "  slowdown against all-fast, stalls, bytes moved each way, fast-tier peak and mixed-class pages.\n"
          "  What is modelled and what is not: docs/simulator.md.\n",
      .options = {
          {"--plan", "FILE", "replay this plan as tierpack's row (default: plan now, page-aware)"},
          {"--tiers", "SPEC|FILE|preset:NAME", std::string(kTiersHelp) + "; with --plan: the plan's tiers"},
          {"--gpu-budget", "SIZE|PCT", "fast-tier budget on a GPU: size or percentage of the peak (default: the "
                                       "plan's, else the fast tier's capacity)"},
          {"--fast-budget", "SIZE|PCT", "fast-tier budget, as --gpu-budget, for host tiers; not with --gpu-budget"},
          {"--device", "N|host", "GPU ordinal or 'host' (default: the plan's, else the device with most bytes)"},
          {"--budgets", "B,B,...", "one comparison per fast-tier budget (100%,50%,30%,20% or sizes), printed as a "
                                   "budget-vs-slowdown table (with --json: one comparison per budget); replaces "
                                   "--plan, --gpu-budget and --fast-budget"},
          {"--json", "", "machine-readable output, with fast-tier occupancy over time per policy"},
          {"-o", "FILE", "write the output to FILE"},
      },
      .positional = "run.tpk",
      .positional_help = "the profile to replay (tierpack profile)",
      .min_positional = 1,
      .max_positional = 1};
  return spec;
}

namespace {

nlohmann::json to_json(const placer::Comparison& c) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : c.rows) {
    // Occupancy over time, thinned to at most 512 samples (keeping each window's maximum).
    nlohmann::json occ = nlohmann::json::array();
    const std::size_t stride = std::max<std::size_t>(1, (r.occupancy.size() + 511) / 512);
    for (std::size_t i = 0; i < r.occupancy.size(); i += stride) {
      std::uint64_t peak = 0;
      for (std::size_t k = i; k < std::min(r.occupancy.size(), i + stride); ++k) peak = std::max(peak, r.occupancy[k].fast_bytes);
      occ.push_back({r.occupancy[std::min(r.occupancy.size(), i + stride) - 1].time_ns, peak});
    }
    rows.push_back({{"policy", r.policy},
                    {"fits", r.fits},
                    {"step_ns", r.step_ns},
                    {"slowdown", c.reference_step_ns > 0 ? r.step_ns / c.reference_step_ns : 0.0},
                    {"stall_ns", r.stall_ns},
                    {"in_place_ns", r.in_place_ns},
                    {"bytes_to_fast", r.bytes_to_fast},
                    {"bytes_to_slow", r.bytes_to_slow},
                    {"in_place_bytes", r.in_place_bytes},
                    {"moves_to_fast", r.moves_to_fast},
                    {"moves_to_slow", r.moves_to_slow},
                    {"fast_peak_bytes", r.fast_peak_bytes},
                    {"mixed_class_pages", r.mixed_class_pages},
                    {"mixed_class_groups", r.mixed_class_groups},
                    {"budget_overruns", r.budget_overruns},
                    {"note", r.note},
                    {"occupancy", occ}});
  }
  return {{"device", c.device},
          {"fast_tier", c.fast_tier},
          {"slow_tier", c.slow_tier},
          {"budget_bytes", c.budget_bytes},
          {"peak_bytes", c.peak_bytes},
          {"reference_step_ns", c.reference_step_ns},
          {"rows", rows},
          {"notes", c.notes}};
}

}  // namespace

// One row per budget: the slowdown of each policy, and what page-aware packing changes.
std::string format_budget_table(const std::vector<std::pair<std::string, placer::Comparison>>& runs) {
  std::string out;
  char line[512];
  const auto& first = runs.front().second;
  std::snprintf(line, sizeof line, "slowdown against all-fast; fast tier %s, slow tier %s; peak %s\n", first.fast_tier.c_str(),
                first.slow_tier.c_str(), format_bytes(first.peak_bytes).c_str());
  out += line;
  std::snprintf(line, sizeof line, "%-18s", "budget");
  out += line;
  for (const auto& r : first.rows) {
    std::snprintf(line, sizeof line, " %13.13s", r.policy == "tierpack (page-aware)" ? "page-aware" : r.policy.c_str());
    out += line;
  }
  out += "   copied agnostic/aware     mixed pages agnostic/aware\n";
  for (const auto& [label, c] : runs) {
    std::snprintf(line, sizeof line, "%-18s", (label + " (" + format_bytes(c.budget_bytes) + ")").c_str());
    out += line;
    for (const auto& r : c.rows) {
      if (!r.fits) std::snprintf(line, sizeof line, " %13s", "does not fit");
      else std::snprintf(line, sizeof line, " %12.3fx", c.reference_step_ns > 0 ? r.step_ns / c.reference_step_ns : 0.0);
      out += line;
    }
    const auto& agnostic = c.rows[c.rows.size() - 2];
    const auto& aware = c.rows.back();
    std::snprintf(line, sizeof line, "   %10s / %-10s  %8llu / %llu\n", format_bytes(agnostic.bytes_to_fast + agnostic.bytes_to_slow).c_str(),
                  format_bytes(aware.bytes_to_fast + aware.bytes_to_slow).c_str(),
                  static_cast<unsigned long long>(agnostic.mixed_class_pages), static_cast<unsigned long long>(aware.mixed_class_pages));
    out += line;
  }
  for (const auto& n : first.notes) out += "note: " + n + "\n";
  return out;
}

int run_replay(const Args& args) {
  const Profile profile = read_profile(args.positional[0]);
  std::optional<Plan> plan;
  if (auto path = args.get("--plan")) {
    plan = read_plan(*path);
    // Another profile's plan is refused by its identity first (Note [Profile identity]), then by structure;
    // a plan of unknown identity that passes the structural check is used with a warning.
    const std::string warning = check_profile_identity(profile, args.positional[0], plan->profile_id, "plan", *path);
    const auto check = placer::check_plan(profile, *plan, 1);
    if (!check.ok()) throw logic_error(*path + " does not fit " + args.positional[0] + ": " + check.problems.front());
    if (!warning.empty()) std::fprintf(stderr, "tierpack replay: warning: %s\n", warning.c_str());
  }
  const PlannerInputs in = planner_inputs(args, profile, plan ? &*plan : nullptr);
  std::string text;
  if (auto list = args.get("--budgets")) {
    if (plan || args.has("--gpu-budget") || args.has("--fast-budget"))
      throw usage_error("--budgets replaces --plan, --gpu-budget and --fast-budget");
    std::vector<BudgetPoint> budgets;
    try {
      budgets = parse_budget_list(*list);
    } catch (const logic_error& e) {
      throw usage_error(std::string("--budgets: ") + e.what());
    }
    std::vector<std::pair<std::string, placer::Comparison>> runs;
    for (const auto& [label, budget] : budgets) {
      placer::PlanOptions o = in.options;
      o.fast_budget = budget;
      runs.emplace_back(label, placer::compare_policies(profile, in.model, o));
    }
    if (args.has("--json")) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& [label, c] : runs) j.push_back({{"budget", label}, {"comparison", to_json(c)}});
      text = j.dump(1) + "\n";
    } else {
      text = format_budget_table(runs);
    }
  } else {
    const auto comparison = placer::compare_policies(profile, in.model, in.options, plan ? &*plan : nullptr);
    text = args.has("--json") ? to_json(comparison).dump(1) + "\n" : placer::format_comparison(comparison);
  }
  if (auto out = args.get("-o")) write_file_atomic(*out, text);
  else std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace tierpack::cli

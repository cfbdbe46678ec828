// `tierpack plan`: makes a plan from a profile (placer/planner.hpp), prints what moves when and the
// predicted cost, and writes the plan file.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "core/error.hpp"
#include "core/plan.hpp"
#include "core/profile.hpp"
#include "integrations/cli/args.hpp"
#include "integrations/cli/commands.hpp"
#include "integrations/cli/placer_args.hpp"
#include "placer/planner.hpp"
#include "placer/prediction_bound.hpp"

namespace tierpack::cli {

const ArgSpec& plan_spec() {
  static const ArgSpec spec{
      .description =
          "  Plans where each tensor of the profiled iteration lives and when page groups move between tiers,\n"
          "  keeping the fast tier within the budget at every op, and predicts the cost with the simulator.\n",
      .options = {
          {"--gpu-budget", "SIZE|PCT", "GPU memory budget (24G, 512M) or percentage of the profiled peak (60%)"},
          {"--fast-budget", "SIZE|PCT", "budget of the fast tier, for host runs on NUMA/CXL tiers (or any run); "
                                        "not with --gpu-budget"},
          {"--tiers", "SPEC|FILE|preset:NAME", kTiersHelp},
          {"--policy", "P", "page-aware (default) or page-agnostic (same schedule, allocation-order packing)"},
          {"--device", "N|host", "whose tensors to place: a GPU ordinal or 'host' (default: the one with most bytes)"},
          {"--group-size", "SIZE", "target size of shared page groups (default 32M on a GPU, 2M on the host)"},
          {"-o", "FILE", "write the plan (JSON, docs/formats.md)"},
      },
      .positional = "run.tpk",
      .positional_help = "the profile to plan (tierpack profile)",
      .min_positional = 1,
      .max_positional = 1};
  return spec;
}

namespace {

std::string op_label(const Profile& p, OpIndex op) {
  if (op == kBeforeIteration) return "iteration start";
  if (op == kAfterIteration) return "iteration end";
  if (op < 0 || static_cast<std::size_t>(op) >= p.ops.size()) return "op " + std::to_string(op);
  return "op " + std::to_string(op) + " (" + p.ops[static_cast<std::size_t>(op)].name + ")";
}

// A host tier whose NUMA node this machine lacks: `tierpack run` here emulates it on node 0 (Note [Tiers
// this machine lacks] in runtime/host/run_controller.hpp). "" when the node is here, or when this
// machine's nodes cannot be read.
std::string emulated_here(const Tier& t) {
  if ((t.kind != TierKind::host_dram && t.kind != TierKind::far_memory) || t.numa_node < 0) return "";
  std::error_code ec;
  const std::string nodes = "/sys/devices/system/node/node";
  if (!std::filesystem::exists(nodes + "0", ec) || std::filesystem::exists(nodes + std::to_string(t.numa_node), ec)) return "";
  return " (EMULATED here: NUMA node " + std::to_string(t.numa_node) +
         " is not on this machine; a run here puts it on node 0, with real budget and moves but no slower memory, so it "
         "measures the mechanism, not this prediction)";
}

void print_summary(const Profile& profile, const Plan& plan) {
  const auto& pr = plan.prediction;
  const auto& topo = plan.topology;
  std::printf("plan (%s) for %s: fast tier %s%s, budget %s; slow tier %s%s\n", plan.policy.c_str(),
              plan.device >= 0 ? ("GPU " + std::to_string(plan.device)).c_str() : "host", topo.at(plan.fast_tier).name.c_str(),
              emulated_here(topo.at(plan.fast_tier)).c_str(), format_bytes(plan.fast_budget_bytes).c_str(),
              topo.at(plan.slow_tier).name.c_str(),
              plan.slow_tier == plan.fast_tier ? "" : emulated_here(topo.at(plan.slow_tier)).c_str());
  std::map<TensorClass, std::pair<std::size_t, std::uint64_t>> per_class;
  for (const auto& g : plan.groups) {
    auto& e = per_class[g.cls];
    ++e.first;
    e.second += g.bytes;
  }
  std::printf("  %zu tensors in %zu page groups:", plan.placements.size(), plan.groups.size());
  for (const auto& [cls, e] : per_class)
    std::printf(" %s %zu (%s)", std::string(to_string(cls)).c_str(), e.first, format_bytes(e.second).c_str());
  std::printf("\n  fast-tier peak %s (all resident: %s)\n", format_bytes(pr.fast_peak_bytes).c_str(),
              format_bytes(pr.natural_peak_bytes).c_str());
  if (plan.empty()) {
    std::printf("  nothing moves\n");
  } else {
    std::size_t evictions = 0, prefetches = 0;
    for (const auto& m : plan.schedule) (m.kind == MoveKind::evict ? evictions : prefetches)++;
    std::printf("  %zu evictions (%s to %s), %zu prefetches (%s to %s) per iteration\n", evictions,
                format_bytes(pr.bytes_to_slow).c_str(), topo.at(plan.slow_tier).name.c_str(), prefetches,
                format_bytes(pr.bytes_to_fast).c_str(), topo.at(plan.fast_tier).name.c_str());
    // What moves when: the biggest moves, in schedule order.
    std::vector<std::size_t> order(plan.schedule.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return plan.schedule[a].bytes > plan.schedule[b].bytes; });
    order.resize(std::min<std::size_t>(order.size(), 8));
    std::sort(order.begin(), order.end());
    std::printf("  largest moves:\n");
    for (auto i : order) {
      const Move& m = plan.schedule[i];
      const auto& g = plan.groups[m.group];
      if (m.kind == MoveKind::evict)
        std::printf("    evict    group %-5u %-10s %10s after %s\n", unsigned(m.group), std::string(to_string(g.cls)).c_str(),
                    format_bytes(m.bytes).c_str(), op_label(profile, m.issue_after).c_str());
      else
        std::printf("    prefetch group %-5u %-10s %10s after %s, needed by %s\n", unsigned(m.group),
                    std::string(to_string(g.cls)).c_str(), format_bytes(m.bytes).c_str(), op_label(profile, m.issue_after).c_str(),
                    op_label(profile, m.needed_by).c_str());
    }
  }
  const double slow = pr.baseline_step_ns > 0 ? pr.step_ns / pr.baseline_step_ns : 1.0;
  const double other = std::max(0.0, pr.step_ns - pr.baseline_step_ns - pr.stall_ns);
  // Note [Lower-bound predictions]: a prediction that can only be too low says so, and why.
  const auto bound = placer::lower_bound_reasons(profile, plan);
  std::printf("  predicted step %s (profiled %s, %.3fx%s): stalls %s, reading in place and draining copies %s\n",
              format_duration_ns(pr.step_ns).c_str(), format_duration_ns(pr.baseline_step_ns).c_str(), slow,
              bound.empty() ? "" : ", a lower bound", format_duration_ns(pr.stall_ns).c_str(), format_duration_ns(other).c_str());
  for (const auto& b : bound) std::printf("  lower bound: %s\n", b.c_str());
  for (const auto& n : plan.notes) std::printf("  note: %s\n", n.c_str());
}

}  // namespace

int run_plan(const Args& args) {
  const Profile profile = read_profile(args.positional[0]);
  const PlannerInputs in = planner_inputs(args, profile, nullptr);
  const Plan plan = placer::make_plan(profile, in.model, in.options);
  print_summary(profile, plan);
  if (auto out = args.get("-o")) {
    write_plan(plan, *out);
    std::printf("wrote %s\n", out->c_str());
  }
  return 0;
}

}  // namespace tierpack::cli

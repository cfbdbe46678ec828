// The subcommand table (see commands.hpp). Add a line here when adding a <name>_command.cpp.
#include "integrations/cli/commands.hpp"

#include <cstdio>

namespace tierpack::cli {

std::span<const Command> commands() {
  static const Command table[] = {
      {"topo", "list the memory tiers of this machine (hwloc + CUDA)", topo_spec, run_topo},
      {"profile", "record a profile of a training command, or summarise one", profile_spec, run_profile},
      {"report", "offline report of a profile: HTML, Perfetto trace, memory_viz snapshot", report_spec, run_report},
      {"plan", "plan placement and migrations for a profile under a fast-tier budget", plan_spec, run_plan},
      {"run", "run a training command with its tensors placed and moved by plan (profile -> plan -> apply)", run_spec, run_run},
      {"replay", "simulate a profile under tierpack's plan and baseline policies on a tier model", replay_spec, run_replay},
      {"gpu-replay", "plan the GPU tier's recorded iteration again at other budgets: keep, offload or recompute per storage", gpu_replay_spec, run_gpu_replay},
      {"experiment", "compare placement policies across fast-tier budgets: calibrated model or real NUMA nodes", experiment_spec, run_experiment},
  };
  return table;
}

int run_command(const Command& command, const std::vector<std::string>& argv) {
  const Args args = parse_args(command.name, argv, command.spec());
  if (args.help) {
    std::fputs(usage(command.name, command.spec()).c_str(), stdout);
    return 0;
  }
  return command.run(args);
}

}  // namespace tierpack::cli

// The subcommand table (see commands.hpp). Add a line here when adding a <name>_command.cpp.
#include "integrations/cli/commands.hpp"

namespace tierpack::cli {

std::span<const Command> commands() {
  static const Command table[] = {
      {"topo", "list the memory tiers of this machine (hwloc + CUDA)", kTopoUsage, run_topo},
      {"profile", "record a profile of a training command, or summarise one", kProfileUsage, run_profile},
      {"report", "offline report of a profile: HTML, Perfetto trace, memory_viz snapshot", kReportUsage, run_report},
      {"plan", "plan placement and migrations for a profile under a fast-tier budget", kPlanUsage, run_plan},
      {"run", "run a training command with its tensors placed and moved by plan (profile -> plan -> apply)", kRunUsage, run_run},
      {"replay", "simulate a profile under tierpack's plan and baseline policies on a tier model", kReplayUsage, run_replay},
  };
  return table;
}

}  // namespace tierpack::cli

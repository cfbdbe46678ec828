// The subcommand table (see commands.hpp). Add a line here when adding a <name>_command.cpp.
#include "integrations/cli/commands.hpp"

namespace tierpack::cli {

std::span<const Command> commands() {
  static const Command table[] = {
      {"topo", "list the memory tiers of this machine (hwloc + CUDA)", kTopoUsage, run_topo},
      {"profile", "record a profile of a training command, or summarise one", kProfileUsage, run_profile},
      {"report", "offline report of a profile: HTML, Perfetto trace, memory_viz snapshot", kReportUsage, run_report},
  };
  return table;
}

}  // namespace tierpack::cli

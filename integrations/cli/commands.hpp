// The table of `tierpack` subcommands. A subcommand is a function from its arguments (after its
// name) to an exit status; it throws cli::usage_error for bad usage and tierpack::error for failures,
// which main() turns into one-line messages and exit codes (2 usage, 1 failure).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tierpack::cli {

struct Command {
  std::string_view name;
  std::string_view summary;  ///< one line for `tierpack --help`
  std::string_view usage;    ///< printed by `tierpack <name> --help`
  int (*run)(const std::vector<std::string>& args);
};

std::span<const Command> commands();

// One function per subcommand, each in <name>_command.cpp.
int run_topo(const std::vector<std::string>& args);
extern const char* const kTopoUsage;
int run_profile(const std::vector<std::string>& args);
extern const char* const kProfileUsage;
int run_report(const std::vector<std::string>& args);
extern const char* const kReportUsage;
int run_plan(const std::vector<std::string>& args);
extern const char* const kPlanUsage;
int run_replay(const std::vector<std::string>& args);
extern const char* const kReplayUsage;
int run_run(const std::vector<std::string>& args);
extern const char* const kRunUsage;

}  // namespace tierpack::cli

// The table of `tierpack` subcommands. A subcommand declares its options (an ArgSpec: what it accepts
// and its help, args.hpp) and is a function from its parsed arguments to an exit status; it throws
// cli::usage_error for bad usage and tierpack::error for failures, which main() turns into one-line
// messages and exit codes (2 usage, 1 failure).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "integrations/cli/args.hpp"

namespace tierpack::cli {

struct Command {
  std::string_view name;
  std::string_view summary;  ///< one line for `tierpack --help`
  const ArgSpec& (*spec)();  ///< its options; `tierpack <name> --help` is generated from them
  int (*run)(const Args& args);
};

std::span<const Command> commands();

/// Parses `argv` (after the subcommand's name) for `command` and runs it (the help when asked for).
int run_command(const Command& command, const std::vector<std::string>& argv);

// One spec and one function per subcommand, each in <name>_command.cpp.
const ArgSpec& topo_spec();
int run_topo(const Args& args);
const ArgSpec& profile_spec();
int run_profile(const Args& args);
const ArgSpec& report_spec();
int run_report(const Args& args);
const ArgSpec& plan_spec();
int run_plan(const Args& args);
const ArgSpec& replay_spec();
int run_replay(const Args& args);
const ArgSpec& gpu_replay_spec();
int run_gpu_replay(const Args& args);
const ArgSpec& run_spec();
int run_run(const Args& args);
const ArgSpec& experiment_spec();
int run_experiment(const Args& args);

}  // namespace tierpack::cli

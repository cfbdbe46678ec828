// `tierpack` entry point: dispatches to a subcommand and turns every failure into one line on
// stderr and a non-zero exit status (2 for usage errors, 1 for everything else).
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/version.hpp"
#include "integrations/cli/args.hpp"
#include "integrations/cli/commands.hpp"

namespace {

void print_help() {
  std::printf("tierpack %s: page-aware tensor placement across GPU, DRAM and CXL memory\n\n", TIERPACK_VERSION);
  std::printf("usage: tierpack <command> [options]\n\ncommands:\n");
  for (const auto& c : tierpack::cli::commands())
    std::printf("  %-10.*s %.*s\n", int(c.name.size()), c.name.data(), int(c.summary.size()), c.summary.data());
  std::printf("\n`tierpack <command> --help` describes a command.\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_help();
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version") {
    std::printf("tierpack %s\n", TIERPACK_VERSION);
    return 0;
  }
  for (const auto& c : tierpack::cli::commands()) {
    if (c.name != args[0]) continue;
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    try {
      return tierpack::cli::run_command(c, rest);  // --help before any "--" prints the command's usage
    } catch (const tierpack::cli::usage_error& e) {
      std::fprintf(stderr, "tierpack %s: %s\n", args[0].c_str(), e.what());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tierpack %s: error: %s\n", args[0].c_str(), e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "tierpack: unknown command '%s' (try tierpack --help)\n", args[0].c_str());
  return 2;
}

// The `tierpack` command line (issue 26, CLI parsing by hand): every subcommand's options are declared
// once (an ArgSpec in its <name>_command.cpp) and parsed by CLI11. These tests walk those tables, so a
// flag added, renamed or dropped is covered the day it changes: `--help` lists every option the command
// accepts, in the usage line and in the option list, and nothing else; a single-value flag given twice
// is a usage error naming it (it used to take the last value silently); an unknown flag is a usage error
// with the command's help hint; everything after `--` is the child's, untouched.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "integrations/cli/args.hpp"
#include "integrations/cli/commands.hpp"
#include "tests/support/run_command.hpp"

namespace fs = std::filesystem;

namespace {

using tierpack::cli::ArgSpec;
using tierpack::cli::Args;
using tierpack::cli::commands;
using tierpack::cli::parse_args;
using tierpack::cli::usage_error;
using tierpack::testing::CliRun;

class CliArgs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("tierpack_cli_args_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static CliRun tierpack(const std::string& args) {
    return tierpack::testing::run_split(std::string(TIERPACK_BINARY_DIR) + "/bin/tierpack " + args + " </dev/null",
                                        dir_.string());
  }
  /// Arguments that satisfy `spec`'s positionals, so that only the flags under test can be wrong.
  static std::string positionals(const ArgSpec& spec) { return spec.min_positional > 0 ? " x.tpk" : ""; }
  static void expect_usage_error(const std::string& args, const std::string& fragment) {
    SCOPED_TRACE("tierpack " + args);
    const CliRun r = tierpack(args);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << "names '" << fragment << "': " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }

  static fs::path dir_;
};
fs::path CliArgs::dir_;

TEST_F(CliArgs, EveryCommandHasAnOptionTable) {
  ASSERT_GE(commands().size(), 7u);
  for (const auto& c : commands()) {
    const ArgSpec& spec = c.spec();
    EXPECT_FALSE(spec.options.empty()) << c.name;
    std::set<std::string> names;
    for (const auto& o : spec.options) {
      EXPECT_TRUE(names.insert(o.name).second) << c.name << ": " << o.name << " declared twice";
      EXPECT_FALSE(o.help.empty()) << c.name << ": " << o.name << " has no help";
      EXPECT_EQ(o.name.rfind('-', 0), 0u) << o.name;
    }
  }
}

// The help is generated from the table: its usage line and its option list name every option with its
// value, and list no option the command does not accept.
TEST_F(CliArgs, HelpListsEveryOptionTheCommandAccepts) {
  for (const auto& c : commands()) {
    SCOPED_TRACE(std::string(c.name));
    const ArgSpec& spec = c.spec();
    const CliRun help = tierpack(std::string(c.name) + " --help");
    ASSERT_EQ(help.status, 0) << help.err;
    EXPECT_EQ(help.out, tierpack::cli::usage(c.name, spec)) << "the binary prints the table's help";
    const std::size_t options_at = help.out.find("\noptions:\n");
    ASSERT_NE(options_at, std::string::npos) << help.out;
    // The usage line: up to the first line that is not its continuation.
    std::string synopsis;
    {
      std::istringstream in(help.out);
      std::string line;
      const std::string lead = "usage: tierpack " + std::string(c.name);
      std::getline(in, line);
      ASSERT_EQ(line.rfind(lead, 0), 0u) << line;
      synopsis = line;
      while (std::getline(in, line) && line.rfind(std::string(lead.size(), ' '), 0) == 0) synopsis += " " + line;
      if (!spec.child.empty()) {
        EXPECT_NE(synopsis.find(spec.child), std::string::npos) << synopsis;
      }
    }
    std::set<std::string> listed;  // the options the option list starts a line with
    {
      std::istringstream in(help.out.substr(options_at + 10));
      for (std::string line; std::getline(in, line);) {
        if (line.rfind("  -", 0) != 0) continue;
        std::istringstream words(line);
        std::string name;
        words >> name;
        if (name.back() == ',') name.pop_back();  // "-h, --help"
        listed.insert(name);
      }
    }
    for (const auto& o : spec.options) {
      const std::string shown = o.value.empty() ? o.name : o.name + " " + o.value;
      EXPECT_NE(synopsis.find("[" + shown + "]"), std::string::npos) << shown << " in the usage line: " << synopsis;
      EXPECT_NE(help.out.find("\n  " + shown), std::string::npos) << shown << " in the option list:\n" << help.out;
      EXPECT_TRUE(listed.count(o.name)) << o.name;
    }
    for (const auto& name : listed) {
      if (name == "-h") continue;
      const bool declared = std::any_of(spec.options.begin(), spec.options.end(), [&](const auto& o) { return o.name == name; });
      EXPECT_TRUE(declared) << "the help lists " << name << ", which " << c.name << " does not accept";
    }
    if (!spec.positional.empty()) {
      EXPECT_NE(synopsis.find(spec.positional), std::string::npos) << synopsis;
      EXPECT_NE(help.out.find("\n  " + spec.positional + " "), std::string::npos) << help.out;
    }
  }
}

// Every option in the table is accepted, in both spellings of a value, and reaches the command.
TEST_F(CliArgs, EveryDeclaredOptionParses) {
  for (const auto& c : commands()) {
    const ArgSpec& spec = c.spec();
    for (const auto& o : spec.options) {
      SCOPED_TRACE(std::string(c.name) + " " + o.name);
      std::vector<std::string> argv;
      if (spec.min_positional > 0) argv.push_back("x.tpk");
      if (o.value.empty()) {
        argv.push_back(o.name);
        const Args a = parse_args(c.name, argv, spec);
        EXPECT_TRUE(a.has(o.name));
        EXPECT_EQ(a.switches.count(o.name), 1u);
        continue;
      }
      argv.insert(argv.end(), {o.name, "v1"});
      EXPECT_EQ(parse_args(c.name, argv, spec).get(o.name), "v1");
      argv.pop_back(), argv.pop_back();
      argv.push_back(o.name + "=v2");
      EXPECT_EQ(parse_args(c.name, argv, spec).get(o.name), "v2");
    }
  }
}

TEST_F(CliArgs, ASingleValueFlagGivenTwiceIsAUsageErrorNamingIt) {
  // Through the binary: exit 2, one line, the flag named, for every single-value flag of every command.
  for (const auto& c : commands()) {
    const ArgSpec& spec = c.spec();
    const std::string child = spec.child.empty() ? "" : " -- true";
    for (const auto& o : spec.options) {
      if (o.value.empty()) continue;
      expect_usage_error(std::string(c.name) + positionals(spec) + " " + o.name + " 1 " + o.name + "=2" + child,
                         "tierpack " + std::string(c.name) + ": " + o.name + " given twice");
    }
  }
  expect_usage_error("run --fast-budget 50% --fast-budget 4G -- true", "tierpack run: --fast-budget given twice");
  expect_usage_error("plan x.tpk -o a.json -o b.json -o c.json", "-o given 3 times");
  // In process, the same words.
  try {
    parse_args("run", {"--fast-budget", "50%", "--quiet", "--fast-budget", "4G", "--", "true"}, tierpack::cli::run_spec());
    ADD_FAILURE() << "no error";
  } catch (const usage_error& e) {
    EXPECT_NE(std::string(e.what()).find("--fast-budget given twice"), std::string::npos) << e.what();
  }
  // A switch given twice means the same as once.
  EXPECT_TRUE(parse_args("topo", {"--json", "--json"}, tierpack::cli::topo_spec()).has("--json"));
}

TEST_F(CliArgs, UnknownFlagsAndStrayArgumentsAreUsageErrorsWithTheCommandsHelpHint) {
  for (const auto& c : commands()) {
    const std::string name(c.name);
    const std::string child = c.spec().child.empty() ? "" : " -- true";
    expect_usage_error(name + positionals(c.spec()) + " --bogus 1" + child,
                       "tierpack " + name + ": unknown flag '--bogus' (try tierpack " + name + " --help)");
    expect_usage_error(name + positionals(c.spec()) + " --bogus=1" + child, "unknown flag '--bogus'");
    expect_usage_error(name + " -q", "unknown flag '-q'");
  }
  // A near miss names the flag that was probably meant.
  expect_usage_error("run --fast-budgte 50% -- true", "unknown flag '--fast-budgte' (did you mean --fast-budget?");
  expect_usage_error("topo extra", "unexpected argument 'extra' (try tierpack topo --help)");
  expect_usage_error("plan a.tpk b.tpk", "unexpected argument 'b.tpk'");
  {
    // `report` takes up to 64 profiles (the ranks of a job).
    std::vector<std::string> argv;
    for (int i = 0; i < 64; ++i) argv.push_back("r" + std::to_string(i) + ".tpk");
    EXPECT_EQ(parse_args("report", argv, tierpack::cli::report_spec()).positional, argv);
    argv.push_back("r64.tpk");
    EXPECT_THROW(parse_args("report", argv, tierpack::cli::report_spec()), usage_error);
  }
  expect_usage_error("plan", "missing argument run.tpk");
  expect_usage_error("topo --xml", "flag --xml needs a value");
  expect_usage_error("topo --json=yes", "flag --json takes no value");
  expect_usage_error("topo -- true", "runs no child command");
  expect_usage_error("run --fast-budget 50% --", "missing command after '--'");
}

// Everything after the first `--` belongs to the child, even words that are tierpack's own flags.
TEST_F(CliArgs, EverythingAfterTheSeparatorIsTheChildsUntouched) {
  const Args a = parse_args("run", {"--json", "--", "cmd", "--fast-budget", "x", "--", "--help", "-o"},
                            tierpack::cli::run_spec());
  EXPECT_EQ(a.child, (std::vector<std::string>{"cmd", "--fast-budget", "x", "--", "--help", "-o"}));
  EXPECT_FALSE(a.has("--fast-budget"));
  EXPECT_FALSE(a.has("-o"));
  EXPECT_FALSE(a.help);
  EXPECT_TRUE(a.has("--json"));
  const Args p = parse_args("profile", {"-o", "x.tpk", "--", "python3", "train.py", "--warmup", "3"},
                            tierpack::cli::profile_spec());
  EXPECT_EQ(p.child, (std::vector<std::string>{"python3", "train.py", "--warmup", "3"}));
  EXPECT_FALSE(p.has("--warmup"));

  // Through the binary: the child writes its arguments, one per line. (tierpack launches a command only
  // with its torch integration built; this one is not a torch program, so the run itself fails after.)
  if (!fs::exists(fs::path(TIERPACK_BINARY_DIR) / "lib" / "libtierpack_torch.so")) GTEST_SKIP() << "no torch integration";
  const std::string out = (dir_ / "child_args.txt").string();
  const CliRun r = tierpack("run --quiet -- /bin/sh -c 'for a; do echo \"$a\"; done > " + out +
                            "' sh --fast-budget x -o y -- --help");
  std::ifstream in(out);
  std::vector<std::string> got;
  for (std::string line; std::getline(in, line);) got.push_back(line);
  EXPECT_EQ(got, (std::vector<std::string>{"--fast-budget", "x", "-o", "y", "--", "--help"})) << r.err;
  EXPECT_EQ(r.err.find("given twice"), std::string::npos) << r.err;
}

// -h / --help before `--` prints the help and runs nothing, whatever else is on the line.
TEST_F(CliArgs, HelpWinsBeforeTheSeparatorOnly) {
  const CliRun r = tierpack("run --fast-budget 50% --help -- touch " + (dir_ / "ran").string());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("usage: tierpack run", 0), 0u) << r.out;
  EXPECT_FALSE(fs::exists(dir_ / "ran"));
  EXPECT_EQ(tierpack("topo -h").status, 0);
  EXPECT_TRUE(parse_args("run", {"--", "cmd", "--help"}, tierpack::cli::run_spec()).child.back() == "--help");
}

}  // namespace

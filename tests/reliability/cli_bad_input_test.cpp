// Bad input to every `tierpack` subcommand (issue 9, guarantee 5): wrong flags, missing input files
// and unwritable outputs give exactly one line on stderr that names the command and the culprit, and
// exit status 2 (usage) or 1 (failure); nothing is printed as if it had worked. The subcommands are
// read from `tierpack --help`, so a new one is covered by the generic checks (unknown flag, stray
// argument, --help) from the day it is added; the table below adds its files.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/file_envelope.hpp"
#include "core/profile.hpp"
#include "tests/support/run_command.hpp"
#include "tests/support/synthetic_profile.hpp"

namespace fs = std::filesystem;

namespace {

using tierpack::testing::CliRun;

class CliBadInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("tierpack_cli_bad_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    tierpack::synth::SyntheticOptions o;
    o.tensors = 200;
    tierpack::synth::write_synthetic_profile(o, path("good.tpk"));
    std::ofstream(path("a_file")) << "not a directory\n";
    std::ofstream(path("garbage.tpk")) << "this is not a profile\n";
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string path(const std::string& name) { return (dir_ / name).string(); }
  /// A path whose parent is a regular file: unwritable even for root (ENOTDIR).
  static std::string unwritable(const std::string& name) { return path("a_file") + "/" + name; }

  static CliRun tierpack(const std::string& args, const std::string& env = {}) {
    return tierpack::testing::run_split(env + " " + std::string(TIERPACK_BINARY_DIR) + "/bin/tierpack " + args + " </dev/null",
                                        dir_.string());
  }
  static void expect_one_line_error(const std::string& args, int status, const std::string& fragment,
                                    const std::string& env = {}) {
    SCOPED_TRACE("tierpack " + args);
    const CliRun r = tierpack(args, env);
    EXPECT_EQ(r.status, status) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("tierpack", 0), 0u) << "starts with the program name: " << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << "names '" << fragment << "': " << r.err;
  }
  /// The subcommands `tierpack --help` lists.
  static std::vector<std::string> subcommands() {
    const CliRun r = tierpack("--help");
    EXPECT_EQ(r.status, 0);
    std::vector<std::string> names;
    std::istringstream in(r.out);
    bool in_list = false;
    for (std::string line; std::getline(in, line);) {
      if (line == "commands:") {
        in_list = true;
      } else if (in_list && line.rfind("  ", 0) == 0) {
        std::istringstream words(line);
        std::string name;
        words >> name;
        names.push_back(name);
      } else if (in_list) {
        break;
      }
    }
    return names;
  }

  static fs::path dir_;
};
fs::path CliBadInput::dir_;

TEST_F(CliBadInput, NoOrUnknownCommandIsAUsageError) {
  EXPECT_EQ(tierpack("").status, 2);
  expect_one_line_error("frobnicate", 2, "unknown command 'frobnicate'");
  expect_one_line_error("--frobnicate", 2, "frobnicate");
}

TEST_F(CliBadInput, EverySubcommandRejectsUnknownFlagsAndStrayArgumentsAndHasHelp) {
  const std::vector<std::string> names = subcommands();
  ASSERT_GE(names.size(), 5u) << "topo, profile, report, plan, replay at least";
  for (const std::string& name : names) {
    expect_one_line_error(name + " --no-such-flag", 2, "tierpack " + name + ": unknown flag '--no-such-flag'");
    const CliRun help = tierpack(name + " --help");
    EXPECT_EQ(help.status, 0) << name;
    EXPECT_NE(help.out.find("usage: tierpack " + name), std::string::npos) << name << ": " << help.out;
  }
}

TEST_F(CliBadInput, MissingOrUnreadableInputFilesExitOne) {
  const std::string good = path("good.tpk"), missing = path("missing.tpk"), garbage = path("garbage.tpk");
  expect_one_line_error("topo --xml " + path("missing.xml"), 1, "missing.xml");
  expect_one_line_error("profile --summary " + missing, 1, "missing.tpk");
  expect_one_line_error("profile --summary " + garbage, 1, "garbage.tpk");
  expect_one_line_error("report " + missing + " -o " + path("r1"), 1, "missing.tpk");
  expect_one_line_error("report " + garbage + " -o " + path("r2"), 1, "garbage.tpk");
  expect_one_line_error("report " + good + " --plan " + path("missing.json") + " -o " + path("r3"), 1, "missing.json");
  expect_one_line_error("report " + good + " --run-stats " + path("missing.json") + " -o " + path("r4"), 1, "missing.json");
  expect_one_line_error("plan " + missing, 1, "missing.tpk");
  expect_one_line_error("plan " + garbage, 1, "garbage.tpk");
  expect_one_line_error("replay " + missing, 1, "missing.tpk");
  expect_one_line_error("replay " + good + " --plan " + path("missing.json"), 1, "missing.json");
  // A directory where a file is expected.
  expect_one_line_error("plan " + dir_.string(), 1, dir_.string());
}

TEST_F(CliBadInput, UnwritableOutputsExitOneAndNameThePath) {
  const std::string good = path("good.tpk");
  expect_one_line_error("topo -o " + unwritable("topo.txt"), 1, unwritable("topo.txt"));
  expect_one_line_error("topo --json -o " + unwritable("topo.json"), 1, unwritable("topo.json"));
  expect_one_line_error("report " + good + " -o " + unwritable("report"), 1, unwritable("report"));
  expect_one_line_error("replay " + good + " -o " + unwritable("r.txt"), 1, unwritable("r.txt"));
  expect_one_line_error("replay " + good + " --json -o " + unwritable("r.json"), 1, unwritable("r.json"));
  {
    // `plan` prints its summary before writing the file; the error line is what matters.
    SCOPED_TRACE("plan -o unwritable");
    const CliRun r = tierpack("plan " + good + " -o " + unwritable("plan.json"));
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(unwritable("plan.json")), std::string::npos) << r.err;
  }
  // `profile` must refuse an unwritable output before it launches the (possibly long) command: the
  // command here would leave a marker file if it ran.
  const std::string marker = path("profiled_command_ran");
  expect_one_line_error("profile -o " + unwritable("run.tpk") + " -- touch " + marker, 1, unwritable("run.tpk"));
  EXPECT_FALSE(fs::exists(marker)) << "the command ran although its profile could not be written";
}

TEST_F(CliBadInput, BadValuesAreUsageErrors) {
  const std::string good = path("good.tpk");
  expect_one_line_error("profile -o " + path("x.tpk") + " --warmup many -- true", 2, "--warmup");
  expect_one_line_error("profile -o " + path("x.tpk") + " --page-tracer bogus -- true", 2, "--page-tracer");
  expect_one_line_error("profile -o " + path("x.tpk"), 2, "missing the command");
  expect_one_line_error("report " + good + " --budget lots -o " + path("r5"), 2, "--budget");
  expect_one_line_error("report " + good + " --tiers ram:1G -o " + path("r6"), 2, "ram");
  expect_one_line_error("plan " + good + " --gpu-budget -3G", 2, "--gpu-budget");
  expect_one_line_error("replay " + good + " --fast-budget 250%", 2, "--fast-budget");
  expect_one_line_error("topo --xml", 2, "--xml");
  expect_one_line_error("topo extra", 2, "extra");
}

// Issue 26, unbounded input: /dev/zero was read until memory ran out and a FIFO without a writer
// blocked; both are refused at once, naming the path (`timeout` turns a hang into a failure here).
TEST_F(CliBadInput, DevicesAndFifosAreRefusedWithoutReading) {
  const std::string good = path("good.tpk"), fifo = path("no_writer.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& bad : {std::string("/dev/zero"), fifo}) {
    expect_one_line_error("profile --summary " + bad, 1, bad + ": is a", "timeout 20");
    expect_one_line_error("report " + bad + " -o " + path("r_dev1"), 1, bad + ": is a", "timeout 20");
    expect_one_line_error("plan " + bad, 1, bad + ": is a", "timeout 20");
    expect_one_line_error("replay " + bad, 1, bad + ": is a", "timeout 20");
    expect_one_line_error("report " + good + " --plan " + bad + " -o " + path("r_dev2"), 1, bad + ": is a",
                          "timeout 20");
    expect_one_line_error("report " + good + " --run-stats " + bad + " -o " + path("r_dev3"), 1, bad + ": is a",
                          "timeout 20");
    expect_one_line_error("replay " + good + " --plan " + bad, 1, bad + ": is a", "timeout 20");
  }
  expect_one_line_error("plan " + good + " --tiers " + fifo, 1, fifo + ": is a FIFO", "timeout 20");
}

// Issue 26, overflow and impossible values: a tensor of 2^63-1 bytes with a valid checksum printed
// "0 B" and overflowed the summary, the report and the planner; a negative step time read as years.
TEST_F(CliBadInput, OutOfRangeFieldsAreRefusedNamingTheField) {
  nlohmann::json j = tierpack::read_profile(path("good.tpk"));
  j["tensors"][37]["bytes"] = INT64_MAX;
  const std::string huge = path("huge_tensor.tpk");
  tierpack::write_envelope(huge, "tierpack-profile", 1, j.dump());
  const std::string field = "tensor 37: field 'bytes' = 9223372036854775807 is out of range (at most 2^48)";
  expect_one_line_error("profile --summary " + huge, 1, field);
  expect_one_line_error("report " + huge + " -o " + path("r_huge"), 1, field);
  expect_one_line_error("plan " + huge, 1, field);
  expect_one_line_error("replay " + huge, 1, field);

  const std::string stats = path("negative_step.json");
  std::ofstream(stats)
      << R"({"format": "tierpack-run-stats", "version": 1, "iterations": [{"index": 0, "step_ns": -5}]})";
  expect_one_line_error("report " + path("good.tpk") + " --run-stats " + stats + " -o " + path("r_neg"), 1,
                        "iteration 0: field 'step_ns' = -5 is out of range");
  std::ofstream(stats, std::ios::trunc)
      << R"({"format": "tierpack-run-stats", "version": 1, "iterations": [{"index": "zero"}]})";
  const CliRun r = tierpack("report " + path("good.tpk") + " --run-stats " + stats + " -o " + path("r_type"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("iteration 0: field 'index' = \"zero\" must be a whole number, not string"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("json.exception"), std::string::npos) << r.err;
}

}  // namespace

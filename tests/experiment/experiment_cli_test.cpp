// `tierpack experiment` run as a user would: model mode writes the four files and prints the table
// with progress on stderr; bad input is one line and exit status 2; real mode on a one-node machine
// is one line and exit status 1.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "experiment/node_policy.hpp"
#include "tests/support/run_command.hpp"
#include "tests/support/synthetic_profile.hpp"

using namespace tierpack;
namespace fs = std::filesystem;

namespace {

using tierpack::testing::CliRun;

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class ExperimentCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("tierpack_exp_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    synth::SyntheticOptions host;
    host.tensors = 200;
    host.device = -1;
    host.activation_bytes = 128 << 10;
    synth::write_synthetic_profile(host, (dir_ / "host.tpk").string());
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static CliRun tierpack(const std::string& args) {
    return tierpack::testing::run_split(std::string(TIERPACK_BINARY_DIR) + "/bin/tierpack experiment " + args,
                                        dir_.string());
  }
  static inline fs::path dir_;
};

std::size_t lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

}  // namespace

TEST_F(ExperimentCli, ModelModeWritesTheTableAndPlots) {
  const auto out = dir_ / "model";
  const auto r = tierpack("--workload " + (dir_ / "host.tpk").string() + " --tiers preset:ddr5-cxl --fast-budgets 100%,50%,20% -o " +
                          out.string());
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* f : {"results.csv", "summary.md", "step_time.svg", "migration.svg"}) EXPECT_TRUE(fs::exists(out / f)) << f;
  EXPECT_EQ(lines(slurp(out / "results.csv")), 1u + 3u * 9u);
  EXPECT_NE(r.out.find("| 20% ("), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("[model 3/3] budget 20%"), std::string::npos) << "progress lines: " << r.err;
  EXPECT_EQ(slurp(out / "summary.md"), r.out);
}

TEST_F(ExperimentCli, ValidationRowsComeFromMeasured) {
  const auto out = dir_ / "validate";
  const auto r = tierpack("--workload " + (dir_ / "host.tpk").string() +
                          " --tiers preset:ddr5-cxl --fast-budgets 50% --policies page-aware --measured all-fast=1ms,page-aware@50%=2ms"
                          " --measured-source unit-test -o " + out.string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("Simulator validation"), std::string::npos);
  EXPECT_NE(r.out.find("| page-aware at 50% ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unit-test |"), std::string::npos);
}

TEST_F(ExperimentCli, ComputeTimeScalesTheProfiledIteration) {
  const auto out = dir_ / "compute_time";
  const auto r = tierpack("--workload " + (dir_ / "host.tpk").string() +
                          " --tiers preset:ddr5-cxl --fast-budgets 50% --policies all-fast --compute-time 2ms"
                          " --measured all-fast=2ms -o " + out.string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("takes 2.00 ms (--compute-time)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| all-fast (no offloading) | 2.00 ms | 2.00 ms | +0.0% |"), std::string::npos) << r.out;
}

TEST_F(ExperimentCli, BadInputIsOneLineAndStatusTwo) {
  const std::string w = "--workload " + (dir_ / "host.tpk").string();
  for (const std::string& args : std::vector<std::string>{w + " --tiers preset:ddr5-cxl",                                 // no -o
                                  w + " -o x",                                                        // no --tiers
                                  "--tiers preset:ddr5-cxl -o x",                                     // no workload
                                  w + " --tiers preset:ddr5-cxl -o x --policies first-touch,numactl", // unknown policy
                                  w + " --tiers preset:ddr5-cxl -o x --fast-budgets 50%,abc",
                                  w + " --tiers preset:nope -o x",
                                  w + " --tiers preset:ddr5-cxl -o x --mode simulate",
                                  w + " --tiers preset:ddr5-cxl -o x --compute-time 5",
                                  w + " --tiers preset:ddr5-cxl -o x --compute-time -3ms"}) {
    const auto r = tierpack(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.err;
    EXPECT_EQ(lines(r.err), 1u) << args << "\n" << r.err;
  }
}

TEST_F(ExperimentCli, RealModeOnOneNodeSaysItNeedsTwo) {
  if (experiment::memory_nodes().size() >= 2) GTEST_SKIP() << "this machine has several NUMA nodes";
  const auto r = tierpack("--workload " + (dir_ / "host.tpk").string() + " --tiers preset:ddr5-cxl --mode real -o " +
                          (dir_ / "real").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("needs >= 2 NUMA nodes"), std::string::npos) << r.err;
}

// Issue 26, late failure: a bad --measured value, a bad --tiers or an unwritable -o was found only after
// the command had been profiled and the experiment run. They fail first; the command (which leaves a
// marker if it runs) never starts.
TEST_F(ExperimentCli, BadValuesFailBeforeTheCommandIsProfiled) {
  const std::string marker = (dir_ / "profiled_command_ran").string();
  fs::remove(marker);
  std::ofstream((dir_ / "a_file").string()) << "not a directory\n";
  const std::string cmd = " -- touch " + marker;
  for (const auto& [args, status] : std::vector<std::pair<std::string, int>>{
           {"--tiers preset:ddr5-cxl -o " + (dir_ / "m1").string() + " --measured all-fast=fast" + cmd, 2},
           {"--tiers preset:ddr5-cxl -o " + (dir_ / "m2").string() + " --measured page-aware=2ms" + cmd, 2},
           {"--tiers preset:ddr5-cxl -o " + (dir_ / "m3").string() + " --mode real --measured all-fast=2ms" + cmd, 2},
           {"--tiers preset:nope -o " + (dir_ / "m4").string() + cmd, 2},
           {"--tiers preset:ddr5-cxl -o " + (dir_ / "a_file").string() + "/out" + cmd, 1}}) {
    const auto r = tierpack(args);
    EXPECT_EQ(r.status, status) << args << "\n" << r.err;
    EXPECT_EQ(lines(r.err), 1u) << args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(marker)) << args << ": the command ran before the bad value was found";
  }
}

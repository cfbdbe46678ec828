// `tierpack plan` and `tierpack replay` run as a subprocess: good runs write readable files and print
// the comparison; bad input gives one line on stderr and exit status 2 (usage) or 1 (failure).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/plan.hpp"
#include "core/tier_spec.hpp"
#include "placer/plan_check.hpp"
#include "tests/support/cli_expect.hpp"
#include "tests/support/synthetic_profile.hpp"

using namespace tierpack;
namespace fs = std::filesystem;

namespace {

using tierpack::testing::CliRun;
using tierpack::testing::expect_one_line_error;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class PlanReplayCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("tierpack_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    synth::SyntheticOptions gpu;
    gpu.tensors = 400;
    synth::write_synthetic_profile(gpu, path("gpu.tpk"));
    synth::SyntheticOptions host;
    host.tensors = 300;
    host.device = -1;
    host.activation_bytes = 256 << 10;
    synth::write_synthetic_profile(host, path("host.tpk"));
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string path(const std::string& name) { return (dir_ / name).string(); }

  // Runs `tierpack <args>` with stdout and stderr captured in files.
  static CliRun tierpack(const std::string& args) {
    return tierpack::testing::run_split(std::string(TIERPACK_BINARY_DIR) + "/bin/tierpack " + args, dir_.string());
  }


  static fs::path dir_;
};
fs::path PlanReplayCli::dir_;

}  // namespace

TEST_F(PlanReplayCli, PlanWritesAPlanAndSummarisesIt) {
  const CliRun r = tierpack("plan " + path("gpu.tpk") + " --tiers preset:h200-pcie --gpu-budget 40% -o " + path("plan.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("plan (page-aware) for GPU 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("predicted step"), std::string::npos);
  EXPECT_NE(r.out.find("prefetch"), std::string::npos);
  const Plan plan = read_plan(path("plan.json"));
  EXPECT_FALSE(plan.empty());
  EXPECT_TRUE(placer::check_plan(read_profile(path("gpu.tpk")), plan).ok());

  // A budget the run fits in: nothing moves.
  const CliRun fits = tierpack("plan " + path("gpu.tpk") + " --tiers gpu:80G,host:512G@55GB/s");
  ASSERT_EQ(fits.status, 0) << fits.err;
  EXPECT_NE(fits.out.find("nothing moves"), std::string::npos) << fits.out;

  // Host runs on the CXL preset, page-agnostic.
  const CliRun host = tierpack("plan " + path("host.tpk") + " --tiers preset:ddr5-cxl --fast-budget 30% --policy page-agnostic");
  ASSERT_EQ(host.status, 0) << host.err;
  EXPECT_NE(host.out.find("plan (page-agnostic) for host"), std::string::npos) << host.out;
}

TEST_F(PlanReplayCli, ReplayComparesEveryPolicy) {
  ASSERT_EQ(tierpack("plan " + path("gpu.tpk") + " --tiers preset:h200-pcie --gpu-budget 40% -o " + path("plan.json")).status, 0);
  const CliRun r = tierpack("replay " + path("gpu.tpk") + " --plan " + path("plan.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* policy : {"all-fast", "first-touch", "interleave", "lru", "page-agnostic", "tierpack (page-aware, from file)"})
    EXPECT_NE(r.out.find(policy), std::string::npos) << policy << "\n" << r.out;
  EXPECT_NE(r.out.find("does not fit"), std::string::npos);

  const CliRun j = tierpack("replay " + path("host.tpk") + " --tiers preset:ddr5-cxl --fast-budget 50% --json -o " + path("r.json"));
  ASSERT_EQ(j.status, 0) << j.err;
  const auto json = nlohmann::json::parse(slurp(path("r.json")));
  ASSERT_EQ(json.at("rows").size(), 6u);
  for (const auto& row : json.at("rows")) {
    EXPECT_GE(row.at("slowdown").get<double>(), 0.999);
    EXPECT_FALSE(row.at("occupancy").empty());
  }

  // A budget sweep: one row per budget.
  const CliRun sweep = tierpack("replay " + path("host.tpk") + " --tiers preset:ddr5-cxl --budgets 100%,50%,20%");
  ASSERT_EQ(sweep.status, 0) << sweep.err;
  EXPECT_NE(sweep.out.find("50% ("), std::string::npos) << sweep.out;
  EXPECT_NE(sweep.out.find("20% ("), std::string::npos) << sweep.out;
  expect_one_line_error(tierpack("replay " + path("host.tpk") + " --budgets 50%,x"), 2, "--budgets");
  expect_one_line_error(tierpack("replay " + path("host.tpk") + " --budgets 50% --fast-budget 20%"), 2, "--budgets");

  // A tier model from a file, in the form `tierpack topo --json` writes.
  std::ofstream(path("tiers.json")) << nlohmann::json(parse_tier_spec("dram:1G,cxl:8G@+80ns/36GB/s")).dump();
  EXPECT_EQ(tierpack("replay " + path("host.tpk") + " --tiers " + path("tiers.json") + " --fast-budget 50%").status, 0);
}

TEST_F(PlanReplayCli, BadInputIsOneLineAndTheRightExitStatus) {
  const std::string gpu = path("gpu.tpk");
  expect_one_line_error(tierpack("plan"), 2, "missing argument");
  expect_one_line_error(tierpack("plan " + gpu + " --gpu-budget 24G --fast-budget 20%"), 2, "not both");
  expect_one_line_error(tierpack("plan " + gpu + " --gpu-budget banana"), 2, "--gpu-budget");
  expect_one_line_error(tierpack("plan " + gpu + " --fast-budget 120%"), 2, "--fast-budget");
  expect_one_line_error(tierpack("plan " + gpu + " --tiers ram:16G"), 2, "unknown tier kind 'ram'");
  expect_one_line_error(tierpack("plan " + gpu + " --tiers preset:nope"), 2, "unknown tier preset 'nope'");
  expect_one_line_error(tierpack("plan " + gpu + " --policy magic"), 2, "unknown policy 'magic'");
  expect_one_line_error(tierpack("plan " + gpu + " --device x"), 2, "--device");
  expect_one_line_error(tierpack("plan " + path("host.tpk") + " --gpu-budget 1G"), 2, "host tensors");
  expect_one_line_error(tierpack("plan " + gpu + " --frobnicate"), 2, "unknown flag");
  expect_one_line_error(tierpack("plan " + path("missing.tpk")), 1, "missing.tpk");
  expect_one_line_error(tierpack("plan " + gpu + " --tiers dram:64G --gpu-budget 10%"), 1, "no other tier");

  std::ofstream(path("corrupt.tpk")) << "tierpack-profile 1 10 00000000\n{}";
  expect_one_line_error(tierpack("plan " + path("corrupt.tpk")), 1, "corrupt.tpk");
  std::ofstream(path("bad_tiers.json")) << "{\"tiers\": 3}";
  expect_one_line_error(tierpack("replay " + gpu + " --tiers " + path("bad_tiers.json")), 1, "bad_tiers.json");
  std::ofstream(path("bad_plan.json")) << "{\"format\": \"tierpack-plan\", \"version\": 9}";
  expect_one_line_error(tierpack("replay " + gpu + " --plan " + path("bad_plan.json")), 1, "newer");
  // A plan made for another profile is refused rather than replayed.
  ASSERT_EQ(tierpack("plan " + path("host.tpk") + " --tiers preset:ddr5-cxl -o " + path("host_plan.json")).status, 0);
  expect_one_line_error(tierpack("replay " + gpu + " --plan " + path("host_plan.json")), 1, "does not fit");
}

// Issue 26 (predictions that look free): `tierpack plan` says when its prediction is a lower bound and
// why (a GPU profile's op times are launch times), and marks a slow tier this machine would emulate.
TEST_F(PlanReplayCli, PlanSaysWhenItsPredictionIsALowerBound) {
  const CliRun gpu = tierpack("plan " + path("gpu.tpk") + " --tiers preset:h200-pcie --gpu-budget 40%");
  ASSERT_EQ(gpu.status, 0) << gpu.err;
  EXPECT_NE(gpu.out.find("x, a lower bound): stalls"), std::string::npos) << gpu.out;
  EXPECT_NE(gpu.out.find("  lower bound: a GPU profile's op times are the ops' launches"), std::string::npos) << gpu.out;

  // The CXL preset's slow tier is NUMA node 1: on a machine without it, a run here emulates it.
  const CliRun host = tierpack("plan " + path("host.tpk") + " --tiers preset:ddr5-cxl --fast-budget 30%");
  ASSERT_EQ(host.status, 0) << host.err;
  const bool node1 = fs::exists("/sys/devices/system/node/node1");
  const bool node0 = fs::exists("/sys/devices/system/node/node0");
  EXPECT_EQ(host.out.find("slow tier cxl0 (EMULATED here: NUMA node 1 is not on this machine") != std::string::npos, node0 && !node1)
      << host.out;
  EXPECT_EQ(host.out.find("fast tier dram0 (EMULATED"), std::string::npos) << host.out;
}

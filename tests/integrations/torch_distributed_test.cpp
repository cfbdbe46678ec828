// Distributed runs (issue: multi-GPU under torchrun, its CPU part): torchrun with the gloo backend
// and two CPU ranks running examples/train_ddp.py, profiled per rank through both entry points:
//   tierpack profile -o out.%r.tpk -- torchrun ... train_ddp.py      (tierpack outside the launcher)
//   torchrun ... --no_python tierpack profile -o out.%r.tpk -- python3 train_ddp.py   (inside each rank)
// Each rank must write its own profile (its rank and the world size in the meta, DDP's gradient
// all-reduce visible as ops), the launcher must write none, and training must not change: the final
// parameters are bit-identical to a run without tierpack.
//
// Debian's torchrun (torch 1.13 on Python 3.11) fails with its default --redirects/--tee (an IntFlag
// change in Python 3.11 breaks Std.from_str("0")), hence `--redirects 1 --tee 1` below.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <string>

#include "core/profile.hpp"
#include "tests/support/run_command.hpp"

using namespace tierpack;
namespace fs = std::filesystem;

namespace {

using tierpack::testing::Proc;
using tierpack::testing::run;

std::string torchrun() {
  const char* p = std::getenv("TIERPACK_TEST_TORCHRUN");
  return p && *p ? p : "/usr/bin/torchrun";
}
std::string python() {
  const char* p = std::getenv("TIERPACK_TEST_PYTHON");
  return p && *p ? p : "/usr/bin/python3";
}
std::string tierpack_bin() { return std::string(TIERPACK_BINARY_DIR) + "/bin/tierpack"; }
std::string example() { return std::string(TIERPACK_SOURCE_DIR) + "/examples/train_ddp.py"; }
std::string launcher_flags() {
  // A free port per test process: two ctest jobs must not share a rendezvous.
  return " --nproc_per_node 2 --redirects 1 --tee 1 --master_port " + std::to_string(20000 + ::getpid() % 20000) + " ";
}

/// "rank R params X" lines of a run's output, by rank.
std::map<int, std::string> final_params(const std::string& output) {
  std::map<int, std::string> out;
  const std::regex re("rank ([0-9]+) params ([-0-9.e+]+)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), re); it != std::sregex_iterator(); ++it)
    out[std::stoi((*it)[1].str())] = (*it)[2].str();
  return out;
}

class TorchDistributed : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(torchrun().c_str(), X_OK) != 0) GTEST_SKIP() << torchrun() << " not found";
    dir_ = fs::temp_directory_path() / ("tierpack_ddp_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  /// Checks the two per-rank profiles in dir_ and returns them.
  void expect_rank_profiles(const std::string& output) {
    for (int rank = 0; rank < 2; ++rank) {
      const fs::path path = dir_ / ("out." + std::to_string(rank) + ".tpk");
      ASSERT_TRUE(fs::exists(path)) << path << "\n" << output;
      const Profile p = read_profile(path.string());
      EXPECT_EQ(p.meta.rank, rank);
      EXPECT_EQ(p.meta.world_size, 2);
      EXPECT_GT(p.tensors.size(), 20u);
      bool allreduce = false;
      for (const auto& op : p.ops) allreduce = allreduce || op.name.find("all_reduce") != std::string::npos ||
                                               op.name.find("allreduce") != std::string::npos;
      EXPECT_TRUE(allreduce) << "no all-reduce op in rank " << rank << "'s profile";
    }
    // Only the ranks wrote: no file for a rank that does not exist, no launcher profile.
    std::size_t files = 0;
    for (const auto& e : fs::directory_iterator(dir_)) files += e.path().extension() == ".tpk" ? 1 : 0;
    EXPECT_EQ(files, 2u) << output;
  }

  fs::path dir_;
};

}  // namespace

TEST_F(TorchDistributed, ProfileOutsideTheLauncherWritesOneProfilePerRank) {
  const Proc base = run(torchrun() + launcher_flags() + example() + " --iters 4");
  ASSERT_EQ(base.status, 0) << base.output;
  const auto expected = final_params(base.output);
  ASSERT_EQ(expected.size(), 2u) << base.output;
  EXPECT_EQ(expected.at(0), expected.at(1)) << "DDP ranks disagree without tierpack";

  const std::string out = (dir_ / "out.%r.tpk").string();
  const Proc r = run(tierpack_bin() + " profile -o " + out + " -- " + torchrun() + launcher_flags() + example() +
                     " --iters 4");
  ASSERT_EQ(r.status, 0) << r.output;
  expect_rank_profiles(r.output);
  EXPECT_NE(r.output.find("(rank 1 of 2)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tierpack[rank 0]"), std::string::npos) << r.output;
  EXPECT_EQ(final_params(r.output), expected) << "profiling changed training\n" << r.output;
}

TEST_F(TorchDistributed, ProfileInsideEachRankWritesItsOwnFile) {
  const std::string out = (dir_ / "out.%r.tpk").string();
  const Proc r = run(torchrun() + launcher_flags() + "--no_python " + tierpack_bin() + " profile -o " + out + " -- " +
                     python() + " " + example() + " --iters 4");
  ASSERT_EQ(r.status, 0) << r.output;
  expect_rank_profiles(r.output);
  const auto params = final_params(r.output);
  ASSERT_EQ(params.size(), 2u) << r.output;
  EXPECT_EQ(params.at(0), params.at(1));
}

TEST_F(TorchDistributed, RunAppliesEachRanksPlanAndTrainsTheSame) {
  // Every rank profiles, plans and applies its own plan (CXL emulated on node 0 here); DDP keeps the
  // ranks in step, and placement must not change a bit of the result.
  const Proc base = run(torchrun() + launcher_flags() + example() + " --iters 6");
  ASSERT_EQ(base.status, 0) << base.output;
  const auto expected = final_params(base.output);
  ASSERT_EQ(expected.size(), 2u) << base.output;

  const std::string out = (dir_ / "out.%r.tpk").string(), stats = (dir_ / "stats.%r.json").string();
  const Proc r = run(tierpack_bin() + " run --warmup 2 --fast-budget 50% --tiers preset:ddr5-cxl -o " + out +
                     " --stats " + stats + " -- " + torchrun() + launcher_flags() + example() + " --iters 6");
  ASSERT_EQ(r.status, 0) << r.output;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NE(r.output.find("tierpack run: rank " + std::to_string(rank) + ": plan applied from iteration"),
              std::string::npos)
        << r.output;
    EXPECT_TRUE(fs::exists(dir_ / ("stats." + std::to_string(rank) + ".json"))) << r.output;
    EXPECT_TRUE(fs::exists(dir_ / ("out." + std::to_string(rank) + ".tpk"))) << r.output;
  }
  EXPECT_EQ(final_params(r.output), expected) << "tierpack run changed training\n" << r.output;
}

TEST_F(TorchDistributed, NoProfileForAnyRankIsAClearError) {
  // The ranks exit before an iteration ends: the command must say no rank wrote a profile.
  const std::string out = (dir_ / "out.%r.tpk").string();
  const Proc r = run(tierpack_bin() + " profile -o " + out + " -- " + torchrun() + launcher_flags() + example() +
                     " --iters 0");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("for any rank"), std::string::npos) << r.output;
}

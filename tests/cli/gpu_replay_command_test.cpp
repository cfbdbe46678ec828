// `tierpack gpu-replay` run as a subprocess on a recorded iteration as the GPU tier writes it
// (<stats>.gpu<N>.saved.json): per budget what is kept, offloaded and made again; each storage's choice;
// bad input gives one line on stderr and exit status 2 (usage) or 1 (failure).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/saved_trace.hpp"
#include "tests/support/cli_expect.hpp"

using namespace tierpack;
using tierpack::testing::expect_one_line_error;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t MiB = 1 << 20;

// Eight layers each saving a 64 MiB storage over 256 MiB; every odd one is made again from the one before
// (an activation's output from its input), used in reverse order in backward.
nlohmann::json recorded_iteration() {
  SavedTrace t;
  double now = 0;
  for (int i = 0; i < 8; ++i) {
    SavedStorage s;
    s.bytes = 64 * MiB;
    if (i % 2 == 1) s.recompute_ms = 0.05, s.recompute_from = {i - 1};
    t.storages.push_back(s);
    const std::uint64_t live = 256 * MiB + 64 * MiB * static_cast<std::uint64_t>(i + 1);
    t.events.push_back({SavedEventKind::pack, i, now, live, live});
    now += 2;
  }
  for (int i = 7; i >= 0; --i) {
    const std::uint64_t live = 256 * MiB + 64 * MiB * static_cast<std::uint64_t>(i + 1);
    t.events.push_back({SavedEventKind::unpack, i, now, live, live});
    now += 2;
  }
  t.optimizer_ms = 2;
  t.step_ms = now + 2;
  return {{"format", "tierpack-gpu-saved"},
          {"version", 1},
          {"budget", 768 * MiB},
          {"fill", 0.95},
          {"trace", nlohmann::json::parse(saved_trace_to_json(t))},
          {"options", {{"limit_bytes", 729 * MiB}, {"d2h_bytes_per_s", 50e9}, {"h2d_bytes_per_s", 50e9}, {"recompute", true}}},
          {"plan", nullptr}};
}

class GpuReplayCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("tierpack_gpu_replay_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    write("run.gpu0.saved.json", recorded_iteration());
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string path(const std::string& name) { return (dir_ / name).string(); }
  static void write(const std::string& name, const nlohmann::json& j) { std::ofstream(path(name)) << j.dump(); }
  static tierpack::testing::CliRun tierpack(const std::string& args) {
    return tierpack::testing::run_split(std::string(TIERPACK_BINARY_DIR) + "/bin/tierpack gpu-replay " + args, dir_.string());
  }
  static fs::path dir_;
};
fs::path GpuReplayCli::dir_;

}  // namespace

TEST_F(GpuReplayCli, PrintsEachBudgetsChoicesAndEachStoragesChoice) {
  const auto r = tierpack(path("run.gpu0.saved.json") + " --budgets 100%,60% --storages");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("recorded iteration: 8 saved storages, live peak 768.00 MiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kept/offload/remake"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("60% (460.80 MiB)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("recompute: let go at"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0.050 ms from"), std::string::npos) << r.out;
  // Without a budget: the run's own.
  const auto own = tierpack(path("run.gpu0.saved.json"));
  ASSERT_EQ(own.status, 0) << own.err;
  EXPECT_NE(own.out.find("the run's (768.00 MiB)"), std::string::npos) << own.out;
}

TEST_F(GpuReplayCli, JsonCountsTheThreeChoicesAndRecomputeOffCopiesOnly) {
  const auto on = tierpack(path("run.gpu0.saved.json") + " --budgets 60% --json --storages");
  ASSERT_EQ(on.status, 0) << on.err;
  const auto j = nlohmann::json::parse(on.out);
  ASSERT_EQ(j.size(), 1u);
  const auto& row = j[0];
  EXPECT_EQ(row["kept"].get<int>() + row["offloaded"].get<int>() + row["recomputed"].get<int>(), 8);
  EXPECT_GT(row["recomputed"].get<int>(), 0);
  EXPECT_GT(row["bytes_recomputed"].get<std::uint64_t>(), 0u);
  int remade = 0;
  for (const auto& s : row["storages"]) remade += s["choice"] == "recompute";
  EXPECT_EQ(remade, row["recomputed"].get<int>());

  const auto off = tierpack(path("run.gpu0.saved.json") + " --budgets 60% --json --recompute off");
  ASSERT_EQ(off.status, 0) << off.err;
  const auto k = nlohmann::json::parse(off.out);
  EXPECT_EQ(k[0]["recomputed"].get<int>(), 0);
  EXPECT_EQ(k[0]["bytes_recomputed"].get<std::uint64_t>(), 0u);
  EXPECT_GT(k[0]["bytes_out"].get<std::uint64_t>(), row["bytes_out"].get<std::uint64_t>());
}

TEST_F(GpuReplayCli, BadInputGivesOneLine) {
  expect_one_line_error(tierpack(path("no-such.json")), 1, "no-such.json");
  auto wrong = recorded_iteration();
  wrong["format"] = "tierpack-run-stats";
  write("wrong.json", wrong);
  expect_one_line_error(tierpack(path("wrong.json")), 1, "field 'format'");
  auto bad = recorded_iteration();
  bad["trace"]["events"][3]["storage"] = 99;
  write("bad.json", bad);
  expect_one_line_error(tierpack(path("bad.json")), 1, "event 3: field 'storage'");
  auto fill = recorded_iteration();
  fill["fill"] = 2.0;
  write("fill.json", fill);
  expect_one_line_error(tierpack(path("fill.json")), 1, "field 'fill'");
  expect_one_line_error(tierpack(path("run.gpu0.saved.json") + " --recompute maybe"), 2, "--recompute");
  expect_one_line_error(tierpack(path("run.gpu0.saved.json") + " --budgets lots"), 2, "--budgets");
}

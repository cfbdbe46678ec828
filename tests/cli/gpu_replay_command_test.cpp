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

// Eight layers each saving a 64 MiB storage over 256 MiB; every odd one can be made again from the one before
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
          // A link slow enough that copies stall 2 ms calls: the cost model makes again what it can
          // (placer/saved_plan.cpp, Note [Recompute cost]).
          {"options", {{"limit_bytes", 729 * MiB}, {"d2h_bytes_per_s", 5e9}, {"h2d_bytes_per_s", 5e9}, {"recompute", true}}},
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

TEST_F(GpuReplayCli, SaysWhichOptimizerStateTheStreamedStepFetches) {
  // Note [Streamed step]: two 128 MiB states packed first and updated by the step at the end; under a streamed
  // step's window the one that fits back in backward is fetched by the plan, the other by the step.
  nlohmann::json rec = recorded_iteration();
  SavedTrace t = saved_trace_from_json(rec["trace"].dump());
  SavedTrace s;
  std::uint64_t extra = 0;
  for (int k = 0; k < 2; ++k) {
    SavedStorage st;
    st.bytes = 128 * MiB;
    st.optimizer_state = true;
    s.storages.push_back(st);
    extra += st.bytes;
  }
  for (const SavedStorage& st : t.storages) s.storages.push_back(st);
  for (int k = 0; k < 2; ++k) s.events.push_back({SavedEventKind::pack, k, 0, 256 * MiB + extra, 256 * MiB + extra});
  for (SavedEvent e : t.events) {
    e.storage += 2;
    e.live += extra, e.window_peak += extra;
    s.events.push_back(e);
  }
  for (std::size_t i = 2; i < s.storages.size(); ++i)
    for (std::int32_t& from : s.storages[i].recompute_from) from += 2;
  for (int k = 0; k < 2; ++k) s.events.push_back({SavedEventKind::unpack, k, t.step_ms, 256 * MiB + extra, 256 * MiB + extra});
  s.optimizer_ms = t.optimizer_ms;
  s.step_ms = t.step_ms + 1;
  rec["trace"] = nlohmann::json::parse(saved_trace_to_json(s));
  rec["options"]["stream_window_bytes"] = 64 * MiB;
  rec["options"]["limit_bytes"] = 500 * MiB;
  rec["budget"] = 527 * MiB;
  write("stream.gpu0.saved.json", rec);
  const auto r = tierpack(path("stream.gpu0.saved.json") + " --storages");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("the optimizer step fetches it"), std::string::npos) << r.out;
  const auto j = tierpack(path("stream.gpu0.saved.json") + " --storages --json");
  ASSERT_EQ(j.status, 0) << j.err;
  const auto row = nlohmann::json::parse(j.out)[0];
  int streamed = 0, fetched = 0;
  for (const auto& st : row["storages"])
    if (st.value("optimizer_state", false) && st["choice"] == "offload") ++(st["back_at"].get<int>() < 0 ? streamed : fetched);
  EXPECT_EQ(streamed, 1) << row["storages"].dump();
  EXPECT_EQ(fetched, 1) << row["storages"].dump();
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

TEST_F(GpuReplayCli, ShowsWhatTheRunMeasuredOfWhatItMadeAgain) {
  // Note [Measured recomputation]: the mover writes the first planned iteration's times beside the plan.
  auto measured = recorded_iteration();
  measured["trace"]["storages"][1]["recompute_group"] = 4;
  measured["recomputations"] = {{"iteration", 5}, {"predicted_ms", 0.1}, {"measured_ms", 0.9},
                                {"storages", {{1, 0.05, 0.4}, {3, 0.05, 0.5}}}};
  write("measured.json", measured);
  const auto r = tierpack(path("measured.json") + " --storages");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("measured in iteration 5: 2 storage(s) made again in 0.9 ms of GPU time, predicted 0.1 ms"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(call 4); the run took 0.400 ms (predicted 0.050)"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(tierpack(path("measured.json") + " --json --storages").out);
  EXPECT_EQ(j[0]["run_measured"]["iteration"], 5);
  EXPECT_DOUBLE_EQ(j[0]["run_measured"]["measured_ms"].get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(j[0]["storages"][3]["measured"]["measured_ms"].get<double>(), 0.5);
  EXPECT_EQ(j[0]["storages"][1]["recipe"]["group"], 4);
  EXPECT_FALSE(j[0]["storages"][0].contains("measured"));

  auto bad = measured;
  bad["recomputations"]["storages"][1][0] = 8;
  write("bad_measured.json", bad);
  expect_one_line_error(tierpack(path("bad_measured.json")), 1, "field 'recomputations': storages[1] names storage 8 of 8");
  bad["recomputations"]["storages"][1] = {3, -1.0, 0.5};
  write("bad_measured.json", bad);
  expect_one_line_error(tierpack(path("bad_measured.json")), 1, "storages[1]: a time outside");
  bad["recomputations"] = 3;
  write("bad_measured.json", bad);
  expect_one_line_error(tierpack(path("bad_measured.json")), 1, "field 'recomputations': not an object");
}

TEST_F(GpuReplayCli, SaysWhetherTheHostsTimeIsCountedAndCanLeaveItOut) {
  // Note [Host time]: a run that measured its hooks' host time plans with it; --host-time off walks the GPU alone
  auto timed = recorded_iteration();
  for (auto& e : timed["trace"]["events"]) e["host_ms"] = e["t_ms"];  // a host that barely keeps up
  timed["options"]["host_ms_per_copy"] = 0.5;
  timed["options"]["host_ms_per_remake"] = 0.05;
  timed["options"]["d2h_bytes_per_s"] = timed["options"]["h2d_bytes_per_s"] = 500e9;  // copies hide under the calls
  write("timed.json", timed);
  const auto on = tierpack(path("timed.json") + " --budgets 60% --recompute off");
  ASSERT_EQ(on.status, 0) << on.err;
  EXPECT_NE(on.out.find("host time counted: 500 us a copy issued, 50 us a recomputation (Note [Host time])"),
            std::string::npos) << on.out;
  const auto j_on = nlohmann::json::parse(tierpack(path("timed.json") + " --budgets 60% --recompute off --json").out);
  const auto j_off =
      nlohmann::json::parse(tierpack(path("timed.json") + " --budgets 60% --recompute off --json --host-time off").out);
  EXPECT_TRUE(j_on[0]["host_time"].get<bool>());
  EXPECT_FALSE(j_off[0]["host_time"].get<bool>());
  EXPECT_EQ(j_on[0]["bytes_out"], j_off[0]["bytes_out"]);  // the same copies, each costing the host 0.5 ms twice
  const auto copies = static_cast<double>(j_on[0]["offloaded"].get<int>());
  ASSERT_GT(copies, 0);
  EXPECT_NEAR(j_on[0]["predicted_ms"].get<double>() - j_off[0]["predicted_ms"].get<double>(), 2 * 0.5 * copies, 1e-6);
  const auto off = tierpack(path("timed.json") + " --host-time off");
  EXPECT_NE(off.out.find("host time not counted"), std::string::npos) << off.out;
  // a run without host times: counted is impossible, and said
  EXPECT_NE(tierpack(path("run.gpu0.saved.json")).out.find("host time not counted"), std::string::npos);
  expect_one_line_error(tierpack(path("run.gpu0.saved.json") + " --host-time on"), 2, "has no host time");
  expect_one_line_error(tierpack(path("timed.json") + " --host-time maybe"), 2, "--host-time");
}

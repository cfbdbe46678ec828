// `tierpack report` end to end: files written, summary printed, exit status 0; bad usage exits 2
// and unreadable inputs exit 1, each with one line on stderr.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/wait.h>

#include "core/error.hpp"
#include "core/file_envelope.hpp"
#include "core/plan.hpp"
#include "core/profile.hpp"
#include "core/run_stats.hpp"
#include "tests/report/format_checks.hpp"
#include "tests/report/report_fixtures.hpp"

using namespace tierpack;
using namespace tierpack::report::testing;
namespace fs = std::filesystem;

namespace {

const std::string kTierpack = std::string(TIERPACK_BINARY_DIR) + "/bin/tierpack";

struct Result {
  int status;
  std::string out, err;
};

Result run(const std::string& args, const std::string& dir) {
  const std::string out = dir + "/stdout", err = dir + "/stderr";
  const int rc = std::system((kTierpack + " report " + args + " >" + out + " 2>" + err).c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, read_file(out), read_file(err)};
}

class ReportCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_dir("cli");
    const Profile p = make_training_profile();
    write_profile(p, dir_ + "/run.tpk");
    const Plan plan = make_plan(p, p.peak_bytes(0) / 2);
    write_plan(plan, dir_ + "/plan.json");
    write_run_stats(make_run_stats(p, plan), dir_ + "/stats.json");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(ReportCli, WritesAllFiles) {
  const auto r = run(dir_ + "/run.tpk --plan " + dir_ + "/plan.json --run-stats " + dir_ + "/stats.json -o " + dir_ + "/out", dir_);
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* f : {"index.html", "trace.json", "memory_snapshot.json", "memory_snapshot.pickle"}) {
    EXPECT_TRUE(fs::exists(dir_ + "/out/" + f)) << f;
    EXPECT_GT(fs::file_size(dir_ + "/out/" + f), 100u) << f;
  }
  EXPECT_NE(r.out.find("Peak "), std::string::npos);
  EXPECT_NE(r.out.find("report: file://"), std::string::npos);
  EXPECT_TRUE(r.err.empty()) << r.err;
}

// `tierpack report --json` (issue 26): the summary, warnings and files as one JSON object, nothing else.
TEST_F(ReportCli, JsonPrintsTheSummaryWarningsAndFiles) {
  const auto r = run(dir_ + "/run.tpk --plan " + dir_ + "/plan.json --run-stats " + dir_ + "/stats.json -o " + dir_ +
                         "/out --json",
                     dir_);
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);  // the whole of stdout
  EXPECT_EQ(j["profile_id"], read_profile(dir_ + "/run.tpk").meta.id);
  ASSERT_TRUE(j["summary"].is_array());
  bool measured = false;
  for (const auto& line : j["summary"]) measured = measured || line.get<std::string>().starts_with("Measured under tierpack");
  EXPECT_TRUE(measured) << j.dump(1);
  EXPECT_TRUE(j["warnings"].is_array());
  EXPECT_EQ(j["files"].size(), 4u);
  EXPECT_NE(j["index"].get<std::string>().find("/out/index.html"), std::string::npos);
  EXPECT_EQ(run(dir_ + "/run.tpk --json --quiet -o " + dir_ + "/out2", dir_).status, 2) << "--json and --quiet";
}

// A GPU run's tiers (`<stats>.gpu<N>.json` beside --run-stats, as `tierpack run --gpu-budget` leaves them) get a
// summary line each, the same one `tierpack run` prints (core/gpu_stats.hpp); a broken one is an error naming it.
TEST_F(ReportCli, TheGpuTiersOfTheRunAreInTheSummary) {
  write_file_atomic(dir_ + "/stats.gpu0.json",
                    R"({"device": 0, "mechanism": "storage", "phase": "planned", "budget": 1073741824,
                        "plan": {"moves": 12, "fits": true, "blocks_run": 2, "bytes_by_block": 3145728,
                                 "bytes_streamed": 268435456, "predicted_ms": 200.0,
                                 "step_ms_measured": [230.0, 210.0, 250.0]},
                        "trials": [{"why": "the hooks' host time", "step_ms": 300.0, "before_ms": 220.0,
                                    "before_from": 9, "kept": false}],
                        "iterations": [{"iteration": 7, "mode": "planned", "bytes_to_host": 536870912,
                                        "bytes_to_device": 536870912, "stalls": 0, "step_chunks": 3, "recomputed": 3,
                                        "bytes_recomputed": 1048576, "peak_live": 805306368,
                                        "peak_reserved": 1207959552}]})");
  const auto r = run(dir_ + "/run.tpk --run-stats " + dir_ + "/stats.json -o " + dir_ + "/out-gpu --json", dir_);
  ASSERT_EQ(r.status, 0) << r.err;
  std::string gpu;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (const auto& line : j["summary"])
    if (line.get<std::string>().starts_with("Measured on the GPU tier gpu0")) gpu = line.get<std::string>();
  EXPECT_NE(gpu.find("12 saved storage(s) move in the plan (2 block(s) run again for 3.00 MiB), the optimizer step "
                     "streams 256.00 MiB of its state each way"),
            std::string::npos) << gpu;
  EXPECT_NE(gpu.find("%); iteration 7: 512.00 MiB to host"),
            std::string::npos) << gpu;
  EXPECT_NE(gpu.find("3 storage(s) made again"), std::string::npos) << gpu;
  // Note [Streamed step]: what the step streams, and in how many chunks
  EXPECT_NE(gpu.find("0 stall(s), the optimizer step in 4 chunks"), std::string::npos) << gpu;
  EXPECT_NE(gpu.find("held 1.12 GiB (768.00 MiB live), OVER the budget"), std::string::npos) << gpu;
  // Note [Measured plans]: the plan's predicted step beside the median of what it ran, and the last trial
  EXPECT_NE(gpu.find("each way, predicted step 200.0 ms, measured 230.0 ms (median of 3 step(s), +15.0%)"),
            std::string::npos) << gpu;
  EXPECT_NE(gpu.find("; a plan made for the hooks' host time ran 300.0 ms a step against 220.0 ms: the plan from "
                     "iteration 9 came back"),
            std::string::npos) << gpu;
  write_file_atomic(dir_ + "/stats.gpu0.json", "{\"iterations\": [");
  const auto bad = run(dir_ + "/run.tpk --run-stats " + dir_ + "/stats.json -o " + dir_ + "/out-gpu2", dir_);
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("stats.gpu0.json"), std::string::npos) << bad.err;
  std::filesystem::remove(dir_ + "/stats.gpu0.json");
}

// Each saved storage's choice (`<stats>.gpu<N>.saved.json`, the plan the run followed): keep, offload, made again by
// its recipe or by running its block, in the report's "GPU choices" section (docs/run.md, "Reading the choices").
TEST_F(ReportCli, TheGpuChoicesOfTheRunAreInTheReport) {
  write_file_atomic(dir_ + "/stats.gpu0.json", R"({"device": 0, "mechanism": "storage", "phase": "planned", "budget": 1073741824,
                                                  "plan": {"moves": 2, "fits": true}, "iterations": []})");
  write_file_atomic(dir_ + "/stats.gpu0.saved.json", R"({"format": "tierpack-gpu-saved", "version": 1, "budget": 1073741824,
    "fill": 0.95,
    "trace": {"storages": [{"bytes": 4194304, "movable": true},
                           {"bytes": 67108864, "movable": true, "block": 0},
                           {"bytes": 33554432, "movable": true, "block": 0, "recompute_ms": 0.5, "recompute_from": [1]}],
              "blocks": [{"ms": 2.0, "from": [0]}],
              "events": [{"kind": "pack", "storage": 0, "t_ms": 0, "live": 1, "window_peak": 1},
                         {"kind": "pack", "storage": 1, "t_ms": 1, "live": 1, "window_peak": 1},
                         {"kind": "pack", "storage": 2, "t_ms": 2, "live": 1, "window_peak": 1},
                         {"kind": "unpack", "storage": 2, "t_ms": 3, "live": 1, "window_peak": 1},
                         {"kind": "unpack", "storage": 1, "t_ms": 4, "live": 1, "window_peak": 1},
                         {"kind": "unpack", "storage": 0, "t_ms": 5, "live": 1, "window_peak": 1}],
              "step_ms": 7, "optimizer_ms": 1, "context_bytes": 0},
    "options": {"limit_bytes": 1000, "d2h_bytes_per_s": 5e10, "h2d_bytes_per_s": 5e10},
    "plan": {"limit_bytes": 1000, "bytes_out": 33554432, "bytes_in": 33554432, "bytes_recomputed": 67108864,
             "bytes_needed": 1, "planned_peak": 1, "fits": true, "over_at": -1, "predicted_ms": 9.5, "stall_ms": 2.5,
             "bound_ms": 7,
             "moves": [{"storage": 1, "copy_at": 1, "release_at": 2, "fetch_at": 3, "use_at": 4, "recompute": true,
                        "by_block": true},
                       {"storage": 2, "copy_at": 2, "release_at": 2, "fetch_at": 3, "use_at": 3, "recompute": false}]}})");
  std::filesystem::remove_all(dir_ + "/out-choices");
  const auto r = run(dir_ + "/run.tpk --run-stats " + dir_ + "/stats.json -o " + dir_ + "/out-choices --quiet", dir_);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string html = read_file(dir_ + "/out-choices/index.html");
  const auto at = html.find("<section id=\"gpu-choices\">");
  ASSERT_NE(at, std::string::npos);
  const std::string section = html.substr(at, html.find("</section>", at) - at);
  EXPECT_NE(section.find("1 storages kept"), std::string::npos) << section;
  EXPECT_NE(section.find("1 offloaded"), std::string::npos) << section;
  EXPECT_NE(section.find("1 made again by running their block"), std::string::npos) << section;
  EXPECT_NE(section.find("<td>recompute-block</td>"), std::string::npos) << section;
  EXPECT_NE(section.find("block 0 (2.000 ms a run)"), std::string::npos) << section;
  EXPECT_NE(section.find("<td>offload</td>"), std::string::npos) << section;
  EXPECT_NE(section.find("predicted step 9.5 ms"), std::string::npos) << section;
  // A broken one is an error naming it, before any report is written.
  write_file_atomic(dir_ + "/stats.gpu0.saved.json", R"({"format": "tierpack-gpu-saved", "version": 1})");
  const auto bad = run(dir_ + "/run.tpk --run-stats " + dir_ + "/stats.json -o " + dir_ + "/out-choices2", dir_);
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("stats.gpu0.saved.json"), std::string::npos) << bad.err;
  std::filesystem::remove(dir_ + "/stats.gpu0.json");
  std::filesystem::remove(dir_ + "/stats.gpu0.saved.json");
}

TEST_F(ReportCli, BudgetFlagDrawsTheBudget) {
  const auto r = run(dir_ + "/run.tpk --budget 50% -o " + dir_ + "/out --quiet", dir_);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string html = read_file(dir_ + "/out/index.html");
  EXPECT_NE(html.find("\"budget\":{\"bytes\":"), std::string::npos);
  EXPECT_NE(html.find("--budget"), std::string::npos);
  // --quiet: one line.
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1);
}

TEST_F(ReportCli, BadUsageExitsTwo) {
  for (const char* args : {"", "--frobnicate x.tpk", "run.tpk --budget lots", "run.tpk --link-bandwidth fast"}) {
    const auto r = run(args, dir_);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
}

TEST_F(ReportCli, UnreadableInputsExitOne) {
  write_file_atomic(dir_ + "/bad.json", "{\"format\": \"tierpack-run-stats\", \"version\": 99}");
  write_file_atomic(dir_ + "/garbage.tpk", "not a profile");
  for (const std::string& args : {dir_ + "/missing.tpk", dir_ + "/garbage.tpk",
                                 dir_ + "/run.tpk --run-stats " + dir_ + "/bad.json -o " + dir_ + "/o2",
                                 dir_ + "/run.tpk --plan " + dir_ + "/missing.json -o " + dir_ + "/o3"}) {
    const auto r = run(args, dir_);
    EXPECT_EQ(r.status, 1) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
}

// A distributed job (docs/distributed.md): one report per rank and a merged view of them.
TEST_F(ReportCli, SeveralRanksGetOneReportEachAndAMergedView) {
  for (int rank = 0; rank < 2; ++rank) {
    FixtureOptions o;
    Profile p = make_training_profile(o);
    p.meta.rank = rank;
    p.meta.world_size = 2;
    write_profile(p, dir_ + "/out." + std::to_string(rank) + ".tpk");
  }
  const auto r = run(dir_ + "/out.%r.tpk -o " + dir_ + "/job", dir_);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("(2 ranks"), std::string::npos) << r.out;
  for (const char* f : {"rank0/index.html", "rank1/index.html", "rank1/trace.json", "index.html", "trace.json"})
    EXPECT_TRUE(fs::exists(dir_ + "/job/" + f)) << f;
  const std::string index = read_file(dir_ + "/job/index.html");
  EXPECT_NE(index.find("href=\"rank0/index.html\""), std::string::npos);
  EXPECT_NE(index.find("href=\"rank1/index.html\""), std::string::npos);
  EXPECT_NE(index.find("1 of 2"), std::string::npos);

  // The merged trace follows the format's rules and keeps both ranks' tracks apart.
  const auto merged = nlohmann::json::parse(read_file(dir_ + "/job/trace.json"));
  const auto one = nlohmann::json::parse(read_file(dir_ + "/job/rank0/trace.json"));
  EXPECT_EQ(merged.at("traceEvents").size(), 2 * one.at("traceEvents").size());
  double end_us = 0;
  for (const auto& e : merged.at("traceEvents"))
    end_us = std::max(end_us, e.value("ts", 0.0) + e.value("dur", 0.0));
  const auto problems = validate_trace(merged, end_us);
  EXPECT_TRUE(problems.empty()) << problems.front();
  std::set<std::string> names;
  for (const auto& e : merged.at("traceEvents"))
    if (e.value("name", "") == "process_name") names.insert(e.at("args").at("name").get<std::string>());
  EXPECT_TRUE(std::any_of(names.begin(), names.end(), [](const std::string& n) { return n.rfind("rank 0: ", 0) == 0; }));
  EXPECT_TRUE(std::any_of(names.begin(), names.end(), [](const std::string& n) { return n.rfind("rank 1: ", 0) == 0; }));

  // Listing the files works the same; a --plan for several ranks must name each rank's file.
  EXPECT_EQ(run(dir_ + "/out.0.tpk " + dir_ + "/out.1.tpk -o " + dir_ + "/job2 --quiet", dir_).status, 0);
  const auto bad = run(dir_ + "/out.%r.tpk --plan " + dir_ + "/plan.json -o " + dir_ + "/job3", dir_);
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("%r"), std::string::npos) << bad.err;
  const auto none = run(dir_ + "/nothing.%r.tpk -o " + dir_ + "/job4", dir_);
  EXPECT_EQ(none.status, 1);
  EXPECT_NE(none.err.find("no profile matches"), std::string::npos) << none.err;
}

TEST(RunStatsFile, RoundTripsAndRejectsNewerVersions) {
  const auto dir = scratch_dir("stats");
  const Profile p = make_training_profile();
  const auto s = make_run_stats(p, make_plan(p, p.peak_bytes(0) / 2));
  write_run_stats(s, dir + "/s.json");
  EXPECT_EQ(read_run_stats(dir + "/s.json"), s);
  write_file_atomic(dir + "/new.json", "{\"format\":\"tierpack-run-stats\",\"version\":2}");
  EXPECT_THROW(read_run_stats(dir + "/new.json"), format_error);
  write_file_atomic(dir + "/other.json", "{\"format\":\"tierpack-plan\",\"version\":1}");
  EXPECT_THROW(read_run_stats(dir + "/other.json"), format_error);
  write_file_atomic(dir + "/back.json",
                    "{\"format\":\"tierpack-run-stats\",\"version\":1,\"moves\":[{\"kind\":\"evict\",\"start_ns\":5,\"end_ns\":1}]}");
  EXPECT_THROW(read_run_stats(dir + "/back.json"), format_error);
  fs::remove_all(dir);
}

}  // namespace

// trace.json against the trace event format's rules: known phases, timestamps in microseconds,
// complete slices that nest on their track, every async begin matched by one end, numeric counter
// arguments, named processes and threads; and its content against the profile.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "report/perfetto_trace.hpp"
#include "report/summary.hpp"
#include "tests/report/format_checks.hpp"
#include "tests/report/report_fixtures.hpp"

using namespace tierpack;
using namespace tierpack::report;
using namespace tierpack::report::testing;
using nlohmann::json;

namespace {

struct Fixture {
  Profile profile = make_training_profile();
  Plan plan = make_plan(profile, profile.peak_bytes(0) / 2);
  RunStats run = make_run_stats(profile, plan);
  json trace;
  ReportModel model = [&] {
    ReportInputs in;
    in.profile = &profile;
    in.plan = &plan;
    in.run_stats = &run;
    return build_model(in, {});
  }();
  Fixture() { trace = json::parse(render_trace(model)); }
};

TEST(PerfettoTrace, FollowsTheEventFormatRules) {
  Fixture f;
  double end_us = static_cast<double>(f.profile.iteration_ns) / 1000;
  for (const auto& mv : f.run.moves) end_us = std::max(end_us, static_cast<double>(mv.end_ns) / 1000);
  const auto problems = validate_trace(f.trace, end_us);
  EXPECT_TRUE(problems.empty()) << problems.size() << " problems, first: " << (problems.empty() ? "" : problems.front());
}

TEST(PerfettoTrace, ValidatorCatchesBrokenTraces) {
  const json broken = json::parse(R"({"traceEvents":[
    {"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"p"}},
    {"name":"thread_name","ph":"M","pid":1,"tid":0,"args":{"name":"t"}},
    {"name":"a","ph":"X","ts":0,"dur":10,"pid":1,"tid":0},
    {"name":"b","ph":"X","ts":5,"dur":10,"pid":1,"tid":0},
    {"name":"t","cat":"tensor","ph":"b","id":"0x1","ts":1,"pid":1,"tid":0},
    {"name":"c","ph":"C","ts":1,"pid":1,"args":{"bytes":"12"}},
    {"name":"x","ph":"X","ts":1000000,"dur":1,"pid":1,"tid":0}]})");
  const auto problems = validate_trace(broken, 100);
  EXPECT_GE(problems.size(), 4u);  // overlap, unmatched begin, string counter, ts out of range
}

TEST(PerfettoTrace, OpsAreSlicesInMicroseconds) {
  Fixture f;
  std::vector<json> ops;
  for (const auto& e : f.trace["traceEvents"])
    if (e["ph"] == "X" && e["pid"] == kTracePidOps) ops.push_back(e);
  ASSERT_EQ(ops.size(), f.profile.ops.size());
  for (const auto& e : ops) {
    const auto& op = f.profile.ops[e["args"]["op"].get<std::size_t>()];
    EXPECT_EQ(e["name"], op.name);
    EXPECT_NEAR(e["ts"].get<double>(), static_cast<double>(op.begin_ns) / 1000, 5e-4);
    EXPECT_NEAR(e["dur"].get<double>(), static_cast<double>(op.end_ns - op.begin_ns) / 1000, 5e-4);
  }
}

TEST(PerfettoTrace, TensorLifetimesAreMatchedAsyncSlices) {
  Fixture f;
  std::map<std::string, std::pair<double, double>> life;
  for (const auto& e : f.trace["traceEvents"]) {
    if (e["ph"] == "b") life[e["id"]].first = e["ts"];
    if (e["ph"] == "e") life[e["id"]].second = e["ts"];
  }
  EXPECT_EQ(life.size(), f.profile.tensors.size());
  const TimeAxis axis(f.profile);
  for (const auto& t : f.profile.tensors) {
    char id[24];
    std::snprintf(id, sizeof id, "0x%x", t.id);
    ASSERT_TRUE(life.count(id)) << id;
    EXPECT_NEAR(life[id].first, axis.tensor_begin(t) / 1000, 5e-4);
    EXPECT_NEAR(life[id].second, axis.tensor_end(t) / 1000, 5e-4);
  }
}

TEST(PerfettoTrace, CountersReachThePeakAndMigrationsAreAllThere) {
  Fixture f;
  std::map<std::string, double> max;
  std::size_t migrations = 0;
  for (const auto& e : f.trace["traceEvents"]) {
    if (e["ph"] == "C") max[e["name"]] = std::max(max[e["name"]], e["args"]["bytes"].get<double>());
    if (e["ph"] == "X" && e["pid"] == kTracePidMigrations) ++migrations;
  }
  ASSERT_TRUE(max.count("gpu0 (profile)"));
  EXPECT_EQ(max["gpu0 (profile)"], static_cast<double>(f.profile.peak_bytes(0)));
  EXPECT_TRUE(max.count("gpu0 (plan)"));
  EXPECT_TRUE(max.count("dram0 (run)"));
  EXPECT_EQ(migrations, f.plan.schedule.size() + f.run.moves.size() + f.run.stalls.size());
}

TEST(PerfettoTrace, OverlappingOpsOfOneThreadGoToLanes) {
  Profile p = make_training_profile();
  // Make op 5 overlap op 6 without containing it.
  p.ops[5].end_ns = (p.ops[6].begin_ns + p.ops[6].end_ns) / 2;
  ReportInputs in;
  in.profile = &p;
  const auto trace = json::parse(render_trace(build_model(in, {})));
  const auto problems = validate_trace(trace, static_cast<double>(p.iteration_ns) / 1000);
  EXPECT_TRUE(problems.empty()) << problems.front();
}

}  // namespace

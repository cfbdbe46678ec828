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
#include "tests/report/report_fixtures.hpp"

using namespace tierpack;
using namespace tierpack::report;
using namespace tierpack::report::testing;
using nlohmann::json;

namespace {

/// Problems with a trace; empty when it follows the rules.
std::vector<std::string> validate_trace(const json& trace, double end_us) {
  std::vector<std::string> bad;
  auto fail = [&](const std::string& what, const json& e) { bad.push_back(what + ": " + e.dump().substr(0, 200)); };
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array()) return {"no traceEvents array"};
  std::map<std::tuple<int, std::string, std::string>, std::vector<double>> open;  // (pid, cat, id) -> begin ts
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> slices;   // (pid, tid) -> [ts, end]
  std::set<int> named_pids;
  std::set<std::pair<int, int>> named_tids, used_tids;
  for (const auto& e : trace["traceEvents"]) {
    if (!e.contains("ph") || !e["ph"].is_string()) { fail("no ph", e); continue; }
    if (!e.contains("pid") || !e["pid"].is_number_integer()) { fail("no integer pid", e); continue; }
    if (!e.contains("name") || !e["name"].is_string()) { fail("no name", e); continue; }
    const std::string ph = e["ph"];
    const int pid = e["pid"];
    if (ph == "M") {
      const std::string n = e["name"];
      if (n == "process_name") named_pids.insert(pid);
      else if (n == "thread_name") named_tids.insert({pid, e.at("tid").get<int>()});
      else if (n != "process_sort_index") fail("unknown metadata", e);
      if (!e.contains("args") || !e["args"].is_object()) fail("metadata without args", e);
      continue;
    }
    if (!e.contains("ts") || !e["ts"].is_number()) { fail("no numeric ts", e); continue; }
    const double ts = e["ts"];
    if (ts < 0 || ts > end_us + 1e-3) fail("ts outside the iteration (microseconds?)", e);
    if (ph == "X") {
      if (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0) { fail("X without dur >= 0", e); continue; }
      const double end = ts + e["dur"].get<double>();
      if (end > end_us + 1e-3) fail("slice ends after the iteration", e);
      const std::pair<int, int> track{pid, e.at("tid").get<int>()};
      slices[track].push_back({ts, end});
      used_tids.insert(track);
    } else if (ph == "b" || ph == "e") {
      if (!e.contains("cat") || !e.contains("id") || !e["id"].is_string()) { fail("async event without cat/id", e); continue; }
      const auto key = std::make_tuple(pid, e["cat"].get<std::string>(), e["id"].get<std::string>());
      if (ph == "b") {
        open[key].push_back(ts);
      } else if (open[key].empty()) {
        fail("async end without begin", e);
      } else {
        if (ts < open[key].back()) fail("async end before its begin", e);
        open[key].pop_back();
      }
    } else if (ph == "C") {
      if (!e.contains("args") || !e["args"].is_object() || e["args"].empty()) { fail("counter without args", e); continue; }
      for (const auto& [k, v] : e["args"].items())
        if (!v.is_number()) fail("counter arg '" + k + "' not numeric", e);
    } else {
      fail("unexpected phase " + ph, e);
    }
    if (!named_pids.count(pid)) fail("event before its process is named", e);
  }
  for (const auto& [key, begins] : open)
    if (!begins.empty()) bad.push_back("async begin without end: id " + std::get<2>(key));
  for (const auto& track : used_tids)
    if (!named_tids.count(track)) bad.push_back("unnamed thread " + std::to_string(track.second) + " of pid " + std::to_string(track.first));
  // Complete slices on one track must nest: sort by start (longer first) and keep a stack.
  for (auto& [track, v] : slices) {
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
    std::vector<double> stack;
    for (const auto& [b, e] : v) {
      while (!stack.empty() && stack.back() <= b + 1e-9) stack.pop_back();
      if (!stack.empty() && e > stack.back() + 1e-9) {
        bad.push_back("slices overlap without nesting on pid " + std::to_string(track.first) + " tid " + std::to_string(track.second));
        break;
      }
      stack.push_back(e);
    }
  }
  return bad;
}

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

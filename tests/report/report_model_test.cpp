// The report's shared statistics: peaks equal the profile's, series keep their peaks through
// downsampling, classes and idle gaps follow their rules, the savings rows are the planner's plans.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "core/error.hpp"
#include "placer/classify.hpp"
#include "placer/planner.hpp"
#include "report/page_map.hpp"
#include "report/savings.hpp"
#include "report/summary.hpp"
#include "report/timeline.hpp"
#include "tests/report/report_fixtures.hpp"

using namespace tierpack;
using namespace tierpack::report;
using tierpack::report::testing::FixtureOptions;
using tierpack::report::testing::make_plan;
using tierpack::report::testing::make_run_stats;
using tierpack::report::testing::make_training_profile;

namespace {

ReportModel model_of(const Profile& p, const Plan* plan = nullptr, const RunStats* run = nullptr, ReportOptions opt = {}) {
  ReportInputs in;
  in.profile = &p;
  in.plan = plan;
  in.run_stats = run;
  return build_model(in, opt);
}

Profile tiny() {
  Profile p;
  p.meta.page_tracer = "none";
  for (int i = 0; i < 4; ++i) {
    OpRecord op;
    op.index = i;
    op.name = "op" + std::to_string(i);
    op.begin_ns = 100u * static_cast<unsigned>(i);
    op.end_ns = op.begin_ns + 50;
    p.ops.push_back(op);
  }
  p.iteration_ns = 400;
  auto add = [&](std::uint64_t bytes, OpIndex b, OpIndex d, std::vector<OpIndex> uses) {
    TensorRecord t;
    t.id = static_cast<TensorId>(p.tensors.size());
    t.bytes = bytes;
    t.birth_op = b;
    t.death_op = d;
    t.uses = std::move(uses);
    p.tensors.push_back(t);
  };
  add(1000, kBeforeIteration, kAfterIteration, {1});  // persistent
  add(500, 0, 1, {0, 1});                             // temporary
  add(300, 1, 3, {1, 3});                             // temporary (3 ops)
  p.validate();
  return p;
}

TEST(ReportTimeline, StepsAndTensorIntervals) {
  const Profile p = tiny();
  TimeAxis axis(p);
  EXPECT_EQ(axis.step_begin(-1), 0);
  EXPECT_EQ(axis.step_begin(2), 200);
  EXPECT_EQ(axis.step_end(3), 400);
  EXPECT_EQ(axis.end_ns(), 400);
  EXPECT_EQ(axis.tensor_begin(p.tensors[1]), 0);
  EXPECT_EQ(axis.tensor_end(p.tensors[1]), 200);  // dies after op 1's step
  EXPECT_EQ(axis.tensor_end(p.tensors[0]), 400);
  EXPECT_EQ(axis.step_at(150), 1);
  EXPECT_EQ(axis.step_at(-1), -1);
}

TEST(ReportTimeline, IdleGapsWrapForPersistentTensors) {
  const Profile p = tiny();
  TimeAxis axis(p);
  const auto gaps = idle_gaps(p.tensors[0], axis);  // used only by op 1 (100..150)
  ASSERT_EQ(gaps.size(), 2u);
  EXPECT_TRUE(gaps[0].wraps);
  EXPECT_DOUBLE_EQ(gaps[0].length_ns, 100 + 250);  // head 0..100 plus tail 150..400
  EXPECT_DOUBLE_EQ(gaps[1].begin_ns, 150);
  const auto g2 = idle_gaps(p.tensors[2], axis);  // born op 1, used 1 and 3, dies after op 3's step
  ASSERT_EQ(g2.size(), 2u);
  EXPECT_DOUBLE_EQ(g2[0].begin_ns, 150);
  EXPECT_DOUBLE_EQ(g2[0].end_ns, 300);
  EXPECT_FALSE(g2[0].wraps);
  EXPECT_DOUBLE_EQ(g2[1].begin_ns, 350);  // after its last use until it is freed
  EXPECT_TRUE(g2[1].ends_in_death);
}

TEST(ReportTimeline, DownsampleKeepsThePeak) {
  SeriesBuilder b({"a", "b"});
  for (int i = 0; i < 10000; ++i) {
    b.add(i, i, static_cast<std::size_t>(i % 2), (i % 7 == 3) ? 50 : 1);
    if (i == 4321) b.add(i, i, 0, 100000);
    if (i == 4322) b.add(i, i, 0, -100000);
  }
  const auto full = b.build(10000);
  const auto small = downsample(full, 300);
  EXPECT_LE(small.t.size(), 301u);
  EXPECT_EQ(small.peak_total(), full.peak_total());
  EXPECT_GT(full.peak_total(), 100000u);
}

TEST(ReportTimeline, ZeroWidthStepsKeepTheirOwnPoint) {
  SeriesBuilder b({"x"});
  b.add(0, -1, 0, 10);
  b.add(100, 1, 0, 1000);   // born at step 1 ...
  b.add(100, 2, 0, -1000);  // ... dead after it, step 2 starts at the same time
  const auto s = b.build(200);
  EXPECT_EQ(s.peak_total(), 1010u);
}

TEST(ReportClasses, AreThePlacersClasses) {
  const Profile p = make_training_profile();
  const auto m = model_of(p);
  ASSERT_EQ(m.classes.size(), p.tensors.size());
  for (const auto& t : p.tensors) {
    EXPECT_EQ(m.classes[t.id], placer::classify_tensor(p, t)) << t.id;
    if (t.has(kTensorParameter) || t.has(kTensorOptimizerState)) {
      EXPECT_EQ(m.classes[t.id], TensorClass::persistent) << t.id;
    }
  }
  EXPECT_NE(m.classifier.find("placer"), std::string::npos);
}

TEST(ReportModel, PeaksMatchTheProfile) {
  const Profile p = make_training_profile();
  const auto m = model_of(p);
  ASSERT_EQ(m.devices.size(), 2u);  // host and gpu0
  for (const auto& d : m.devices) {
    EXPECT_EQ(d.peak_bytes, p.peak_bytes(d.device)) << d.name;
    std::uint64_t by_class = 0;
    for (auto b : d.peak_by_class) by_class += b;
    EXPECT_EQ(by_class, d.peak_bytes);
    EXPECT_LE(d.idle_at_peak_bytes, d.peak_bytes);
  }
  EXPECT_EQ(m.devices[m.main_device].name, "gpu0");
  ASSERT_FALSE(m.memory.empty());
  // The stacked profile chart's peak is at least each device's peak and at most their sum.
  EXPECT_GE(m.memory[0].peak_total, p.peak_bytes(0));
  EXPECT_LE(m.memory[0].peak_total, p.peak_bytes(0) + p.peak_bytes(-1));
  EXPECT_EQ(m.memory[0].series.names.front(), "gpu0");  // fast tier at the bottom
  EXPECT_EQ(m.memory[0].fast_peak, p.peak_bytes(0));
  EXPECT_EQ(m.memory[0].series.peak_total(), m.memory[0].peak_total);  // downsampling kept it
}

TEST(ReportModel, ClassTableAddsUp) {
  const Profile p = make_training_profile();
  const auto m = model_of(p);
  std::uint64_t count = 0, bytes = 0, all_bytes = 0;
  for (const auto& r : m.class_rows) count += r.count, bytes += r.bytes;
  for (const auto& t : p.tensors) all_bytes += t.bytes;
  EXPECT_EQ(count, p.tensors.size());
  EXPECT_EQ(bytes, all_bytes);
  EXPECT_GT(m.class_rows[static_cast<int>(TensorClass::activation)].count, 0u);
  EXPECT_GT(m.class_rows[static_cast<int>(TensorClass::temporary)].count, 0u);
}

TEST(ReportModel, TopTensorsAreOrderedByBytesTimesLifetime) {
  const Profile p = make_training_profile();
  const auto m = model_of(p);
  ASSERT_FALSE(m.top_tensors.empty());
  for (std::size_t i = 1; i < m.top_tensors.size(); ++i)
    EXPECT_GE(m.top_tensors[i - 1].byte_seconds(), m.top_tensors[i].byte_seconds());
  double best = 0;
  for (const auto& t : p.tensors) {
    TimeAxis axis(p);
    best = std::max(best, static_cast<double>(t.bytes) * (axis.tensor_end(t) - axis.tensor_begin(t)) * 1e-9);
  }
  EXPECT_DOUBLE_EQ(m.top_tensors.front().byte_seconds(), best);
  // Lifetime rows: the largest tensors first.
  for (std::size_t i = 1; i < m.lifetimes.rows.size(); ++i)
    EXPECT_GE(m.lifetimes.rows[i - 1].tensor.bytes, m.lifetimes.rows[i].tensor.bytes);
}

TEST(ReportModel, PageStatsCountTheProfilesPages) {
  const Profile p = make_training_profile();
  const auto m = model_of(p);
  std::uint64_t fs = 0, hidden = 0, fs_t = 0;
  for (const auto& pg : p.pages) fs += pg.false_shared, hidden += pg.hidden_windows > 0;
  for (const auto& t : p.tensors) fs_t += t.has(kTensorFalseShared);
  EXPECT_GT(fs, 0u);
  EXPECT_GT(hidden, 0u);
  EXPECT_EQ(m.pages.false_shared_pages, fs);
  EXPECT_EQ(m.pages.hidden_pages, hidden);
  EXPECT_EQ(m.pages.false_shared_tensors, fs_t);
}

TEST(ReportPageMap, CellsCoverEveryUsedPageAndMarkFalseSharing) {
  const Profile p = make_training_profile();
  const auto cls = model_of(p).classes;
  const auto maps = build_page_maps(p, cls, 16384);
  ASSERT_EQ(maps.size(), 2u);
  const auto& host = maps[0];
  EXPECT_EQ(host.name, "host");
  std::uint64_t per_class = host.mixed_pages;
  for (auto c : host.single_class_pages) per_class += c;
  EXPECT_EQ(per_class, host.pages);
  EXPECT_EQ(host.pages_per_cell, 1u);
  EXPECT_EQ(host.cells.size(), host.pages);
  const auto marked = std::count_if(host.cells.begin(), host.cells.end(), [](auto c) { return (c & kCellFalseShared) != 0; });
  EXPECT_EQ(static_cast<std::uint64_t>(marked), host.false_shared_pages);
  // Few cells: many pages per cell, still every page counted.
  const auto coarse = build_page_maps(p, cls, 7);
  EXPECT_LE(coarse[0].cells.size(), 7u);
  EXPECT_EQ(coarse[0].pages, host.pages);
}

TEST(ReportSavings, RowsArePlansAtEachBudget) {
  const Profile p = make_training_profile({.layers = 8});
  const auto peak = p.peak_bytes(0);
  ReportOptions opt;
  opt.budget_fractions = {0.6, 0.45};
  opt.budget_bytes = 2 * peak;  // room for everything, page-group rounding included
  const auto m = model_of(p, nullptr, nullptr, opt);
  const auto& s = m.savings;
  EXPECT_EQ(s.peak_bytes, peak);
  EXPECT_EQ(s.model_source, "the tiers recorded in the profile");
  EXPECT_EQ(s.bandwidth, 55e9);
  ASSERT_EQ(s.rows.size(), 3u);  // largest budget first
  // With room for everything nothing moves.
  EXPECT_EQ(s.rows[0].label.rfind("--budget ", 0), 0u);
  EXPECT_TRUE(s.rows[0].fits);
  EXPECT_EQ(s.rows[0].moves, 0u);
  EXPECT_EQ(s.rows[0].bytes_to_slow, 0u);
  const double fractions[] = {2.0, 0.6, 0.45};
  for (std::size_t i = 0; i < s.rows.size(); ++i) {
    const auto& r = s.rows[i];
    EXPECT_EQ(r.source, "planner");
    EXPECT_TRUE(r.note.rfind("no plan", 0) != 0) << r.note;
    EXPECT_NEAR(static_cast<double>(r.budget_bytes), fractions[i] * static_cast<double>(peak), 1.0);
    EXPECT_EQ(r.saved_bytes, peak > r.fast_peak_bytes ? peak - r.fast_peak_bytes : 0);
    if (r.fits) {
      EXPECT_LE(r.fast_peak_bytes, r.budget_bytes);
    }
  }
  // Below the peak, fitting means moving or reading in place.
  if (s.rows[1].fits) {
    EXPECT_GT(s.rows[1].saved_bytes, 0u);
    EXPECT_GE(s.rows[1].step_ns, m.axis.end_ns());
  }
  // The same numbers as `tierpack plan` gives.
  placer::PlanOptions po;
  po.device = 0;
  po.fast_budget.fraction = 0.6;
  const Plan plan = placer::make_plan(p, p.topology, po);
  EXPECT_EQ(s.rows[1].fast_peak_bytes, plan.prediction.fast_peak_bytes);
  EXPECT_EQ(s.rows[1].bytes_to_fast, plan.prediction.bytes_to_fast);
  EXPECT_EQ(s.rows[1].moves, plan.schedule.size());
}

TEST(ReportModel, PlanAndRunAddChartsRowsAndMigrations) {
  const Profile p = make_training_profile();
  const auto budget = p.peak_bytes(0) * 6 / 10;
  const Plan plan = make_plan(p, budget);
  const RunStats run = make_run_stats(p, plan);
  const auto m = model_of(p, &plan, &run);
  ASSERT_EQ(m.memory.size(), 3u);
  EXPECT_EQ(m.memory[1].source, "plan");
  EXPECT_EQ(m.memory[2].source, "run");
  EXPECT_EQ(m.budget_bytes, budget);
  EXPECT_EQ(m.budget_source, "plan");
  EXPECT_TRUE(m.warnings.empty()) << m.warnings.front();
  std::uint64_t planned_moves = 0;
  for (const auto& r : m.migrations)
    if (r.source == "plan") planned_moves += r.total_count;
  EXPECT_EQ(planned_moves, plan.schedule.size());
  bool plan_row = false, run_row = false;
  for (const auto& r : m.savings.rows) plan_row |= r.source == "plan", run_row |= r.source == "run";
  EXPECT_TRUE(plan_row);
  EXPECT_TRUE(run_row);
  // Planned occupancy follows the placer's accounting: the fast tier within the budget, and below
  // the profile's peak.
  EXPECT_EQ(m.memory[1].fast_peak, plan.prediction.fast_peak_bytes);
  EXPECT_LE(m.memory[1].fast_peak, budget);
  EXPECT_LT(m.memory[1].fast_peak, m.memory[0].fast_peak);
}

TEST(ReportModel, PlanForAnotherProfileIsRefusedOrWarnedAbout) {
  const Profile p = make_training_profile();
  const Profile other = make_training_profile({.layers = 3});
  Plan plan = make_plan(other, other.peak_bytes(0) / 2);
  // Known identities that differ (Note [Profile identity], issue 26): refused, naming both.
  try {
    (void)model_of(p, &plan);
    ADD_FAILURE() << "another profile's plan was accepted";
  } catch (const logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("is the plan of profile report-fixture-3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(profile report-fixture-6)"), std::string::npos) << e.what();
  }
  // A plan of unknown identity: warned about (identity unknown, and its allocation signature).
  plan.profile_id.clear();
  const auto m = model_of(p, &plan);
  auto warned = [&](const std::string& what) {
    return std::any_of(m.warnings.begin(), m.warnings.end(), [&](const std::string& w) { return w.find(what) != w.npos; });
  };
  EXPECT_TRUE(warned("identity unknown"));
  EXPECT_TRUE(warned("allocation signature"));
}

TEST(ReportModel, SummarySentencesCarryTheNumbers) {
  const Profile p = make_training_profile();
  const auto m = model_of(p);
  ASSERT_GE(m.summary.size(), 4u);
  const std::string all = std::accumulate(m.summary.begin(), m.summary.end(), std::string{},
                                          [](std::string a, const std::string& b) { return a + b + "\n"; });
  EXPECT_NE(all.find("Peak "), std::string::npos);
  EXPECT_NE(all.find("gpu0"), std::string::npos);
  EXPECT_NE(all.find("tensors of different lifetime classes"), std::string::npos);
  EXPECT_NE(all.find("allocate differently"), std::string::npos);
}

TEST(ReportModel, EmptyAndHostOnlyProfiles) {
  Profile empty;
  empty.meta.page_tracer = "none";
  const auto m = model_of(empty);
  EXPECT_TRUE(m.devices.empty());
  EXPECT_FALSE(m.summary.empty());
  const Profile host = make_training_profile({.device = -1, .iterations = 1});
  const auto h = model_of(host);
  ASSERT_EQ(h.devices.size(), 1u);
  EXPECT_EQ(h.devices[0].name, "host");
  EXPECT_EQ(h.devices[0].peak_bytes, host.peak_bytes(-1));
  // A one-tier profile: the planner runs on a preset, and the page says so.
  EXPECT_EQ(h.savings.model_source.rfind("assumed: preset:ddr5-cxl", 0), 0u) << h.savings.model_source;
  ASSERT_FALSE(h.savings.rows.empty());
}

TEST(ReportModel, IdleThresholdIsRound) {
  EXPECT_EQ(idle_threshold_for(232e6), 20e6);
  EXPECT_EQ(idle_threshold_for(1e9), 100e6);
  EXPECT_EQ(idle_threshold_for(5e3), 1e3);
}

}  // namespace

// Note [Run counters] (issue 26): a host run's statistics have late prefetches but no stall time (the
// host runtime never waits); the report said "stalls 0 ns" next to the CLI's "18 late moves". It now
// prints the count and "not measured", with the CLI's words, and the fast peak against the budget.
TEST(ReportModel, HostRunStallTimeIsNotMeasuredNotZero) {
  const Profile p = make_training_profile();
  const Plan plan = make_plan(p, p.peak_bytes(0) / 2);
  RunStats run = make_run_stats(p, plan);
  run.source = "tierpack run";
  run.stall_ns_measured = false;
  for (auto& it : run.iterations) {
    it.stalls = 6;
    it.stall_ns = 0;
    it.fast_peak_bytes = plan.fast_budget_bytes + 4096;
  }
  const ReportModel m = model_of(p, &plan, &run);
  std::string line;
  for (const auto& s : m.summary)
    if (s.starts_with("Measured under tierpack")) line = s;
  ASSERT_FALSE(line.empty());
  EXPECT_NE(line.find("18 late prefetch(es), stall time not measured"), std::string::npos) << line;
  EXPECT_EQ(line.find("stalls 0"), std::string::npos) << line;
  EXPECT_NE(line.find("(over it by 4.00 KiB)"), std::string::npos) << line;
  bool row = false;
  for (const auto& r : m.savings.rows)
    if (r.source == "run") {
      row = true;
      EXPECT_FALSE(r.stall_measured);
      EXPECT_DOUBLE_EQ(r.late_prefetches, 6.0);
    }
  EXPECT_TRUE(row);
}

namespace {
std::string sentence(const ReportModel& m, const std::string& start) {
  for (const auto& s : m.summary)
    if (s.starts_with(start)) return s;
  return {};
}
}  // namespace

// Issue 26 (predictions that look free): a traced profile's op times are stretched, so its predictions
// are lower bounds; the summary and the savings section say so and why (Note [Lower-bound predictions]).
TEST(ReportModel, TracedProfilePredictionsAreLowerBounds) {
  const Profile traced = make_training_profile({.device = -1, .page_data = true});
  ASSERT_EQ(traced.meta.page_tracer, "uffd-wp");
  const auto m = model_of(traced);
  ASSERT_FALSE(m.savings.lower_bound.empty());
  EXPECT_NE(m.savings.lower_bound.front().find("under the uffd-wp page tracer"), std::string::npos) << m.savings.lower_bound.front();
  const std::string s = sentence(m, "Predicted step times are lower bounds: ");
  EXPECT_NE(s.find("uffd-wp page tracer"), std::string::npos) << s;
  // An untraced host profile has no reason from its op times.
  const auto plain = model_of(make_training_profile({.device = -1, .page_data = false}));
  for (const auto& why : plain.savings.lower_bound) EXPECT_EQ(why.find("page tracer"), std::string::npos) << why;
  // A GPU profile: op times are launch times.
  const auto gpu = model_of(make_training_profile({.page_data = false}));
  ASSERT_FALSE(gpu.savings.lower_bound.empty());
  EXPECT_NE(gpu.savings.lower_bound.front().find("launches on the host thread"), std::string::npos);
}

// A run whose slow tier this machine lacked (emulated on node 0) is marked in the summary, the run's
// chart and its savings row; a measured fast peak above the profiled peak is explained.
TEST(ReportModel, EmulatedTierAndPeakAboveTheProfiledOneAreExplained) {
  const Profile p = make_training_profile();
  const Plan plan = make_plan(p, p.peak_bytes(0) / 2);
  RunStats run = make_run_stats(p, plan);
  {
    const auto m = model_of(p, &plan, &run);
    EXPECT_TRUE(sentence(m, "EMULATED").empty());
  }
  run.emulated_tiers = {"cxl0 (NUMA node 1)"};
  for (auto& it : run.iterations) it.fast_peak_bytes = p.peak_bytes(0) + (1 << 20);
  const auto m = model_of(p, &plan, &run);
  const std::string emu = sentence(m, "EMULATED: ");
  EXPECT_NE(emu.find("cxl0 (NUMA node 1) was not on the machine and was emulated on NUMA node 0"), std::string::npos) << emu;
  EXPECT_NE(m.memory.back().title.find("cxl0 (NUMA node 1) EMULATED on node 0"), std::string::npos) << m.memory.back().title;
  bool row = false;
  for (const auto& r : m.savings.rows) row |= r.source == "run" && r.label == "measured run (emulated tier)";
  EXPECT_TRUE(row);
  const std::string peak = sentence(m, "The measured fast peak");
  EXPECT_NE(peak.find("is above the profiled peak of live tensor bytes"), std::string::npos) << peak;
  EXPECT_NE(peak.find("by 1.00 MiB"), std::string::npos) << peak;
  EXPECT_NE(peak.find("the plan's page groups alone need"), std::string::npos) << peak;
}

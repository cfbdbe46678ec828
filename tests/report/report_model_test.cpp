// The report's shared statistics: peaks equal the profile's, series keep their peaks through
// downsampling, classes and idle gaps follow their rules, the savings estimate behaves.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "report/lifetime_class.hpp"
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

TEST(ReportClasses, LifetimeRules) {
  const Profile p = make_training_profile();
  const auto cls = classify_lifetimes(p);
  for (const auto& t : p.tensors) {
    if (t.has(kTensorParameter) || t.has(kTensorOptimizerState) || t.has(kTensorGradient)) {
      EXPECT_EQ(cls[t.id], TensorClass::persistent) << t.id;
    }
    if (t.has(kTensorSavedForBackward) && t.death_op - t.birth_op > kTemporaryMaxOps) {
      EXPECT_EQ(cls[t.id], TensorClass::activation) << t.id;
    }
  }
  EXPECT_EQ(classify_lifetimes(tiny())[1], TensorClass::temporary);
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
  const auto cls = classify_lifetimes(p);
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

TEST(ReportSavings, EstimateIsMonotoneAndFitsAtThePeak) {
  const Profile p = make_training_profile({.layers = 8});
  TimeAxis axis(p);
  const auto peak = p.peak_bytes(0);
  const auto at_peak = estimate_offload(p, axis, 0, peak, peak, 55e9);
  EXPECT_TRUE(at_peak.feasible);
  EXPECT_EQ(at_peak.bytes_to_slow, 0u);
  EXPECT_EQ(at_peak.saved_bytes, 0u);
  std::uint64_t prev = 0;
  for (double f : {0.9, 0.75, 0.6, 0.5}) {
    const auto budget = static_cast<std::uint64_t>(f * static_cast<double>(peak));
    const auto r = estimate_offload(p, axis, 0, peak, budget, 55e9);
    EXPECT_EQ(r.saved_bytes, peak - budget);
    EXPECT_GE(r.bytes_to_slow, prev) << f;
    if (r.feasible) {
      EXPECT_GE(r.bytes_to_slow, peak - budget) << "must move at least the excess";
    }
    EXPECT_GE(r.step_ns, axis.end_ns());
    prev = r.bytes_to_slow;
  }
  // Nothing can go below what ops use at once.
  const auto zero = estimate_offload(p, axis, 0, peak, 0, 55e9);
  EXPECT_FALSE(zero.feasible);
  EXPECT_GT(zero.shortfall_bytes, 0u);
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
  // Planned occupancy: evicting activations lowers the fast tier below the profile's peak.
  EXPECT_LT(m.memory[1].fast_peak, m.memory[0].fast_peak);
}

TEST(ReportModel, PlanForAnotherProfileIsWarnedAbout) {
  const Profile p = make_training_profile();
  const Profile other = make_training_profile({.layers = 3});
  const Plan plan = make_plan(other, 1 << 20);
  const auto m = model_of(p, &plan);
  EXPECT_FALSE(m.warnings.empty());
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
  EXPECT_EQ(h.savings.bandwidth_source.rfind("assumed", 0), 0u);  // no link in a one-tier topology
}

TEST(ReportModel, IdleThresholdIsRound) {
  EXPECT_EQ(idle_threshold_for(232e6), 20e6);
  EXPECT_EQ(idle_threshold_for(1e9), 100e6);
  EXPECT_EQ(idle_threshold_for(5e3), 1e3);
}

}  // namespace

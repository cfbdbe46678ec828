// Model mode of `tierpack experiment` on synthetic profiles: every policy at every budget, the
// page-aware vs page-agnostic column, the rows the model cannot produce, the output files (CSV,
// Markdown, SVG) and the validation rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/tier_spec.hpp"
#include "experiment/first_touch_model.hpp"
#include "experiment/model_experiment.hpp"
#include "experiment/results_writer.hpp"
#include "experiment/svg_plot.hpp"
#include "experiment/validation.hpp"
#include "placer/baselines.hpp"
#include "tests/support/synthetic_profile.hpp"

using namespace tierpack;
using namespace tierpack::experiment;

namespace {

Profile host_profile() {
  synth::SyntheticOptions o;
  o.tensors = 300;
  o.device = -1;
  o.activation_bytes = 256 << 10;
  o.param_bytes = 128 << 10;
  return synth::make_synthetic_profile(o);
}

ExperimentResult run(const Profile& p, const std::string& budgets = "100%,50%,20%") {
  ModelOptions o;
  o.budgets = parse_budget_list(budgets);
  o.policies = parse_policies("all");
  o.plan.device = -1;
  return run_model_experiment(p, tier_preset("ddr5-cxl"), o);
}

const ResultRow& row(const ExperimentResult& r, const std::string& budget, const std::string& policy) {
  for (const auto& x : r.rows)
    if (x.budget_label == budget && x.policy == policy) return x;
  throw std::runtime_error("no row " + budget + " " + policy);
}

}  // namespace

TEST(ExperimentModel, EveryPolicyHasARowAtEveryBudget) {
  const Profile p = host_profile();
  const auto r = run(p);
  EXPECT_EQ(r.mode, "model");
  EXPECT_EQ(r.rows.size(), 3 * std::size(kPolicies));
  EXPECT_EQ(r.peak_bytes, p.peak_bytes(-1));
  EXPECT_EQ(r.fast_tier, "dram0");
  EXPECT_EQ(r.slow_tier, "cxl0");
  for (const char* b : {"100%", "50%", "20%"}) {
    const auto& ref = row(r, b, "all-fast");
    EXPECT_DOUBLE_EQ(ref.slowdown, 1.0);
    for (const char* policy : {"first-touch", "interleave", "preferred-fast", "lru-demand", "page-agnostic", "page-aware"}) {
      const auto& x = row(r, b, policy);
      EXPECT_TRUE(x.available) << policy;
      EXPECT_GE(x.slowdown, 0.999) << policy << " at " << b << ": nothing beats all-fast in the model";
      EXPECT_LE(x.fast_peak_bytes, x.budget_bytes + 2 * 4096) << policy << " at " << b;
    }
    // The kernel's tiering has no model: said, not faked.
    for (const char* policy : {"kernel-tiering", "damon"}) {
      const auto& x = row(r, b, policy);
      EXPECT_FALSE(x.available);
      EXPECT_NE(x.note.find("not available in model mode"), std::string::npos) << x.note;
    }
  }
  EXPECT_TRUE(row(r, "100%", "all-fast").fits);
  EXPECT_FALSE(row(r, "20%", "all-fast").fits);
  // A smaller budget never makes tierpack faster.
  EXPECT_GE(row(r, "20%", "page-aware").step_ns, row(r, "100%", "page-aware").step_ns);
}

TEST(ExperimentModel, PageAwarePacksPagesOfOneClassWherePageAgnosticMixesThem) {
  const auto r = run(host_profile(), "50%");
  const auto& aware = row(r, "50%", "page-aware");
  const auto& agnostic = row(r, "50%", "page-agnostic");
  EXPECT_EQ(aware.mixed_class_pages, 0u);
  EXPECT_GT(agnostic.mixed_class_pages, 0u);
  EXPECT_EQ(aware.budget_bytes, agnostic.budget_bytes);
}

TEST(ExperimentModel, FirstTouchKeepsPagesOnTheirFirstNodeAndSpillsTheRest) {
  const Profile p = host_profile();
  const auto model = tier_preset("ddr5-cxl");
  const std::uint64_t peak = p.peak_bytes(-1);
  const auto tight = replay_first_touch_pages(p, placer::make_baseline_setup(model, -1, peak / 5));
  const auto roomy = replay_first_touch_pages(p, placer::make_baseline_setup(model, -1, 1ull << 40));
  EXPECT_LE(tight.fast_peak_bytes, peak / 5);
  EXPECT_GT(tight.in_place_bytes, 0u);
  EXPECT_GT(tight.step_ns, roomy.step_ns);
  EXPECT_EQ(roomy.in_place_bytes, 0u);
  EXPECT_EQ(tight.bytes_to_fast + tight.bytes_to_slow, 0u) << "first-touch never migrates";
}

TEST(ExperimentModel, PolicyAndBudgetListsAreChecked) {
  EXPECT_EQ(parse_policies("all").size(), std::size(kPolicies));
  const auto some = parse_policies("page-aware,interleave");
  EXPECT_EQ(some.front(), "all-fast") << "the reference is always run";
  EXPECT_EQ(some.size(), 3u);
  EXPECT_THROW(parse_policies("page-aware,numactl"), logic_error);
  EXPECT_THROW(parse_budget_list("50%,,20%"), logic_error);
  EXPECT_THROW(parse_budget_list("150%"), logic_error);
  EXPECT_EQ(parse_budget_list("100%,4G").size(), 2u);
}

TEST(ExperimentModel, OutputFilesHoldEveryRow) {
  const auto r = run(host_profile(), "100%,30%");
  const std::string csv = format_csv(r);
  EXPECT_EQ(static_cast<std::size_t>(std::count(csv.begin(), csv.end(), '\n')), r.rows.size() + 1);
  EXPECT_EQ(csv.rfind("mode,budget,budget_bytes", 0), 0u);
  const std::string md = format_summary(r);
  EXPECT_NE(md.find("| 30% ("), std::string::npos);
  EXPECT_NE(md.find("predicted"), std::string::npos);
  EXPECT_NE(md.find("migrated agnostic / aware"), std::string::npos);
  const auto plots = make_plots(r);
  ASSERT_EQ(plots.size(), 2u);
  for (const auto& [name, svg] : plots) {
    EXPECT_EQ(svg.rfind("<svg", 0), 0u) << name;
    EXPECT_NE(svg.find("</svg>"), std::string::npos) << name;
    // One line per policy that produced numbers (all but kernel-tiering and damon).
    std::size_t lines = 0;
    for (auto at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++lines;
    EXPECT_EQ(lines, std::size(kPolicies) - 2) << name;
    EXPECT_NE(svg.find("damon (n/a)"), std::string::npos) << name;
  }
  const auto dir = std::filesystem::temp_directory_path() / ("tierpack_exp_" + std::to_string(::getpid()));
  const auto written = write_results(r, dir.string());
  EXPECT_EQ(written.size(), 4u);
  for (const auto& f : written) EXPECT_GT(std::filesystem::file_size(f), 100u) << f;
  std::filesystem::remove_all(dir);
}

TEST(ExperimentModel, SvgEscapesTextAndHandlesASinglePoint) {
  SvgChart c;
  c.title = "a <b> & \"c\"";
  c.series.push_back({"one", {{50, 2}}, false});
  const std::string svg = render_svg(c);
  EXPECT_NE(svg.find("a &lt;b&gt; &amp; &quot;c&quot;"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(ExperimentModel, ValidationPairsMeasuredAndPredicted) {
  const Profile p = host_profile();
  const auto ms = parse_measurements("all-fast=10ms,page-aware@50%=0.02s");
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_DOUBLE_EQ(ms[1].measured_ns, 2e7);
  placer::PlanOptions o;
  o.device = -1;
  const auto v = validate(p, tier_preset("ddr5-cxl"), o, ms, "test");
  ASSERT_EQ(v.size(), 2u);
  EXPECT_GT(v[0].predicted_ns, 0);
  EXPECT_GE(v[1].predicted_ns, v[0].predicted_ns);
  EXPECT_NEAR(v[0].error(), v[0].predicted_ns / 1e7 - 1, 1e-12);
  EXPECT_THROW(parse_measurements("page-aware=10ms"), logic_error);
  EXPECT_THROW(parse_measurements("lru@50%=10ms"), logic_error);
  EXPECT_THROW(parse_measurements("all-fast=10 parsecs"), logic_error);
}

// Issue 26 (predictions that look free): a profile whose op times were taken under a page tracer
// stretches compute, so every prediction made from it can only be too low; the tables say so.
TEST(ExperimentModel, TracedProfilesGiveLowerBoundsAndTheTablesSaySo) {
  Profile p = host_profile();
  const auto plain = run(p, "100%,30%");
  for (const auto& why : plain.lower_bound) EXPECT_EQ(why.find("page tracer"), std::string::npos) << why;
  p.meta.page_tracer = "uffd-wp";
  const auto traced = run(p, "100%,30%");
  ASSERT_FALSE(traced.lower_bound.empty());
  EXPECT_NE(traced.lower_bound.front().find("under the uffd-wp page tracer"), std::string::npos) << traced.lower_bound.front();
  const std::string md = format_summary(traced);
  EXPECT_NE(md.find("* **lower bound**: the profile's op times were measured under the uffd-wp page tracer"), std::string::npos) << md;
  EXPECT_NE(md.find("## Slowdown against all-fast, by fast-tier budget (predicted lower bounds)"), std::string::npos) << md;
  EXPECT_NE(md.find("## All figures (predicted lower bounds)"), std::string::npos) << md;
  EXPECT_NE(md.find("predicted, a lower bound"), std::string::npos) << md;
  EXPECT_NE(make_plots(traced).front().second.find("(lower bounds)"), std::string::npos);
  // Op times scaled to a measured step (--compute-time) are not the tracer's any more.
  ModelOptions o;
  o.budgets = parse_budget_list("100%");
  o.policies = parse_policies("all");
  o.plan.device = -1;
  o.op_times_scaled = true;
  for (const auto& why : run_model_experiment(p, tier_preset("ddr5-cxl"), o).lower_bound)
    EXPECT_EQ(why.find("page tracer"), std::string::npos) << why;
}

// Moves that hide under compute (within 1% of all-fast) are counted and named.
TEST(ExperimentModel, MovesHiddenUnderComputeAreALowerBound) {
  ExperimentResult r;
  r.mode = "model";
  ResultRow ref;
  ref.policy = "all-fast";
  ref.slowdown = 1.0;
  ResultRow hidden;
  hidden.policy = "page-aware";
  hidden.slowdown = 1.001;
  hidden.bytes_to_slow = 1 << 20;
  // The counting happens in run_model_experiment; here only the writer: rows with a reason are marked.
  r.rows = {ref, hidden};
  r.lower_bound = {"1 of the 1 predictions that migrate bytes are within 1% of all-fast"};
  EXPECT_NE(format_summary(r).find("* **lower bound**: 1 of the 1 predictions"), std::string::npos);
  // And on a real profile: a fast link makes some moves free.
  Profile p = host_profile();
  ModelOptions o;
  o.budgets = parse_budget_list("90%");
  o.policies = parse_policies("page-aware");
  o.plan.device = -1;
  const auto fast = run_model_experiment(p, parse_tier_spec("dram:64G,cxl:256G@+0ns/10000GB/s"), o);
  const ResultRow& aware = row(fast, "90%", "page-aware");
  if (aware.bytes_migrated() > 0 && aware.slowdown <= 1.01) {
    ASSERT_FALSE(fast.lower_bound.empty());
    EXPECT_NE(fast.lower_bound.back().find("hide under the profiled compute"), std::string::npos) << fast.lower_bound.back();
  }
}

// Rows measured in an emulated guest mark both tables and the slow tier, not only the notes.
TEST(ExperimentModel, EmulatedRowsMarkEveryTable) {
  ExperimentResult r;
  r.mode = "real";
  r.fast_tier = "node0";
  r.slow_tier = "node1";
  ResultRow x;
  x.policy = "all-fast";
  x.budget_label = "100%";
  x.slowdown = 1.0;
  x.emulated = true;
  r.rows = {x};
  const std::string md = format_summary(r);
  EXPECT_NE(md.find("slow `node1`, **EMULATED**"), std::string::npos) << md;
  EXPECT_NE(md.find("## Slowdown against all-fast, by fast-tier budget (EMULATED)"), std::string::npos) << md;
  EXPECT_NE(md.find("## All figures (EMULATED)"), std::string::npos) << md;
  EXPECT_NE(md.find("measured in an emulated guest"), std::string::npos) << md;
}

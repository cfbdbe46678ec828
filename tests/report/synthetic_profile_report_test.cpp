// Reports of the placer's synthetic training profiles (tests/support/synthetic_profile.hpp), larger
// and shaped differently from the report fixture: every output passes its format checks, and the
// page's numbers are the profile's.
#include <gtest/gtest.h>

#include <ostream>

#include <nlohmann/json.hpp>

#include "report/html_report.hpp"
#include "report/memory_snapshot.hpp"
#include "report/perfetto_trace.hpp"
#include "report/summary.hpp"
#include "tests/report/format_checks.hpp"
#include "tests/support/synthetic_profile.hpp"

using namespace tierpack;
using namespace tierpack::report;

namespace tierpack::synth {
// How GoogleTest names a parameter (instead of dumping its bytes).
void PrintTo(const SyntheticOptions& o, std::ostream* os) {
  *os << o.tensors << " tensors, seed " << o.seed << ", device " << o.device;
}
}  // namespace tierpack::synth

namespace {

class SyntheticProfileReport : public ::testing::TestWithParam<tierpack::synth::SyntheticOptions> {};

TEST_P(SyntheticProfileReport, OutputsAreConsistent) {
  const Profile p = tierpack::synth::make_synthetic_profile(GetParam());
  ReportInputs in;
  in.profile = &p;
  const ReportModel m = build_model(in, {});
  ASSERT_FALSE(m.devices.empty());
  for (const auto& d : m.devices) EXPECT_EQ(d.peak_bytes, p.peak_bytes(d.device)) << d.name;

  const std::string html = render_html(m);
  for (auto id : html_section_ids()) EXPECT_NE(html.find("<section id=\"" + std::string(id) + "\">"), std::string::npos) << id;
  const auto& main = m.devices[m.main_device];
  EXPECT_NE(html.find("data-metric=\"peak_bytes." + main.name + "\" data-value=\"" + std::to_string(main.peak_bytes) + "\""),
            std::string::npos);

  const auto trace = nlohmann::json::parse(render_trace(m));
  const auto trace_problems = tierpack::report::testing::validate_trace(trace, m.axis.end_ns() / 1000);
  EXPECT_TRUE(trace_problems.empty()) << trace_problems.size() << " problems, first: " << trace_problems.front();

  const auto snap = nlohmann::json::parse(snapshot_json(m, build_snapshot(m)));
  const auto snap_problems = tierpack::report::testing::check_snapshot(snap);
  EXPECT_TRUE(snap_problems.empty()) << snap_problems.size() << " problems, first: " << snap_problems.front();
}

tierpack::synth::SyntheticOptions gpu_run() {
  tierpack::synth::SyntheticOptions o;
  o.tensors = 20000;
  o.seed = 3;
  return o;
}

tierpack::synth::SyntheticOptions host_run() {
  tierpack::synth::SyntheticOptions o;
  o.tensors = 5000;
  o.seed = 11;
  o.device = -1;
  o.hidden_access_fraction = 0.05;
  return o;
}

std::string shape_name(const ::testing::TestParamInfo<tierpack::synth::SyntheticOptions>& p) {
  return p.param.device < 0 ? "host" : "gpu";
}

INSTANTIATE_TEST_SUITE_P(Shapes, SyntheticProfileReport, ::testing::Values(gpu_run(), host_run()), shape_name);

}  // namespace

// Writes the report tests' inputs as files (run.tpk, plan.json, stats.json) for the CLI and browser
// tests and for looking at a report by hand:  report_fixture DIR [--layers N] [--host]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/plan.hpp"
#include "core/profile.hpp"
#include "core/run_stats.hpp"
#include "tests/report/report_fixtures.hpp"

int main(int argc, char** argv) {
  using namespace tierpack::report::testing;
  if (argc < 2) {
    std::fprintf(stderr, "usage: report_fixture DIR [--layers N] [--host]\n");
    return 2;
  }
  const std::string dir = argv[1];
  FixtureOptions o;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--layers" && i + 1 < argc) o.layers = std::atoi(argv[++i]);
    else if (a == "--host") o.device = -1;
    else {
      std::fprintf(stderr, "report_fixture: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  const auto profile = make_training_profile(o);
  tierpack::write_profile(profile, dir + "/run.tpk");
  if (o.device >= 0) {
    const auto plan = make_plan(profile, profile.peak_bytes(o.device) * 6 / 10);
    tierpack::write_plan(plan, dir + "/plan.json");
    tierpack::write_run_stats(make_run_stats(profile, plan), dir + "/stats.json");
  }
  std::printf("%s/run.tpk: %zu ops, %zu tensors\n", dir.c_str(), profile.ops.size(), profile.tensors.size());
  return 0;
}

// `tierpack report`: a profile (plus, optionally, a plan and a run's statistics) -> an offline report:
// index.html, trace.json (Perfetto), memory_snapshot.json/.pickle (PyTorch memory_viz).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>

#include "core/error.hpp"
#include "core/plan.hpp"
#include "core/profile.hpp"
#include "core/tier_spec.hpp"
#include "core/units.hpp"
#include "integrations/cli/args.hpp"
#include "integrations/cli/commands.hpp"
#include "report/report_writer.hpp"
#include "report/run_stats.hpp"

namespace tierpack::cli {

const char* const kReportUsage =
    "usage: tierpack report run.tpk [--plan plan.json] [--run-stats stats.json] [-o DIR] [--budget SIZE]\n"
    "                       [--tiers SPEC|FILE|preset:NAME] [--quiet]\n"
    "  Writes an offline report of a profile into DIR (default: report):\n"
    "    index.html              one self-contained page: summary, memory by tier, tensor lifetimes, page map,\n"
    "                            migrations, tables (open it in any browser; no network needed)\n"
    "    trace.json              Chrome/Perfetto trace (ui.perfetto.dev, chrome://tracing)\n"
    "    memory_snapshot.json    PyTorch memory snapshot schema; memory_snapshot.pickle: the same for\n"
    "                            pytorch.org/memory_viz (drag and drop)\n"
    "  --plan FILE             add the plan's planned memory, page groups and predicted moves\n"
    "  --run-stats FILE        add a run's measured counters (format: docs/report.md)\n"
    "  --budget SIZE           fast-tier budget to draw and to evaluate (\"24G\", \"40%\" of the peak)\n"
    "  --tiers T               tier model for \"what tierpack would save\" (as for tierpack plan); default: the\n"
    "                          plan's, else the profile's tiers, else a preset (named on the page)\n"
    "  --quiet                 print only where the report is\n";

int run_report(const std::vector<std::string>& argv) {
  const Args args = parse_args(argv, {.valued = {"--plan", "--run-stats", "-o", "--budget", "--tiers"},
                                      .switches = {"--quiet"},
                                      .min_positional = 1,
                                      .max_positional = 1});
  std::optional<Budget> budget;
  report::ReportOptions options;
  try {
    if (auto b = args.get("--budget")) budget = parse_budget(*b);
  } catch (const logic_error& e) {
    throw usage_error(std::string("--budget: ") + e.what());
  }
  if (auto tiers = args.get("--tiers")) {
    try {
      options.tier_model = load_tier_model(*tiers);
    } catch (const format_error&) {
      throw;  // a tier-model file that cannot be read is a failure, not a usage error
    } catch (const logic_error& e) {
      throw usage_error(std::string("--tiers: ") + e.what());
    }
    options.tier_model_source = "--tiers " + *tiers;
  }
  const std::string out_dir = args.get_or("-o", "report");

  const auto started = std::chrono::steady_clock::now();
  report::ReportInputs inputs;
  inputs.profile_path = args.positional.front();
  const Profile profile = read_profile(inputs.profile_path);
  inputs.profile = &profile;
  std::optional<Plan> plan;
  if (auto path = args.get("--plan")) {
    plan = read_plan(*path);
    inputs.plan = &*plan;
    inputs.plan_path = *path;
  }
  std::optional<report::RunStats> run;
  if (auto path = args.get("--run-stats")) {
    run = report::read_run_stats(*path);
    inputs.run_stats = &*run;
    inputs.run_stats_path = *path;
  }
  if (budget) {
    // A percentage refers to the peak of the device budgets apply to (the busiest GPU, else the host).
    std::set<int> devices;
    for (const auto& t : profile.tensors) devices.insert(t.device);
    const bool gpu = !devices.empty() && *devices.rbegin() >= 0;
    std::uint64_t peak = 0;
    for (int d : devices)
      if ((d >= 0) == gpu) peak = std::max(peak, profile.peak_bytes(d));
    options.budget_bytes = budget->resolve(peak);
  }

  const double read_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const auto result = report::write_report(inputs, options, out_dir);
  const bool quiet = args.has("--quiet");
  if (!quiet) {
    for (const auto& s : result.summary) std::printf("  %s\n", s.c_str());
    for (const auto& w : result.warnings) std::printf("  warning: %s\n", w.c_str());
    std::printf("\n");
  }
  double total = read_seconds + result.model_seconds;
  if (!quiet) std::printf("  read the inputs in %.2f s, computed the statistics in %.2f s\n", read_seconds, result.model_seconds);
  for (const auto& f : result.files) {
    total += f.seconds;
    if (!quiet) std::printf("  wrote %-40s %10s  (%.2f s)\n", f.path.c_str(), format_bytes(f.bytes).c_str(), f.seconds);
  }
  const std::string index = std::filesystem::absolute(result.files.front().path).string();
  std::printf("report: file://%s  (%.2f s)\n", index.c_str(), total);
  if (!quiet) std::printf("  trace.json: open in ui.perfetto.dev; memory_snapshot.pickle: drop onto pytorch.org/memory_viz\n");
  return 0;
}

}  // namespace tierpack::cli

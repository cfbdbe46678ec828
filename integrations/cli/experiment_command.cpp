// `tierpack experiment`: a workload (a profile, or a command profiled first) under every placement
// policy and fast-tier budget, on the calibrated model or on real NUMA nodes; writes results.csv,
// summary.md and SVG plots into the output folder (experiment/).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/error.hpp"
#include "core/file_envelope.hpp"
#include "core/profile.hpp"
#include "core/tier_spec.hpp"
#include "experiment/model_experiment.hpp"
#include "experiment/results_writer.hpp"
#include "experiment/validation.hpp"
#include "integrations/cli/args.hpp"
#include "integrations/cli/commands.hpp"
#include "integrations/cli/placer_args.hpp"
#include "core/units.hpp"
#include "placer/planner.hpp"
#include "placer/timeline.hpp"
#ifdef TIERPACK_HAVE_EXPERIMENT_HOST
#include "experiment/real_experiment.hpp"
#endif

namespace tierpack::cli {

const ArgSpec& experiment_spec() {
  static const ArgSpec spec{
      .description =
          "  Runs (real) or simulates (model) the workload under each placement policy and fast-tier budget and\n"
          "  writes DIR/results.csv, DIR/summary.md, DIR/step_time.svg and DIR/migration.svg. Progress on stderr.\n"
          "  Needs the workload (--workload FILE, or -- COMMAND to profile it first), --tiers and -o.\n",
      .options = {
          {"--workload", "FILE", "a profile (tierpack profile); or give `-- COMMAND` to profile it first "
                                 "(DIR/workload.tpk)"},
          {"--tiers", "SPEC|FILE|preset:NAME", "tier model: spec, `tierpack topo --json` file or preset (h200-pcie, "
                                               "ddr5-cxl, ddr5-remote-socket); real mode maps its first two host tiers "
                                               "to NUMA nodes 0 and 1"},
          {"-o", "DIR", "where the results go"},
          {"--fast-budgets", "B,B,...", "fast-tier budgets, percentages of the peak or sizes (default 100%,50%,30%,20%)"},
          {"--policies", "all|P,P,...", "all (default) or a list of: all-fast, first-touch, interleave, preferred-fast, "
                                        "lru-demand, kernel-tiering, damon, page-agnostic, page-aware"},
          {"--mode", "model|real", "model (default): the simulator on the tier model (predicted);\nreal: replay the "
                                   "tensors on this machine's NUMA nodes (needs >= 2 nodes; measured)"},
          {"--iterations", "N", "real mode: iterations per run, the first untimed (default 3)"},
          {"--scale", "F", "real mode: multiply tensor sizes by F (default 1)"},
          {"--device", "N|host", "GPU ordinal or 'host' (default: the device with most bytes)"},
          {"--measured", "LIST", "model mode: measured step times to validate against, e.g. "
                                 "'all-fast=145ms,page-aware@75%=490ms'"},
          {"--measured-source", "TEXT", "where the --measured times are from (named in the results)"},
          {"--compute-time", "DURATION", "model mode: scale the profile's op times so that its iteration takes "
                                         "DURATION (e.g. 148ms, a measured step without offloading), for profiles "
                                         "stretched by the profiling itself"},
      },
      .child = "[-- COMMAND ...]",
      .footer = "  What is measured and what is modelled: docs/experiments.md.\n"};
  return spec;
}

int run_experiment(const Args& args) {
  const auto out = args.get("-o");
  if (!out) throw usage_error("missing -o DIR (where the results go)");
  if (args.has("--workload") == !args.child.empty())
    throw usage_error("give the workload as --workload run.tpk or as -- COMMAND (one of them)");
  if (!args.has("--tiers")) throw usage_error("missing --tiers (a spec, a topo JSON file or preset:NAME, e.g. preset:ddr5-cxl)");
  const std::string mode = args.get_or("--mode", "model");
  if (mode != "model" && mode != "real") throw usage_error("--mode must be model or real, not '" + mode + "'");

  std::vector<experiment::BudgetPoint> budgets;
  std::vector<std::string> policies;
  try {
    budgets = experiment::parse_budget_list(args.get_or("--fast-budgets", "100%,50%,30%,20%"));
  } catch (const logic_error& e) {
    throw usage_error(std::string("--fast-budgets: ") + e.what());
  }
  try {
    policies = experiment::parse_policies(args.get_or("--policies", "all"));
  } catch (const logic_error& e) {
    throw usage_error(std::string("--policies: ") + e.what());
  }
  auto number = [&](const char* flag, double fallback, double min) {
    const auto text = args.get(flag);
    if (!text) return fallback;
    char* end = nullptr;
    const double v = std::strtod(text->c_str(), &end);
    if (end == text->c_str() || *end != '\0' || !(v >= min)) throw usage_error(std::string(flag) + ": bad value '" + *text + "'");
    return v;
  };
  const int iterations = static_cast<int>(number("--iterations", 3, 2));
  const double scale = number("--scale", 1, 1e-6);
  if (mode == "real") {
#ifndef TIERPACK_HAVE_EXPERIMENT_HOST
    throw usage_error("--mode real: this build has no host tiers (migrate/ was not built)");
#endif
  }
  // Everything checkable is checked before the work (issue 26, late failure): profiling the command and
  // the experiment can take long, a bad --measured or --compute-time value must not wait for them.
  std::vector<experiment::Measurement> measured;
  if (auto m = args.get("--measured")) {
    if (mode != "model") throw usage_error("--measured validates the model: use it with --mode model");
    try {
      measured = experiment::parse_measurements(*m);
    } catch (const logic_error& e) {
      throw usage_error(std::string("--measured: ") + e.what());
    }
  }
  double compute_ns = 0;
  if (auto ct = args.get("--compute-time")) {
    if (mode != "model") throw usage_error("--compute-time scales the model's op times: use it with --mode model");
    try {
      compute_ns = parse_latency_ns(*ct);
    } catch (const logic_error& e) {
      throw usage_error(std::string("--compute-time: ") + e.what());
    }
    if (!(compute_ns > 0)) throw usage_error("--compute-time: must be positive, not '" + *ct + "'");
  }
  try {
    (void)load_tier_model(*args.get("--tiers"));
  } catch (const format_error&) {
    throw;  // a tier-model file that cannot be read is a failure, not a usage error
  } catch (const logic_error& e) {
    throw usage_error(std::string("--tiers: ") + e.what());
  }
  {
    // The results directory must be writable now, not after the work.
    std::filesystem::create_directories(*out);
    const std::string probe = (std::filesystem::path(*out) / ".tierpack-write-check").string();
    std::FILE* f = std::fopen(probe.c_str(), "wb");
    if (!f) throw os_error("open " + probe + " for writing", errno);
    std::fclose(f);
    std::filesystem::remove(probe);
  }

  // The workload: a profile file, or the command profiled now.
  std::string workload;
  std::vector<std::string> commands;
  if (auto w = args.get("--workload")) {
    workload = *w;
  } else {
    std::filesystem::create_directories(*out);
    workload = (std::filesystem::path(*out) / "workload.tpk").string();
    std::fprintf(stderr, "tierpack experiment: profiling the command into %s\n", workload.c_str());
    std::vector<std::string> pargs{"-o", workload, "--"};
    pargs.insert(pargs.end(), args.child.begin(), args.child.end());
    const int status = run_profile(parse_args("profile", pargs, profile_spec()));
    if (!std::filesystem::exists(workload)) return status != 0 ? status : 1;
    std::string cmd = "tierpack profile -o workload.tpk --";
    for (const auto& a : args.child) cmd += " " + a;
    commands.push_back(cmd);
  }
  Profile profile = read_profile(workload);
  std::string time_note;
  if (compute_ns > 0) {
    const double ns = compute_ns;
    if (profile.iteration_ns == 0) throw usage_error("--compute-time: the profile has no iteration time to scale");
    time_note = "op times scaled by " + std::to_string(ns / static_cast<double>(profile.iteration_ns)).substr(0, 8) +
                " so that the profiled iteration (" + format_duration_ns(static_cast<double>(profile.iteration_ns)) +
                ") takes " + format_duration_ns(ns) + " (--compute-time)";
    profile = placer::with_iteration_time(std::move(profile), ns);
  }
  const PlannerInputs in = planner_inputs(args, profile, nullptr);
  auto progress = [](const std::string& line) { std::fprintf(stderr, "tierpack experiment: %s\n", line.c_str()); };

  experiment::ExperimentResult result;
  if (mode == "model") {
    experiment::ModelOptions mo;
    mo.budgets = budgets;
    mo.policies = policies;
    mo.plan = in.options;
    mo.progress = progress;
    mo.op_times_scaled = compute_ns > 0;
    result = experiment::run_model_experiment(profile, in.model, mo);
    if (!measured.empty()) {
      progress("validating the model against " + std::to_string(measured.size()) + " measurement(s)");
      result.validation = experiment::validate(profile, in.model, in.options, measured, args.get_or("--measured-source", "--measured"));
    }
  } else {
#ifdef TIERPACK_HAVE_EXPERIMENT_HOST
    experiment::RealOptions ro;
    ro.budgets = budgets;
    ro.policies = policies;
    ro.iterations = iterations;
    ro.scale = scale;
    ro.model = in.model;
    ro.plan = in.options;
    ro.progress = progress;
    result = experiment::run_real_experiment(profile, ro);
#endif
  }
  result.workload = workload;
  if (!time_note.empty()) result.notes.insert(result.notes.begin(), time_note);
  if (result.tiers.empty()) result.tiers = *args.get("--tiers");
  else result.tiers += "; planner figures from " + *args.get("--tiers");
  std::string cmd = "tierpack experiment";
  for (const auto& a : args.argv) cmd += " " + a;
  commands.push_back(cmd);
  result.commands = commands;
  const auto written = experiment::write_results(result, *out);
  for (const auto& path : written) std::fprintf(stderr, "tierpack experiment: wrote %s\n", path.c_str());
  // In the QEMU guest the files vanish with it: TIERPACK_EXPERIMENT_DUMP=1 also prints each one between
  // markers on stdout (scripts/numa-guest.sh returns the output; bench/results/experiment-*/ shows the split).
  if (std::getenv("TIERPACK_EXPERIMENT_DUMP")) {
    for (const auto& path : written) {
      std::printf("=== TIERPACK FILE %s ===\n%s=== TIERPACK END ===\n", std::filesystem::path(path).filename().c_str(),
                  read_file(path).c_str());
    }
  }
  std::fputs(experiment::format_summary(result).c_str(), stdout);
  return 0;
}

}  // namespace tierpack::cli

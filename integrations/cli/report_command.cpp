// `tierpack report`: a profile (plus, optionally, a plan and a run's statistics) -> an offline report:
// index.html, trace.json (Perfetto), memory_snapshot.json/.pickle (PyTorch memory_viz).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/gpu_stats.hpp"
#include "core/input_file.hpp"
#include "core/plan.hpp"
#include "core/process_rank.hpp"
#include "core/profile.hpp"
#include "core/saved_choices.hpp"
#include "core/tier_spec.hpp"
#include "core/units.hpp"
#include "integrations/cli/args.hpp"
#include "integrations/cli/commands.hpp"
#include "integrations/cli/rank_files.hpp"
#include "report/rank_overview.hpp"
#include "report/report_writer.hpp"
#include "core/run_stats.hpp"

namespace tierpack::cli {

const ArgSpec& report_spec() {
  static const ArgSpec spec{
      .description =
          "  Writes an offline report of a profile into DIR (default: report):\n"
          "    index.html              one self-contained page: summary, memory by tier, tensor lifetimes, page map,\n"
          "                            migrations, tables (open it in any browser; no network needed)\n"
          "    trace.json              Chrome/Perfetto trace (ui.perfetto.dev, chrome://tracing)\n"
          "    memory_snapshot.json    PyTorch memory snapshot schema; memory_snapshot.pickle: the same for\n"
          "                            pytorch.org/memory_viz (drag and drop)\n",
      .options = {
          {"--plan", "FILE", "add the plan's planned memory, page groups and predicted moves"},
          {"--run-stats", "FILE", "add a run's measured counters (format: docs/report.md)"},
          {"-o", "DIR", "where the report goes (default: report)"},
          {"--budget", "SIZE|PCT", "fast-tier budget to draw and to evaluate (\"24G\", \"40%\" of the peak)"},
          {"--tiers", "SPEC|FILE|preset:NAME", "tier model for \"what tierpack would save\" (as for tierpack plan); "
                                               "default: the plan's, else the profile's tiers, else a preset (named on "
                                               "the page)"},
          {"--quiet", "", "print only where the report is"},
          {"--json", "", "print the summary, the warnings and the files written as one JSON object"},
      },
      .positional = "run.tpk",
      .positional_help = "the profile; several (r0.tpk r1.tpk ...) or a %r pattern (out.%r.tpk) for the ranks of a "
                         "distributed job",
      .min_positional = 1,
      .max_positional = 64,
      .footer = "  Several profiles (the ranks of a distributed job, or a %r pattern) give one report per rank in\n"
                "  DIR/rank<N>/ and a merged view: DIR/index.html compares the ranks, DIR/trace.json holds them all;\n"
                "  --plan and --run-stats then name each rank's file with %r.\n"};
  return spec;
}

namespace {

struct OneReport {
  Profile profile;
  report::ReportResult result;
  double read_seconds = 0;
};

/// Reads one profile (and its plan / run stats) and writes its report into `out_dir`.
OneReport write_one(const std::string& profile_path, const std::optional<std::string>& plan_path,
                    const std::optional<std::string>& stats_path, const std::optional<Budget>& budget,
                    report::ReportOptions options, const std::string& out_dir) {
  const auto started = std::chrono::steady_clock::now();
  OneReport one;
  report::ReportInputs inputs;
  inputs.profile_path = profile_path;
  one.profile = read_profile(profile_path);
  inputs.profile = &one.profile;
  std::optional<Plan> plan;
  // A plan or statistics of another profile is refused before anything is written (Note [Profile identity]).
  if (plan_path) {
    plan = read_plan(*plan_path);
    check_profile_identity(one.profile, profile_path, plan->profile_id, "plan", *plan_path);
    inputs.plan = &*plan;
    inputs.plan_path = *plan_path;
  }
  std::optional<RunStats> run;
  if (stats_path) {
    run = read_run_stats(*stats_path);
    check_profile_identity(one.profile, profile_path, run->profile_id, "run statistics", *stats_path);
    inputs.run_stats = &*run;
    inputs.run_stats_path = *stats_path;
    // The GPU tiers of the same run (`tierpack run --gpu-budget` writes them beside --stats).
    for (const auto& [device, path] : gpu_stats_files(*stats_path)) {
      try {
        inputs.gpu_tiers.push_back(gpu_stats_line(nlohmann::json::parse(read_file(path))) + " (" + path + ")");
      } catch (const std::exception& e) {
        throw format_error(path + ": " + e.what());
      }
      // ... and each saved storage's choice, where its storage mover planned (docs/run.md, "Reading the choices")
      const std::string saved = device_sibling_path(*stats_path, device, ".saved.json");
      std::error_code ec;
      if (!std::filesystem::exists(saved, ec)) continue;
      try {
        const std::string text = read_file(saved);
        const SavedRecord rec = saved_record_from_json(text);
        const nlohmann::json j = nlohmann::json::parse(text);
        if (!j.contains("plan") || !j["plan"].is_object()) throw format_error("field 'plan' is missing or not an object");
        const SavedPlan followed = saved_plan_from_json(j["plan"].dump());
        inputs.gpu_choices.push_back({"gpu" + std::to_string(device), saved, followed.limit_bytes, followed.predicted_ms,
                                      rec.trace.step_ms, saved_choices(rec, followed)});
      } catch (const std::exception& e) {
        throw format_error(saved + ": " + e.what());
      }
    }
  }
  if (budget) {
    // A percentage refers to the peak of the device budgets apply to (the busiest GPU, else the host).
    std::set<int> devices;
    for (const auto& t : one.profile.tensors) devices.insert(t.device);
    const bool gpu = !devices.empty() && *devices.rbegin() >= 0;
    std::uint64_t peak = 0;
    for (int d : devices)
      if ((d >= 0) == gpu) peak = std::max(peak, one.profile.peak_bytes(d));
    options.budget_bytes = budget->resolve(peak);
  }
  one.read_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  one.result = report::write_report(inputs, options, out_dir);
  return one;
}

void print_files(const std::vector<report::WrittenFile>& files, double& total, bool quiet) {
  for (const auto& f : files) {
    total += f.seconds;
    if (!quiet) std::printf("  wrote %-40s %10s  (%.2f s)\n", f.path.c_str(), format_bytes(f.bytes).c_str(), f.seconds);
  }
}

/// The profiles a distributed job's report covers: the positional files, or the files of a `%r` pattern.
std::vector<RankFile> rank_profiles(const std::vector<std::string>& positional) {
  std::vector<RankFile> files;
  if (positional.size() == 1) {
    files = existing_rank_files(positional.front());
    if (files.empty()) throw error("no profile matches " + positional.front());
    return files;
  }
  for (std::size_t i = 0; i < positional.size(); ++i) files.push_back({static_cast<int>(i), positional[i]});
  return files;
}

/// `%r` in --plan / --run-stats names each rank's file; without it the flag cannot serve several ranks.
std::optional<std::string> per_rank_flag(const Args& args, const std::string& flag, int rank) {
  const auto v = args.get(flag);
  if (!v) return std::nullopt;
  if (!has_rank_pattern(*v)) throw usage_error(flag + " must name each rank's file with %r when reporting several ranks");
  return expand_rank_pattern(*v, rank);
}

}  // namespace

int run_report(const Args& args) {
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
  const bool json = args.has("--json");
  if (json && args.has("--quiet")) throw usage_error("--json and --quiet: --json prints only the JSON object");
  const bool quiet = args.has("--quiet") || json;
  auto files_json = [](const std::vector<report::WrittenFile>& files) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& f : files) a.push_back({{"path", f.path}, {"bytes", f.bytes}});
    return a;
  };
  double total = 0;

  const bool several = args.positional.size() > 1 || has_rank_pattern(args.positional.front());
  if (several) {
    // A distributed job (docs/distributed.md): one report per rank in rank<N>/, and a merged view.
    std::vector<OneReport> reports;
    std::vector<report::RankReport> ranks;
    const auto files = rank_profiles(args.positional);
    reports.reserve(files.size());
    for (const auto& f : files) {
      const std::string dir = "rank" + std::to_string(f.rank);
      reports.push_back(write_one(f.path, per_rank_flag(args, "--plan", f.rank), per_rank_flag(args, "--run-stats", f.rank),
                                  budget, options, (std::filesystem::path(out_dir) / dir).string()));
      OneReport& one = reports.back();
      const int rank = one.profile.meta.rank >= 0 ? one.profile.meta.rank : f.rank;
      ranks.push_back({rank, f.path, &one.profile, dir, one.result.summary});
      total += one.read_seconds + one.result.model_seconds;
      if (!quiet) std::printf("rank %d (%s):\n", rank, f.path.c_str());
      print_files(one.result.files, total, quiet);
    }
    const auto files_written = report::write_rank_overview(ranks, out_dir);
    print_files(files_written, total, quiet);
    const std::string index = std::filesystem::absolute(files_written.front().path).string();
    if (json) {
      nlohmann::json rj = nlohmann::json::array();
      for (std::size_t i = 0; i < reports.size(); ++i)
        rj.push_back({{"rank", ranks[i].rank}, {"profile", ranks[i].profile_path},
                      {"profile_id", reports[i].profile.meta.id}, {"summary", reports[i].result.summary},
                      {"warnings", reports[i].result.warnings}, {"files", files_json(reports[i].result.files)}});
      std::printf("%s\n", nlohmann::json{{"index", index}, {"ranks", rj}, {"files", files_json(files_written)}}.dump(1).c_str());
      return 0;
    }
    std::printf("report: file://%s  (%zu ranks, %.2f s)\n", index.c_str(), ranks.size(), total);
    return 0;
  }

  const OneReport one = write_one(args.positional.front(), args.get("--plan"), args.get("--run-stats"), budget,
                                  options, out_dir);
  const auto& result = one.result;
  if (!quiet) {
    for (const auto& s : result.summary) std::printf("  %s\n", s.c_str());
    for (const auto& w : result.warnings) std::printf("  warning: %s\n", w.c_str());
    std::printf("\n");
  }
  total += one.read_seconds + result.model_seconds;
  if (!quiet) std::printf("  read the inputs in %.2f s, computed the statistics in %.2f s\n", one.read_seconds, result.model_seconds);
  print_files(result.files, total, quiet);
  const std::string index = std::filesystem::absolute(result.files.front().path).string();
  if (json) {
    std::printf("%s\n", nlohmann::json{{"index", index},
                                       {"profile", args.positional.front()},
                                       {"profile_id", one.profile.meta.id},
                                       {"summary", result.summary},
                                       {"warnings", result.warnings},
                                       {"files", files_json(result.files)}}
                             .dump(1)
                             .c_str());
    return 0;
  }
  std::printf("report: file://%s  (%.2f s)\n", index.c_str(), total);
  if (!quiet) std::printf("  trace.json: open in ui.perfetto.dev; memory_snapshot.pickle: drop onto pytorch.org/memory_viz\n");
  return 0;
}

}  // namespace tierpack::cli

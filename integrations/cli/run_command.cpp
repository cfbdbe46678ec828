// `tierpack run`: runs a training command under tierpack. The child profiles its first iteration(s),
// plans under the fast-tier budget and applies the plan from the next iteration on (or applies a
// given plan from the start); runtime/host/run_controller.hpp does that inside the child. This
// command checks the flags, launches the child like `tierpack profile` does, and reports the outcome.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/config.hpp"
#include "core/discovery/topology_discovery.hpp"
#include "core/error.hpp"
#include "core/gpu_stats.hpp"
#include "core/input_file.hpp"
#include "core/plan.hpp"
#include "core/process_rank.hpp"
#include "core/run_stats.hpp"
#include "core/tier_spec.hpp"
#include "core/units.hpp"
#include "integrations/cli/args.hpp"
#include "integrations/cli/child_launch.hpp"
#include "integrations/cli/commands.hpp"
#include "integrations/cli/rank_files.hpp"

namespace tierpack::cli {

const ArgSpec& run_spec() {
  static const ArgSpec spec{
      .description =
          "  Runs a PyTorch (Python or LibTorch) training command with its CPU tensors placed on host memory\n"
          "  tiers (DRAM and CXL / far NUMA nodes). Phases, each announced by a 'tierpack:' status line:\n"
          "    1. warm-up and profiling: the first iteration(s) are profiled in the process;\n"
          "    2. plan: the placer packs tensors into page groups and schedules moves under the fast budget;\n"
          "    3. apply: from the next iteration on, CPU tensors come from page-group arenas on their planned\n"
          "       NUMA node and op events move groups between nodes ahead of use;\n"
          "    4. exit: one line per iteration (allocations, budget fallbacks, bytes moved, late prefetches) and\n"
          "       the run statistics file.\n"
          "  Everything after -- is the command, passed on untouched.\n",
      .options = {
          {"--fast-budget", "SIZE|PCT", "budget of the fast tier (DRAM): 4G, 512M, or a percentage of the profiled peak"},
          {"--tiers", "SPEC|FILE|preset:NAME", "tier model to plan for (default: this machine's NUMA nodes); tiers "
                                               "whose NUMA node this machine lacks are emulated on node 0 (see "
                                               "docs/run.md)"},
          {"--plan", "FILE", "apply this host plan from the start (no profiling)"},
          {"--warmup", "N", "iterations before the profiled one (default 1: optimizer state appears there)"},
          {"--profile-iterations", "N", "iterations profiled (default 1); the plan applies after them"},
          {"-o", "FILE", "write the profile there, and the plan next to it (FILE without extension + .plan.json)"},
          {"--stats", "FILE", "write the run statistics (JSON; `tierpack report --run-stats FILE`)"},
          {"--gpu-budget", "SIZE|PCT", "passed to the child for the GPU tier (tierpack.cuda, CUDA machines only)"},
          {"--page-tracer", "KIND", "host page tracer while profiling: auto, mprotect, uffd, off"},
          {"--python-source", "on|off", "record the Python line and module path of each allocation while profiling (default on)"},
          {"--quiet", "", "no status lines from the child"},
          {"--verbose", "", "more status lines from the child (its debug log)"},
          {"--json", "", "also print the outcome as one JSON object, the last line of stdout (docs/run.md)"},
      },
      .child = "-- command ..."};
  return spec;
}

namespace {
namespace fs = std::filesystem;

/// Prints one outcome line per GPU tier that wrote statistics, and where its report is (its run
/// statistics, Note [GPU run statistics], with the profile it writes beside `profile_out`); returns how
/// many did. With `remove` (statistics in a temporary file) both of its files are removed.
int report_gpu_outcome(const std::string& stats_path, const std::string& who, bool remove,
                       const std::string& profile_out) {
  int found = 0;
  for (const auto& [device, path] : gpu_stats_files(stats_path)) {
    nlohmann::json st;
    try {
      st = nlohmann::json::parse(read_file(path));
    } catch (const std::exception&) {
      continue;
    }
    ++found;
    const std::string line = "tierpack run: " + who + gpu_stats_line(st);
    std::fprintf(stderr, "%s\n", line.c_str());
    const std::string run = device_sibling_path(stats_path, device, ".run.json");
    std::error_code ec;
    if (remove) {
      fs::remove(path, ec);
      fs::remove(run, ec);
      continue;
    }
    if (!fs::exists(run, ec)) continue;
    const std::string profile = profile_out.empty() ? std::string() : device_sibling_path(profile_out, device, ".tpk");
    if (!profile.empty() && fs::exists(profile, ec))
      std::fprintf(stderr, "tierpack run: %sGPU report: tierpack report %s --run-stats %s -o report-gpu%d/\n", who.c_str(),
                   profile.c_str(), run.c_str(), device);
    else
      std::fprintf(stderr, "tierpack run: %sGPU run statistics: %s (with -o FILE the GPU tier also writes its profile for "
                   "`tierpack report`)\n", who.c_str(), run.c_str());
  }
  return found;
}

/// Reads one run's statistics and prints its outcome line (and where its report is). Returns 0 when a
/// plan was applied, 1 otherwise (the reason printed). A run whose host side was not enabled but
/// whose GPU tier ran (reported by report_gpu_outcome: `gpu_ran`) is not a failure.
int report_outcome(const std::string& stats_path, const std::string& who, const std::string& profile_out,
                   bool stats_kept, bool gpu_ran = false, int child_status = 0, nlohmann::json* out = nullptr) {
  // With --json the outcome line and its numbers are kept in `out` as well.
  auto say = [&](const char* outcome, const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
    if (out) (*out)["outcome"] = outcome, (*out)["line"] = line;
  };
  nlohmann::json stats;
  bool have_stats = false;
  try {
    stats = nlohmann::json::parse(read_file(stats_path));
    have_stats = stats.contains("tierpack_run");
  } catch (const std::exception&) {
  }
  if (!have_stats && child_status != 0) {
    // The command died or failed before tierpack wrote anything: say that, not "not enabled".
    say("no statistics", "tierpack run: error: " + who + "the run wrote no statistics: the command ended with " +
                             describe_status(child_status) + " first");
    return 1;
  }
  if (!have_stats && gpu_ran) {
    say("gpu tier only", "tierpack run: " + who +
                             "the host side of tierpack did not run (see the messages above: nothing to place on the "
                             "host, or not enabled); only the GPU tier ran");
    return 0;
  }
  if (!have_stats) {
    say("no statistics", "tierpack run: error: " + who +
                             "the run wrote no statistics (tierpack was not enabled in the command: see the messages "
                             "above; torch never loaded, or no iteration ended)");
    return 1;
  }
  const auto& run = stats["tierpack_run"];
  const std::string plan_error = run.value("plan_error", std::string());
  if (!run.value("plan_applied", false)) {
    say("no plan applied", "tierpack run: error: " + who + "no plan was applied: " +
                               (plan_error.empty() ? "the run ended before the profiled iterations were complete" : plan_error));
    return 1;
  }
  // Note [What the run summary says] in runtime/host/run_controller.hpp: applied means followed.
  // The counters are the statistics' own (Note [Run counters] in core/run_stats.hpp), as the report reads them.
  RunStats rs;
  try {
    from_json(stats, rs);
  } catch (const std::exception& e) {
    say("no statistics", "tierpack run: error: " + who + "the run statistics " + stats_path + " cannot be read: " + e.what());
    return 1;
  }
  const RunCounters counters = run_counters(rs);
  int planned = 0, followed = 0, off_at = -1;
  std::string off_why, first_left;
  for (const auto& it : run["iterations"]) {
    if (!it.value("planned", false)) continue;
    ++planned;
    const std::string divergence = it.value("divergence", std::string());
    if (it.value("plan_followed", divergence.empty())) ++followed;
    else if (first_left.empty())
      first_left = "iteration " + std::to_string(it.value("index", -1)) + ": " +
                   (divergence.empty() ? std::string("the plan was off") : divergence);
    if (it.value("plan_turned_off", false) && off_at < 0) off_at = it.value("index", -1), off_why = divergence;
  }
  std::string what;
  if (off_at >= 0) what = "; turned off at iteration " + std::to_string(off_at) + ": " + off_why;
  else if (followed < planned) what = "; left it in " + std::to_string(planned - followed) + " (first " + first_left + ")";
  const int apply_from = run.value("apply_from", -1);
  if (out) {
    *out = {{"apply_from", apply_from},
            {"iterations_under_plan", planned},
            {"iterations_followed", followed},
            {"plan_turned_off_at", off_at},
            {"plan_turned_off_why", off_why},
            {"profile_id", run.value("profile_id", std::string())},
            {"bytes_to_fast", counters.bytes_to_fast},
            {"bytes_to_slow", counters.bytes_to_slow},
            {"late_prefetches", counters.late_prefetches},
            {"stall_ns", counters.stall_ns_measured ? nlohmann::json(counters.stall_ns) : nlohmann::json(nullptr)},
            {"budget_fallbacks", counters.budget_fallbacks},
            {"fast_peak_bytes", counters.fast_peak_bytes},
            {"fast_budget_bytes", counters.budget_bytes},
            {"over_budget_bytes", counters.over_budget_bytes()}};
  }
  if (planned == 0) {
    say("no plan applied", "tierpack run: error: " + who + "no plan was applied: the run ended before iteration " +
                               std::to_string(apply_from) + ", the first under the plan");
    return 1;
  }
  if (followed == 0) {
    const std::string id = run.value("profile_id", std::string());
    say("plan not followed", "tierpack run: error: " + who + "the plan" + (id.empty() ? "" : " (made from profile " + id + ")") +
                                 " was followed in none of the " + std::to_string(planned) + " iteration(s) from iteration " +
                                 std::to_string(apply_from) + what);
    return 1;
  }
  std::string peak;
  if (counters.fast_peak_bytes)
    peak = ", fast peak " + format_bytes(counters.fast_peak_bytes) + " of budget " + format_bytes(counters.budget_bytes) +
           (counters.over_budget_bytes() ? " (over it by " + format_bytes(counters.over_budget_bytes()) + ")" : "");
  say(followed == planned ? "plan applied" : "plan applied in part",
      "tierpack run: " + who + "plan applied from iteration " + std::to_string(apply_from) + " for " +
          std::to_string(followed) + " of " + std::to_string(planned) + " iteration(s)" + what + ": moved " +
          format_bytes(counters.bytes_to_fast) + " to the fast tier, " + format_bytes(counters.bytes_to_slow) +
          " to the slow tier, " + counters.late_text() + ", " + std::to_string(counters.budget_fallbacks) +
          " budget fallback(s) (allocations sent to the slow tier, the fast tier full)" + peak);
  const std::string plan_file = run.value("plan_file", std::string());
  std::error_code ec;
  if (!profile_out.empty() && fs::exists(profile_out, ec) && !stats_kept)
    std::fprintf(stderr, "tierpack run: %sprofile %s, plan %s (add --stats FILE to see measured vs planned in the report)\n",
                 who.c_str(), profile_out.c_str(), plan_file.c_str());
  else if (!profile_out.empty() && fs::exists(profile_out, ec))
    std::fprintf(stderr, "tierpack run: %sreport: tierpack report %s --plan %s --run-stats %s -o report/\n", who.c_str(),
                 profile_out.c_str(), plan_file.c_str(), stats_path.c_str());
  return 0;
}

Budget budget_flag(const Args& args, const std::string& flag) {
  const auto text = args.get(flag);
  if (!text) return {};
  Budget b;
  try {
    b = parse_budget(*text);
  } catch (const logic_error& e) {
    throw usage_error(flag + ": " + e.what());
  }
  if (b.bytes && *b.bytes == 0) throw usage_error(flag + " must be positive");
  if (b.bytes && *b.bytes < 4096) throw usage_error(flag + " " + *text + " is smaller than one page");
  return b;
}

// Note [Checked before launching]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A training command may run for hours; whatever can be found wrong without it is found before it starts
// (issue 26, late failure): the flags (usage errors, exit 2), the plan file (read and validated), the
// outputs (-o's profile, the plan written next to it, --stats: each must be writable now, else exit 1
// naming the path, as for `tierpack profile`), and the tiers: a --fast-budget needs a second host tier to
// place what does not fit on, so on a machine with one host memory tier and no --tiers (or a --tiers with
// one) the run would train to the end and only then fail. It fails now, with the command that works
// (an emulated CXL tier: Note [Tiers this machine lacks] in runtime/host/run_controller.hpp).

/// Fails now (os_error naming the path, exit 1) when `path` cannot be written. A file that was not there
/// is removed again.
void check_writable(const std::string& path) {
  std::error_code ec;
  const bool existed = fs::exists(path, ec);
  std::FILE* f = std::fopen(path.c_str(), "ab");
  if (!f) throw os_error("open " + path + " for writing", errno);
  std::fclose(f);
  if (!existed) fs::remove(path, ec);
}

/// `command` as a user would type it, cut short.
std::string shell_words(const std::vector<std::string>& command) {
  std::string out;
  for (const auto& w : command) {
    const bool quote = w.empty() || w.find_first_of(" \t'\"$`\\|&;<>()*?[]{}") != std::string::npos;
    std::string q = w;
    if (quote) {
      q = "'";
      for (char ch : w) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
      q += "'";
    }
    out += (out.empty() ? "" : " ") + q;
    if (out.size() > 160) return out.substr(0, 157) + "...";
  }
  return out;
}

/// A fast budget with no second host tier to move to (Note [Checked before launching]): a usage error
/// that names the command that works here.
void check_budget_has_a_slow_tier(const Args& args, const std::optional<TierModel>& given) {
  const auto budget = args.get("--fast-budget");
  if (!budget || args.has("--plan")) return;
  TierModel model;
  std::string where;
  if (given) {
    model = *given;
    where = "--tiers " + *args.get("--tiers") + " has";
  } else {
    try {
      DiscoveryOptions o;
      o.gpus = false;
      model = discover_topology(o);
    } catch (const std::exception&) {
      return;  // the child discovers again and says what failed
    }
    where = "this machine has";
  }
  const auto host = model.of_kind(TierKind::host_dram).size() + model.of_kind(TierKind::far_memory).size();
  if (host >= 2) return;
  throw usage_error("--fast-budget " + *budget + ": " + where + " one host memory tier, so what does not fit the budget has "
                    "no other tier to go to (the run would fail after training); to try tierpack here with an emulated "
                    "CXL tier (real budget and moves, no slower memory): tierpack run --tiers preset:ddr5-cxl --fast-budget " +
                    *budget + " -- " + shell_words(args.child));
}

std::string absolute(const std::string& path, const char* what) {
  const std::string out = fs::absolute(path).lexically_normal().string();
  if (out.find(',') != std::string::npos) throw usage_error(std::string(what) + " cannot contain ','");
  return out;
}

}  // namespace

int run_run(const Args& args) {
  if (args.child.empty()) throw usage_error("missing the command to run: tierpack run --fast-budget 4G -- python train.py");

  Config c = with_user_gpu_settings();
  c.mode = RunMode::run;
  c.fast_budget = budget_flag(args, "--fast-budget");
  if (const Budget b = budget_flag(args, "--gpu-budget"); b.is_set()) c.gpu_budget = b;
  c.warmup_iterations = count_flag(args, "--warmup", 1, 0);
  c.profile_iterations = count_flag(args, "--profile-iterations", 1, 1);
  apply_child_flags(args, c);

  std::optional<TierModel> given_tiers;
  if (auto tiers = args.get("--tiers")) {
    if (args.has("--plan")) throw usage_error("--tiers and --plan: the plan carries its tiers");
    TierModel model;
    try {
      model = load_tier_model(*tiers);
      validate_tier_model(model);
    } catch (const format_error& e) {
      throw usage_error(std::string("--tiers: ") + e.what());
    } catch (const logic_error& e) {
      throw usage_error(std::string("--tiers: ") + e.what());
    }
    if (model.of_kind(TierKind::host_dram).empty() && model.of_kind(TierKind::far_memory).empty())
      throw usage_error("--tiers: '" + *tiers + "' has no host memory tier (dram, cxl, ...) to place CPU tensors on");
    given_tiers = model;
    if (tiers->find(',') != std::string::npos && tiers->find('+') == std::string::npos &&
        !fs::exists(*tiers)) {
      std::string joined = *tiers;
      for (char& ch : joined)
        if (ch == ',') ch = '+';
      c.tiers = joined;  // ',' separates TIERPACK_CONF keys; the spec grammar accepts '+' too
    } else if (fs::exists(*tiers)) {
      c.tiers = absolute(*tiers, "--tiers");
    } else {
      c.tiers = *tiers;
    }
    if (c.tiers.find(',') != std::string::npos) throw usage_error("--tiers: use '+' between tiers");
  }
  if (auto plan = args.get("--plan")) {
    if (args.has("--fast-budget")) throw usage_error("--fast-budget and --plan: the plan carries its budget");
    const Plan p = read_plan(*plan);  // a format_error here: exit 1 with the file named
    if (p.device >= 0)
      throw usage_error("--plan: " + *plan + " places GPU " + std::to_string(p.device) +
                        " tensors; tierpack run applies host plans (tierpack plan --device host)");
    c.plan_in = absolute(*plan, "--plan");
  }
  if (auto o = args.get("-o")) {
    if (args.has("--plan")) throw usage_error("-o writes the profile, and with --plan nothing is profiled");
    c.profile_out = absolute(*o, "-o");
  }
  // The child always writes statistics: this command reads them to report the outcome. Under a
  // distributed launcher every rank writes its own (`%r`, Note [Per-rank files] in core/process_rank.hpp).
  const auto rank = process_rank_from_env();
  const int my_rank = rank ? rank->rank : 0;
  std::string stats_tmp, stats_dir;
  struct RemoveDir {
    std::string dir;
    ~RemoveDir() {
      std::error_code ec;
      if (!dir.empty()) fs::remove_all(dir, ec);
    }
  } cleanup;
  if (auto s = args.get("--stats")) {
    c.stats_out = absolute(*s, "--stats");
  } else {
    // A private directory (mkdtemp): no name another user can guess or plant, removed at the end.
    std::string tmpl = (fs::temp_directory_path() / "tierpack-run-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw os_error("mkdtemp " + tmpl, errno);
    stats_dir = tmpl;
    cleanup.dir = stats_dir;
    stats_tmp = (fs::path(stats_dir) / "stats.%r.json").string();
    c.stats_out = stats_tmp;
  }
  const bool per_rank_stats = has_rank_pattern(c.stats_out) && !rank;

  // Note [Checked before launching]: what would fail after the training fails now.
  check_budget_has_a_slow_tier(args, given_tiers);
  check_writable(expand_rank_pattern(c.stats_out, my_rank));
  if (!c.profile_out.empty()) {
    const std::string profile = expand_rank_pattern(c.profile_out, my_rank);
    check_writable(profile);
    check_writable(fs::path(profile).replace_extension().string() + ".plan.json");  // RunController::plan_path
  }

  const TierpackPaths paths = find_tierpack_paths();
  const ChildLaunch launch = prepare_child(args.child, format_config(c), paths);
  std::error_code ec;
  if (per_rank_stats)
    remove_rank_files(c.stats_out);
  else
    fs::remove(expand_rank_pattern(c.stats_out, my_rank), ec);
  if (!c.profile_out.empty()) {
    if (has_rank_pattern(c.profile_out) && !rank)
      remove_rank_files(c.profile_out);
    else
      fs::remove(expand_rank_pattern(c.profile_out, my_rank), ec);
  }

  std::fprintf(stderr, "tierpack run: running %s (%s)\n", launch.argv[0].c_str(), launch.how.c_str());
  const int status = run_child(launch);
  std::fprintf(stderr, "tierpack run: the command ended with %s\n", describe_status(status).c_str());

  std::vector<RankFile> stats_files;
  if (per_rank_stats)
    stats_files = existing_rank_files(c.stats_out);
  else
    stats_files.push_back({my_rank, expand_rank_pattern(c.stats_out, my_rank)});
  const bool several = per_rank_stats || rank.has_value();
  int outcome = 0;
  const bool json = args.has("--json");
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& f : stats_files) {
    const std::string who = several ? "rank " + std::to_string(f.rank) + ": " : std::string();
    const std::string profile = c.profile_out.empty() ? std::string() : expand_rank_pattern(c.profile_out, f.rank);
    const bool gpu_ran = report_gpu_outcome(f.path, who, !stats_tmp.empty(), profile) > 0;
    nlohmann::json one = nlohmann::json::object();
    outcome = std::max(outcome, report_outcome(f.path, who, profile, stats_tmp.empty(), gpu_ran, status, &one));
    one["rank"] = f.rank;
    if (!stats_tmp.empty()) fs::remove(f.path, ec);
    else one["stats"] = f.path;
    ranks.push_back(std::move(one));
  }
  if (stats_files.empty()) {
    const std::string path = expand_rank_pattern(c.stats_out, 0);
    const bool gpu_ran = report_gpu_outcome(path, "", !stats_tmp.empty(), expand_rank_pattern(c.profile_out, 0)) > 0;
    nlohmann::json one = nlohmann::json::object();
    outcome = report_outcome(path, "", "", true, gpu_ran, status, &one);
    ranks.push_back(std::move(one));
  }
  const int exit_status = outcome != 0 ? (status != 0 ? status : outcome) : status;
  if (json) {
    // One JSON object on the last line of stdout, after the command's own output (docs/run.md).
    std::fflush(stdout);
    std::printf("%s\n", nlohmann::json{{"exit_status", exit_status},
                                       {"command_ended_with", describe_status(status)},
                                       {"ranks", ranks}}
                             .dump()
                             .c_str());
  }
  return exit_status;
}

}  // namespace tierpack::cli

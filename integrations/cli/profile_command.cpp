// `tierpack profile`: record a Profile of a training command, or print a profile's summary.
#include <cerrno>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/process_rank.hpp"
#include "core/profile.hpp"
#include "integrations/cli/args.hpp"
#include "integrations/cli/child_launch.hpp"
#include "integrations/cli/commands.hpp"
#include "integrations/cli/rank_files.hpp"
#include "profiler/profile_summary.hpp"

namespace tierpack::cli {

const ArgSpec& profile_spec() {
  static const ArgSpec spec{
      .description =
          "  Runs a PyTorch training command (after --) and records one iteration into -o FILE: tensors (size,\n"
          "  birth, death, the ops that used them), ops, host pages touched per op, page false sharing, hidden\n"
          "  accesses, and whether later iterations allocate the same way. Python commands are bootstrapped\n"
          "  through a sitecustomize (no code change); other commands (LibTorch programs) get\n"
          "  libtierpack_torch.so through LD_PRELOAD. With --summary FILE it prints a profile's summary instead\n"
          "  (--top, --json), and runs nothing.\n",
      .options = {
          {"-o", "FILE", "where the profile goes; %r in it becomes each rank's number under torchrun "
                         "(tierpack profile -o out.%r.tpk -- torchrun --nproc-per-node 2 train.py)"},
          {"--warmup", "N", "iterations to skip first (default 1)"},
          {"--iterations", "N", "iterations compared to build the profile; the first is recorded (default 1)"},
          {"--max-iterations", "N", "stop observing after N iterations (default: until the program ends)"},
          {"--page-tracer", "KIND", "host page access tracer: auto (uffd-wp where the kernel has it, else mprotect), "
                                    "mprotect (sees reads and writes), uffd (writes only), off"},
          {"--python-source", "on|off", "record the Python line and nn.Module path that allocated each tensor (default "
                                        "on; Note [Python source] in integrations/torch/python_source.cpp says what "
                                        "it costs)"},
          {"--window-depth", "N", "ops nested less than N deep close page windows (default 1: top-level ops; deeper "
                                  "gives finer page counts at a higher tracing cost)"},
          {"--quiet", "", "no status lines from the profiled process"},
          {"--verbose", "", "also the page tracer's counters (windows, faults, pages) at the end"},
          {"--summary", "FILE", "print a readable summary of a profile instead"},
          {"--top", "N", "with --summary: rows in the top-tensors table (default 15)"},
          {"--json", "", "with --summary: the summary as one JSON object (keys: docs/profiling.md)"},
      },
      .child = "[-- command ...]",
      .footer = "  Iteration boundaries: the end of torch's Optimizer.step, tierpack.step() / tierpack::step(),\n"
                "  or a period found in the allocation sequence.\n"};
  return spec;
}

namespace {

int summary(const Args& args) {
  if (args.has("-o") || !args.child.empty()) throw usage_error("--summary takes a profile file, not -o or a command");
  SummaryOptions opt;
  opt.top_tensors = static_cast<std::size_t>(count_flag(args, "--top", 15, 1));
  const Profile p = read_profile(*args.get("--summary"));
  if (args.has("--json")) std::fputs((profile_summary_json(p, opt).dump(1) + "\n").c_str(), stdout);
  else std::fputs(format_profile_summary(p, opt).c_str(), stdout);
  return 0;
}

}  // namespace

int run_profile(const Args& args) {
  if (args.has("--summary")) return summary(args);
  if (args.has("--json")) throw usage_error("--json goes with --summary FILE");
  if (!args.has("-o")) throw usage_error("missing -o FILE (where the profile goes)");
  if (args.child.empty()) throw usage_error("missing the command to profile: tierpack profile -o run.tpk -- python train.py");

  namespace fs = std::filesystem;
  const std::string out = fs::absolute(*args.get("-o")).lexically_normal().string();
  if (out.find(',') != std::string::npos) throw usage_error("the output path cannot contain ','");
  // `%r` (Note [Per-rank files]): inside a rank it names this rank's file; otherwise the command is
  // the distributed launcher and every rank writes its own.
  const auto rank = process_rank_from_env();
  const bool per_rank = has_rank_pattern(out) && !rank;
  Config c = with_user_gpu_settings();
  c.mode = RunMode::profile;
  c.profile_out = out;
  c.warmup_iterations = count_flag(args, "--warmup", 1, 0);
  c.profile_iterations = count_flag(args, "--iterations", 1, 1);
  c.max_iterations = count_flag(args, "--max-iterations", 0, 0);
  c.page_window_depth = count_flag(args, "--window-depth", 1, 1);
  apply_child_flags(args, c);
  if (c.max_iterations > 0 && c.max_iterations < c.warmup_iterations + c.profile_iterations)
    throw usage_error("--max-iterations must leave room for the warm-up and profiled iterations");

  // An output that cannot be written fails now, not after a (possibly hours-long) run. "a": an
  // existing profile is not truncated here; it is removed below anyway.
  // With a %r pattern the probe is rank 0's file (or this rank's), removed again below.
  const std::string single = expand_rank_pattern(out, rank ? rank->rank : 0);
  if (std::FILE* f = std::fopen(single.c_str(), "ab")) std::fclose(f);
  else throw os_error("open " + single + " for writing", errno);

  const TierpackPaths paths = find_tierpack_paths();
  const ChildLaunch launch = prepare_child(args.child, format_config(c), paths);
  std::error_code ec;
  if (per_rank)
    remove_rank_files(out);
  else
    fs::remove(single, ec);  // so a missing file afterwards means "not written"

  std::fprintf(stderr, "tierpack profile: running %s (%s)\n", launch.argv[0].c_str(), launch.how.c_str());
  const int status = run_child(launch);
  std::fprintf(stderr, "tierpack profile: the command ended with %s\n", describe_status(status).c_str());
  std::vector<RankFile> files;
  if (per_rank)
    files = existing_rank_files(out);
  else if (fs::exists(single, ec))
    files.push_back({rank ? rank->rank : 0, single});
  if (files.empty()) {
    std::fprintf(stderr,
                 "tierpack profile: error: no profile was written to %s (see the messages above: too few iterations, "
                 "no iteration boundary, or torch never loaded)\n",
                 per_rank ? (out + " for any rank").c_str() : single.c_str());
    return status != 0 ? status : 1;
  }
  for (const auto& f : files) {
    const Profile p = read_profile(f.path);  // validates what the child wrote
    const std::string who = p.meta.rank >= 0 ? " (rank " + std::to_string(p.meta.rank) + " of " +
                                                   std::to_string(p.meta.world_size) + ")"
                                             : std::string();
    std::fprintf(stderr,
                 "tierpack profile: %s%s: iteration %d of %d (%s), %zu ops, %zu tensors, %zu divergent iteration(s); "
                 "see `tierpack profile --summary %s`\n",
                 f.path.c_str(), who.c_str(), p.meta.profiled_iteration, p.meta.iterations_observed,
                 p.meta.iteration_source.c_str(), p.ops.size(), p.tensors.size(), p.divergences.size(), f.path.c_str());
  }
  return status;
}

}  // namespace tierpack::cli

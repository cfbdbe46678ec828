// `tierpack gpu-replay`: plans the GPU tier's recorded iteration again at other budgets (placer/saved_plan.hpp)
// and prints, per budget, what the plan keeps, copies out and makes again, and its predicted step; with
// --storages, each storage's choice.
#include <algorithm>
#include <cstdio>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/file_envelope.hpp"
#include "core/input_file.hpp"
#include "core/saved_choices.hpp"
#include "core/saved_trace.hpp"
#include "core/units.hpp"
#include "integrations/cli/args.hpp"
#include "integrations/cli/commands.hpp"
#include "placer/saved_plan.hpp"

namespace tierpack::cli {

const ArgSpec& gpu_replay_spec() {
  static const ArgSpec spec{
      .description =
          "  Plans the GPU tier's recorded iteration again (the storage mechanism's <stats>.gpu<N>.saved.json,\n"
          "  written by `tierpack run --stats`) at other budgets, offline, with the placer the runtime uses:\n"
          "  for each budget, the storages kept, copied out to host and made again on the GPU, the bytes each\n"
          "  way, the predicted step and the transfer bound. Budgets are the allocator's (sizes, or % of the\n"
          "  recorded live peak); the plan keeps live bytes under the file's fill of each.\n",
      .options = {
          {"--budgets", "B,B,...", "budgets to plan at (default: the run's own budget and the limit it planned under)"},
          {"--recompute", "on|off", "let the plan make storages again (default: as the run did)"},
          {"--host-time", "on|off", "count the hooks' host time in the cost model (default: as the run measured it)"},
          {"--storages", "", "each storage's choice at the first budget (largest first; all with --json)"},
          {"--json", "", "machine-readable output"},
          {"-o", "FILE", "write the output to FILE"},
      },
      .positional = "run.gpu0.saved.json",
      .positional_help = "what the GPU tier wrote beside its statistics",
      .min_positional = 1,
      .max_positional = 1};
  return spec;
}

namespace {

struct Row {
  std::string label;
  std::uint64_t budget = 0;
  SavedPlan plan;
};

struct Choice {
  std::size_t kept = 0, copied = 0, remade = 0;
  std::uint64_t kept_bytes = 0;
};

Choice choices(const SavedTrace& t, const SavedPlan& p) {
  Choice c;
  std::vector<char> moved(t.storages.size(), 0);
  for (const SavedMove& m : p.moves) {
    moved[static_cast<std::size_t>(m.storage)] = 1;
    (m.recompute ? c.remade : c.copied) += 1;
  }
  for (std::size_t s = 0; s < t.storages.size(); ++s)
    if (!moved[s]) ++c.kept, c.kept_bytes += t.storages[s].bytes;
  return c;
}

// (predicted, measured) ms of every storage the run measured.
std::pair<double, double> measured_totals(const SavedRecord& rec) {
  double want = 0, got = 0;
  for (const SavedRecord::Measured& m : rec.measured) want += m.predicted_ms, got += m.measured_ms;
  return {want, got};
}

nlohmann::json storages_json(const SavedRecord& rec, const SavedPlan& p) {
  nlohmann::json out = nlohmann::json::array();
  for (const SavedChoice& c : saved_choices(rec, p)) {
    nlohmann::json j{{"storage", c.storage}, {"bytes", c.bytes}, {"movable", c.movable}};
    if (c.recompute_ms >= 0) j["recipe"] = {{"recompute_ms", c.recompute_ms}, {"from", c.recompute_from}};
    if (c.group >= 0) j["recipe"]["group"] = c.group;
    if (c.measured) j["measured"] = {{"predicted_ms", c.measured->predicted_ms}, {"measured_ms", c.measured->measured_ms}};
    if (c.held_in_forward) j["held_in_forward"] = true;
    if (c.held_until >= 0) j["held_until"] = c.held_until;
    if (c.optimizer_state) j["optimizer_state"] = true;  // back_at -1: the streamed step fetches it
    if (c.block >= 0)  // Note [Block recompute]: the block whose run makes it too
      j["block"] = {{"index", c.block}, {"ms", c.block_ms}, {"from", rec.trace.blocks[static_cast<std::size_t>(c.block)].from}};
    j["choice"] = choice_name(c.kind);
    if (c.kind == SavedChoice::Kind::offload) j["released_at"] = c.released_at, j["back_at"] = c.back_at;
    else if (c.kind != SavedChoice::Kind::keep) j["released_at"] = c.released_at, j["made_at"] = c.back_at;
    out.push_back(j);
  }
  return out;
}

std::string format_storages(const SavedRecord& rec, const SavedPlan& p) {
  std::vector<SavedChoice> rows = saved_choices(rec, p);
  std::stable_sort(rows.begin(), rows.end(), [](const SavedChoice& a, const SavedChoice& b) { return a.bytes > b.bytes; });
  std::string out = printf_string("%8s %11s  %-44s %s\n", "storage", "bytes", "choice (calls of the recorded iteration)", "recipe");
  const std::size_t shown = std::min<std::size_t>(rows.size(), 40);
  for (std::size_t i = 0; i < shown; ++i)
    out += printf_string("%8d %11s  %-44s %s\n", rows[i].storage, format_bytes(rows[i].bytes).c_str(),
                         choice_text(rows[i]).c_str(), recipe_text(rows[i]).c_str());
  if (shown < rows.size()) out += printf_string("... %zu smaller storages (all with --json)\n", rows.size() - shown);
  return out;
}

}  // namespace

int run_gpu_replay(const Args& args) {
  const std::string& path = args.positional[0];
  const SavedRecord rec = [&] {
    try {
      return saved_record_from_json(read_file(path));
    } catch (const format_error& e) {
      throw format_error(path + ": " + e.what());
    }
  }();
  SavedPlanOptions options = rec.options;
  if (auto r = args.get("--recompute")) {
    if (*r != "on" && *r != "off") throw usage_error("--recompute: expected on or off, got " + quote_input(*r));
    options.recompute = *r == "on";
  }
  SavedTrace trace = rec.trace;
  if (auto h = args.get("--host-time")) {  // Note [Host time] in placer/saved_plan.cpp
    if (*h != "on" && *h != "off") throw usage_error("--host-time: expected on or off, got " + quote_input(*h));
    if (*h == "on" && !placer::counts_host_time(trace))
      throw usage_error("--host-time on: " + path + " has no host time at every call (written before Note [Host time], "
                        "or the timed iteration did not match the recorded one)");
    if (*h == "off") {
      trace = placer::without_host_time(std::move(trace));
      options.host_ms_per_copy = options.host_ms_per_remake = 0;
    }
  }
  const bool host = placer::counts_host_time(trace);
  std::uint64_t peak = 0;
  for (const SavedEvent& e : rec.trace.events) peak = std::max(peak, e.window_peak);
  std::vector<std::pair<std::string, std::uint64_t>> budgets;
  if (auto list = args.get("--budgets")) {
    try {
      for (const BudgetPoint& b : parse_budget_list(*list)) budgets.emplace_back(b.label, b.budget.resolve(peak));
    } catch (const logic_error& e) {
      throw usage_error(std::string("--budgets: ") + e.what());
    }
  } else {
    if (rec.budget == 0) throw usage_error(path + " names no budget: give --budgets");
    budgets.emplace_back("the run's", rec.budget);
  }
  std::vector<Row> rows;
  for (const auto& [label, budget] : budgets) {
    // The run's own budget keeps the limit it planned under (lowered by replans: Note [Budget]).
    if (args.has("--budgets")) options.limit_bytes = static_cast<std::uint64_t>(static_cast<double>(budget) * rec.fill);
    rows.push_back({label, budget, placer::plan_saved_tensors(trace, options)});
  }
  std::string text;
  if (args.has("--json")) {
    nlohmann::json j = nlohmann::json::array();
    for (const Row& r : rows) {
      const Choice c = choices(rec.trace, r.plan);
      nlohmann::json row{{"budget", r.label},
                         {"budget_bytes", r.budget},
                         {"limit_bytes", r.plan.limit_bytes},
                         {"fits", r.plan.fits},
                         {"predicted_ms", r.plan.predicted_ms},
                         {"recorded_ms", rec.trace.step_ms},
                         {"bound_ms", r.plan.bound_ms},
                         {"bytes_out", r.plan.bytes_out},
                         {"bytes_in", r.plan.bytes_in},
                         {"bytes_recomputed", r.plan.bytes_recomputed},
                         {"kept", c.kept},
                         {"offloaded", c.copied},
                         {"recomputed", c.remade},
                         {"host_time", host},
                         {"host_ms_per_copy", options.host_ms_per_copy},
                         {"host_ms_per_remake", options.host_ms_per_remake}};
      if (rec.measured_iteration >= 0) {
        const auto [want, got] = measured_totals(rec);
        row["run_measured"] = {{"iteration", rec.measured_iteration}, {"storages", rec.measured.size()},
                               {"predicted_ms", want}, {"measured_ms", got}};
      }
      if (args.has("--storages")) row["storages"] = storages_json(rec, r.plan);
      j.push_back(row);
    }
    text = j.dump(1) + "\n";
  } else {
    text = printf_string("recorded iteration: %zu saved storages, live peak %s, step %.1f ms; link %.1f / %.1f GB/s; "
                         "recompute %s; the plan fills %.0f%% of each budget\n",
                         rec.trace.storages.size(), format_bytes(peak).c_str(), rec.trace.step_ms,
                         options.d2h_bytes_per_s / 1e9, options.h2d_bytes_per_s / 1e9, options.recompute ? "on" : "off",
                         rec.fill * 100);
    text += host ? printf_string("host time counted: %.0f us a copy issued, %.0f us a recomputation%s (Note [Host time])\n",
                                 options.host_ms_per_copy * 1e3, options.host_ms_per_remake * 1e3,
                                 options.host_ms_per_copy > 0 || options.host_ms_per_remake > 0
                                     ? "" : " (not measured yet: the host's own time at each call only)")
                 : std::string("host time not counted (the cost model walks the GPU's time alone)\n");
    text += printf_string("%-24s %11s %8s %15s %12s %20s %12s %9s\n", "budget", "limit", "fits", "copied each way",
                          "made again", "kept/offload/remake", "predicted", "bound");
    for (const Row& r : rows) {
      const Choice c = choices(rec.trace, r.plan);
      const std::string label = r.label + " (" + format_bytes(r.budget) + ")";
      const std::string counts = std::to_string(c.kept) + "/" + std::to_string(c.copied) + "/" + std::to_string(c.remade);
      text += printf_string("%-24s %11s %8s %15s %12s %20s %9.1f ms %6.1f ms\n", label.c_str(),
                            format_bytes(r.plan.limit_bytes).c_str(), r.plan.fits ? "yes" : "DOES NOT",
                            format_bytes(r.plan.bytes_out).c_str(), format_bytes(r.plan.bytes_recomputed).c_str(),
                            counts.c_str(), r.plan.predicted_ms, r.plan.bound_ms);
    }
    text += host ? "predicted: the recorded step plus the waits the cost model finds, the host's included (placer/"
                   "saved_plan.cpp, Notes [Storage move cost] and [Host time]); a lower bound where the allocator adds more\n"
                 : "predicted: the recorded step plus the waits the cost model finds (placer/saved_plan.cpp, Note [Storage "
                   "move cost]); a lower bound where the run's host time or the allocator adds more\n";
    if (rec.measured_iteration >= 0) {
      const auto [want, got] = measured_totals(rec);
      text += printf_string("the run's plan, measured in iteration %d: %zu storage(s) made again in %.1f ms of GPU time, "
                            "predicted %.1f ms (Note [Measured recomputation])\n",
                            rec.measured_iteration, rec.measured.size(), got, want);
    }
    if (args.has("--storages")) text += "\n" + format_storages(rec, rows.front().plan);
  }
  if (auto out = args.get("-o")) write_file_atomic(*out, text);
  else std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace tierpack::cli

// Experiment output files (see results_writer.hpp).
#include "experiment/results_writer.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "core/error.hpp"
#include "core/file_envelope.hpp"
#include "core/units.hpp"
#include "experiment/svg_plot.hpp"

namespace tierpack::experiment {
namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

std::string fixed(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

// Budgets in the order given, each with its rows.
std::vector<std::string> budget_order(const ExperimentResult& r) {
  std::vector<std::string> out;
  for (const auto& row : r.rows)
    if (std::find(out.begin(), out.end(), row.budget_label) == out.end()) out.push_back(row.budget_label);
  return out;
}

std::vector<std::string> policy_order(const ExperimentResult& r) {
  std::vector<std::string> out;
  for (const auto& row : r.rows)
    if (std::find(out.begin(), out.end(), row.policy) == out.end()) out.push_back(row.policy);
  return out;
}

const ResultRow* find(const ExperimentResult& r, const std::string& budget, const std::string& policy) {
  for (const auto& row : r.rows)
    if (row.budget_label == budget && row.policy == policy) return &row;
  return nullptr;
}

std::string cell(const ResultRow* row) {
  if (!row) return "";
  if (!row->available) return "n/a";
  if (!row->fits) return "does not fit";
  return fixed(row->slowdown, 3) + "x";
}

}  // namespace

std::string format_csv(const ExperimentResult& r) {
  std::string o =
      "mode,budget,budget_bytes,budget_fraction,policy,available,fits,step_ms,slowdown,stall_ms,in_place_ms,"
      "bytes_to_fast,bytes_to_slow,bytes_migrated,in_place_bytes,fast_peak_bytes,slow_peak_bytes,mixed_class_pages,"
      "emulated,note\n";
  for (const auto& x : r.rows) {
    o += r.mode + "," + csv_field(x.budget_label) + "," + std::to_string(x.budget_bytes) + "," + fixed(x.budget_fraction, 4) + "," +
         csv_field(x.policy) + "," + (x.available ? "1" : "0") + "," + (x.fits ? "1" : "0") + "," +
         (x.available ? fixed(x.step_ns / 1e6, 4) : "") + "," + (x.available ? fixed(x.slowdown, 4) : "") + "," +
         fixed(x.stall_ns / 1e6, 4) + "," + fixed(x.in_place_ns / 1e6, 4) + "," + std::to_string(x.bytes_to_fast) + "," +
         std::to_string(x.bytes_to_slow) + "," + std::to_string(x.bytes_migrated()) + "," + std::to_string(x.in_place_bytes) +
         "," + std::to_string(x.fast_peak_bytes) + "," + std::to_string(x.slow_peak_bytes) + "," +
         std::to_string(x.mixed_class_pages) + "," + (x.emulated ? "1" : "0") + "," + csv_field(x.note) + "\n";
  }
  return o;
}

std::string format_summary(const ExperimentResult& r) {
  const bool real = r.mode == "real";
  const bool emulated = std::any_of(r.rows.begin(), r.rows.end(), [](const ResultRow& x) { return x.emulated; });
  std::string o = "# tierpack experiment: " + std::string(real ? "real nodes" : "calibrated model") + "\n\n";
  o += "* workload: `" + r.workload + "`\n";
  o += "* tiers: " + r.tiers + " (fast `" + r.fast_tier + "`, slow `" + r.slow_tier + "`" +
       (emulated ? ", **EMULATED**: nodes of equal speed" : "") + ")\n";
  o += "* peak of live tensor bytes: " + format_bytes(r.peak_bytes) + "; all-fast step " + format_duration_ns(r.reference_step_ns) +
       (real ? " (measured)" : " (the profiled iteration)") + "\n";
  if (real) {
    o += "* " + std::to_string(r.iterations) + " iteration(s) per run, step = median wall time of the iterations after the first (residency sampling excluded)\n";
    if (emulated)
      o += "* **EMULATED**: measured in a QEMU TCG guest whose two NUMA nodes have the same real speed; the timings show "
           "the cost of the mechanisms (page faults, migrations, policy calls), not of slower memory.\n";
  } else {
    o += "* step times are **predicted** by the simulator (docs/simulator.md) from the tier model's figures, not measured\n";
    // Note [Lower-bound predictions] in placer/prediction_bound.hpp.
    for (const auto& why : r.lower_bound) o += "* **lower bound**: " + why + "\n";
  }
  const std::string marks = emulated ? " (EMULATED)" : !r.lower_bound.empty() ? " (predicted lower bounds)" : "";
  o += "\n## Slowdown against all-fast, by fast-tier budget" + marks + "\n\n";
  const auto budgets = budget_order(r);
  const auto policies = policy_order(r);
  o += "| budget |";
  for (const auto& p : policies) o += " " + p + " |";
  o += " migrated agnostic / aware | mixed pages agnostic / aware |\n|---|";
  for (std::size_t i = 0; i < policies.size() + 2; ++i) o += "---|";
  o += "\n";
  for (const auto& b : budgets) {
    const ResultRow* any = nullptr;
    for (const auto& p : policies)
      if ((any = find(r, b, p))) break;
    o += "| " + b + " (" + format_bytes(any ? any->budget_bytes : 0) + ") |";
    for (const auto& p : policies) o.append(" ").append(cell(find(r, b, p))).append(" |");
    const ResultRow* ag = find(r, b, "page-agnostic");
    const ResultRow* aw = find(r, b, "page-aware");
    auto migrated = [](const ResultRow* x) { return x && x->available ? format_bytes(x->bytes_migrated()) : std::string("-"); };
    auto mixed = [](const ResultRow* x) { return x && x->available ? std::to_string(x->mixed_class_pages) : std::string("-"); };
    o.append(" ").append(migrated(ag)).append(" / ").append(migrated(aw)).append(" | ");
    o.append(mixed(ag)).append(" / ").append(mixed(aw)).append(" |\n");
  }
  o += "\nCells: step time / all-fast step time (";
  o += real ? (emulated ? "measured in an emulated guest: mechanism costs, not slower memory" : "measured")
              : (r.lower_bound.empty() ? "predicted" : "predicted, a lower bound: see above");
  o += "); n/a: not available (see notes); migrated: bytes moved between the tiers per iteration; mixed pages: pages "
       "holding live tensors of different lifetime classes at once.\n";

  o += "\n## All figures" + marks + "\n\n| budget | policy | step | slowdown | migrated to fast | to slow | " +
       std::string(real ? "fast-node peak | slow-node peak" : "read in place | fast peak") + " | mixed pages | note |\n";
  o += "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& x : r.rows) {
    o += "| " + x.budget_label + " | " + x.policy + " | " + (x.available ? format_duration_ns(x.step_ns) : "n/a") + " | " +
         (x.available ? fixed(x.slowdown, 3) + "x" : "-") + " | " + format_bytes(x.bytes_to_fast) + " | " + format_bytes(x.bytes_to_slow) +
         " | " + (real ? format_bytes(x.fast_peak_bytes) : format_bytes(x.in_place_bytes)) + " | " +
         (real ? format_bytes(x.slow_peak_bytes) : format_bytes(x.fast_peak_bytes)) + " | " + std::to_string(x.mixed_class_pages) +
         " | " + x.note + " |\n";
  }
  if (!r.validation.empty()) {
    o += "\n## Simulator validation (predicted vs measured step time)\n\n| configuration | measured | predicted | error | source |\n"
         "|---|---|---|---|---|\n";
    for (const auto& v : r.validation) {
      o += "| " + v.what + " | " + format_duration_ns(v.measured_ns) + " | " + format_duration_ns(v.predicted_ns) + " | " +
           (v.error() >= 0 ? "+" : "") + fixed(100 * v.error(), 1) + "% | " + v.source + " |\n";
    }
  }
  if (!r.notes.empty()) {
    o += "\n## Notes\n\n";
    for (const auto& n : r.notes) o += "* " + n + "\n";
  }
  o += "\nPlots: `step_time.svg` (step time vs fast budget, one line per policy), `migration.svg` (bytes migrated per "
       "iteration vs budget). Raw figures: `results.csv`.\n";
  if (!r.commands.empty()) {
    o += "\n## Commands\n\n```\n";
    for (const auto& c : r.commands) o += c + "\n";
    o += "```\n";
  }
  return o;
}

std::vector<std::pair<std::string, std::string>> make_plots(const ExperimentResult& r) {
  const bool real = r.mode == "real";
  SvgChart step;
  step.title = std::string(real ? "Measured" : "Predicted") + " step time vs fast-tier budget" +
               (std::any_of(r.rows.begin(), r.rows.end(), [](const ResultRow& x) { return x.emulated; }) ? " (emulated)"
                : !real && !r.lower_bound.empty()                                                      ? " (lower bounds)"
                                                                                                       : "");
  step.x_label = "fast-tier budget (% of peak live tensor bytes)";
  step.y_label = "step time (ms)";
  SvgChart moved;
  moved.title = "Bytes migrated per iteration vs fast-tier budget";
  moved.x_label = step.x_label;
  moved.y_label = "MiB migrated per iteration (both ways)";
  for (const auto& p : policy_order(r)) {
    SvgSeries s{p, {}, p == "all-fast"};
    SvgSeries m{p, {}, p == "all-fast"};
    for (const auto& x : r.rows) {
      if (x.policy != p || !x.available || !x.fits) continue;
      s.points.emplace_back(100 * x.budget_fraction, x.step_ns / 1e6);
      m.points.emplace_back(100 * x.budget_fraction, static_cast<double>(x.bytes_migrated()) / (1 << 20));
    }
    step.series.push_back(std::move(s));
    moved.series.push_back(std::move(m));
  }
  return {{"step_time.svg", render_svg(step)}, {"migration.svg", render_svg(moved)}};
}

std::vector<std::string> write_results(const ExperimentResult& r, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw os_error("mkdir " + dir, ec.value());
  std::vector<std::string> written;
  auto put = [&](const std::string& name, const std::string& text) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    write_file_atomic(path, text);
    written.push_back(path);
  };
  put("results.csv", format_csv(r));
  put("summary.md", format_summary(r));
  for (const auto& [name, svg] : make_plots(r)) put(name, svg);
  return written;
}

}  // namespace tierpack::experiment

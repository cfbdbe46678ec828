// What `tierpack report` reads (a Profile, optionally a Plan and a run's statistics) and the knobs
// that bound the size of what it writes. Plain values; see report_writer.hpp for the entry point.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/plan.hpp"
#include "core/profile.hpp"
#include "core/tier_spec.hpp"
#include "core/run_stats.hpp"
#include "core/saved_choices.hpp"

namespace tierpack::report {

struct ReportInputs {
  const Profile* profile = nullptr;        ///< required
  const Plan* plan = nullptr;              ///< optional
  const RunStats* run_stats = nullptr;     ///< optional
  std::string profile_path;                ///< for humans (shown in the report)
  std::string plan_path;
  std::string run_stats_path;
  /// One line per GPU tier of the same run (core/gpu_stats.hpp: gpu_stats_line, and the file it read).
  std::vector<std::string> gpu_tiers;
  /// Per GPU tier whose storage mover planned: each saved storage's choice under the plan the run followed
  /// (its <stats>.gpu<N>.saved.json; core/saved_choices.hpp).
  struct GpuChoices {
    std::string device;  ///< "gpu0"
    std::string path;    ///< the file read
    std::uint64_t limit_bytes = 0;
    double predicted_ms = 0, recorded_ms = 0;
    std::vector<SavedChoice> rows;
  };
  std::vector<GpuChoices> gpu_choices;
};

struct ReportOptions {
  /// Fast-tier budgets (fractions of the profiled peak) for the "what tierpack would save" table.
  std::vector<double> budget_fractions{0.75, 0.5, 0.35, 0.2};
  /// Extra absolute budget to show (e.g. --budget 24G), 0 for none; drawn as the budget line when no
  /// plan or run gives one.
  std::uint64_t budget_bytes = 0;
  /// Tier model the planner uses for "what tierpack would save"; unset: the plan's, else the
  /// profile's tiers, else a preset (labelled as assumed). `tier_model_source` says where it came from.
  std::optional<TierModel> tier_model;
  std::string tier_model_source;
  // Bounds on what the HTML embeds (docs/report.md, "Size budget").
  std::size_t max_series_points = 1500;
  std::size_t top_tensors = 25;
  std::size_t lifetime_rows = 60;
  std::size_t max_use_ticks = 120;
  std::size_t page_map_cells = 16384;
  std::size_t max_migration_items = 1500;  ///< per row of the migrations chart
  std::size_t table_rows = 20;
};

}  // namespace tierpack::report

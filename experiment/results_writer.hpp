// Writes an experiment's results into a folder: results.csv (one row per policy and budget),
// summary.md (the budget-vs-slowdown table, the page-aware vs page-agnostic column, validation,
// notes, commands) and SVG plots (step time vs fast budget, one line per policy; bytes migrated vs budget).
#pragma once

#include <string>
#include <vector>

#include "experiment/experiment_result.hpp"

namespace tierpack::experiment {

std::string format_csv(const ExperimentResult& r);
std::string format_summary(const ExperimentResult& r);
/// The plots: {file name, SVG document}.
std::vector<std::pair<std::string, std::string>> make_plots(const ExperimentResult& r);

/// Writes all of the above into `dir` (created); returns the paths written. Throws os_error.
std::vector<std::string> write_results(const ExperimentResult& r, const std::string& dir);

}  // namespace tierpack::experiment

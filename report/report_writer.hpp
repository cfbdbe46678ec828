// `tierpack report`'s entry point: builds the report model once and writes index.html, trace.json,
// memory_snapshot.json and memory_snapshot.pickle into a directory (docs/report.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "report/report_inputs.hpp"

namespace tierpack::report {

struct WrittenFile {
  std::string path;
  std::uint64_t bytes = 0;
  double seconds = 0;  ///< time to render and write it
};

struct ReportResult {
  std::vector<WrittenFile> files;  ///< index.html first
  double model_seconds = 0;        ///< time to compute the shared statistics
  std::vector<std::string> summary;
  std::vector<std::string> warnings;
};

/// Writes the report into `out_dir` (created when missing). Throws os_error when a file cannot be
/// written, logic_error for inputs that cannot make a report.
ReportResult write_report(const ReportInputs& inputs, const ReportOptions& options, const std::string& out_dir);

}  // namespace tierpack::report

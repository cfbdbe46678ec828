// The merged view of a distributed job's per-rank reports (`tierpack report out.%r.tpk`): every rank
// gets its full report in rank<N>/, and the top directory gets
//   index.html  one table comparing the ranks (peak memory, iteration time, tensors, false sharing,
//               hidden accesses, divergence), linking to each rank's page;
//   trace.json  the ranks' Perfetto traces merged into one: rank N's tracks are processes named
//               "rank N: ..." (pid + N * kRankPidStride), so the ranks line up on one timeline (each
//               from the start of its own profiled iteration).
#pragma once

#include <string>
#include <vector>

#include "core/profile.hpp"
#include "report/report_writer.hpp"

namespace tierpack::report {

inline constexpr int kRankPidStride = 1000;

struct RankReport {
  int rank = 0;
  std::string profile_path;
  const Profile* profile = nullptr;
  std::string dir;                   ///< the rank's report directory, relative to the overview's
  std::vector<std::string> summary;  ///< the rank report's summary lines
};

/// Writes index.html and trace.json (merged from each rank's `<dir>/trace.json`) into `out_dir`.
/// Throws os_error when a file cannot be written, format_error when a rank's trace cannot be read.
std::vector<WrittenFile> write_rank_overview(const std::vector<RankReport>& ranks, const std::string& out_dir);

}  // namespace tierpack::report

// Readable summary of a Profile: what `tierpack profile --summary run.tpk` prints. Top tensors by
// bytes x lifetime, lifetime classes, falsely shared pages, hidden accesses and iteration divergence,
// as plain-text tables.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/profile.hpp"

namespace tierpack {

struct SummaryOptions {
  std::size_t top_tensors = 15;  ///< rows in the top-tensors table
  std::size_t max_pages = 10;    ///< rows in the false-sharing and hidden-access tables
};

std::string format_profile_summary(const Profile& profile, const SummaryOptions& options = {});
/// The same summary as one JSON object (`tierpack profile --summary FILE --json`): the profile's identity
/// and meta, peaks per device, lifetime classes, top tensors, page counts, iterations, divergences.
/// Keys: docs/profiling.md ("Summary as JSON").
nlohmann::json profile_summary_json(const Profile& profile, const SummaryOptions& options = {});

}  // namespace tierpack

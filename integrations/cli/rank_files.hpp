// Per-rank output files of CLI commands: `-o out.%r.tpk` (core/process_rank.hpp, Note [Per-rank
// files]). When tierpack itself runs inside a rank (`torchrun ... tierpack profile -o out.%r.tpk`),
// the pattern names one file; when it launches the distributed job (`tierpack profile -o out.%r.tpk
// -- torchrun ...`), the ranks write one file each and these functions find them afterwards.
#pragma once

#include <string>
#include <vector>

namespace tierpack::cli {

struct RankFile {
  int rank = 0;
  std::string path;
};

/// The files that exist for `pattern` (a path holding `%r`), by rank.
std::vector<RankFile> existing_rank_files(const std::string& pattern);

/// Removes them (so a missing file afterwards means "not written").
void remove_rank_files(const std::string& pattern);

}  // namespace tierpack::cli

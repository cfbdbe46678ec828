// RunStats: the counters a real run under tierpack recorded (bytes moved each way, stalls, resident
// bytes per tier over an iteration, the moves it executed). Optional input of `tierpack report
// --run-stats`; the report shows them next to the plan's predictions. File format: docs/report.md
// ("Run statistics").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/plan.hpp"
#include "core/tier.hpp"

namespace tierpack {

/// Counters of one iteration of the run.
struct RunIteration {
  std::int32_t index = 0;
  std::uint64_t step_ns = 0;
  std::uint64_t bytes_to_fast = 0;
  std::uint64_t bytes_to_slow = 0;
  std::uint32_t stalls = 0;      ///< prefetches that arrived late (a miss waits for the copy)
  std::uint64_t stall_ns = 0;

  friend bool operator==(const RunIteration&, const RunIteration&) = default;
};

/// Resident bytes of one tier at one time of the sampled iteration.
struct OccupancySample {
  std::uint64_t t_ns = 0;  ///< from the sampled iteration's start
  TierId tier = kNoTier;
  std::uint64_t bytes = 0;

  friend bool operator==(const OccupancySample&, const OccupancySample&) = default;
};

/// A migration the run executed (times from the sampled iteration's start).
struct MeasuredMove {
  GroupId group = 0;
  MoveKind kind = MoveKind::evict;
  TierId from = kNoTier;
  TierId to = kNoTier;
  std::uint64_t bytes = 0;
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;

  friend bool operator==(const MeasuredMove&, const MeasuredMove&) = default;
};

/// A use that waited for its page group (late prefetch).
struct MeasuredStall {
  OpIndex op = 0;
  GroupId group = 0;
  std::uint64_t start_ns = 0;
  std::uint64_t duration_ns = 0;

  friend bool operator==(const MeasuredStall&, const MeasuredStall&) = default;
};

struct RunStats {
  static constexpr int kFormatVersion = 1;

  std::string source;                     ///< what recorded it ("tierpack run", "twin", ...)
  std::uint64_t fast_budget_bytes = 0;    ///< budget the run enforced (0: unknown)
  std::int32_t sampled_iteration = -1;    ///< which iteration occupancy/moves/stalls describe
  std::vector<RunIteration> iterations;
  std::vector<OccupancySample> occupancy; ///< sorted by t_ns
  std::vector<MeasuredMove> moves;
  std::vector<MeasuredStall> stalls;

  /// Checks times (end >= start, samples sorted) and kinds; throws format_error.
  void validate() const;

  friend bool operator==(const RunStats&, const RunStats&) = default;
};

void to_json(nlohmann::json& j, const RunStats& s);
void from_json(const nlohmann::json& j, RunStats& s);

/// Reads a run-statistics JSON file ({"format": "tierpack-run-stats", "version": 1, ...}); a wrong
/// format name, a newer version or malformed content is a format_error naming the file.
RunStats read_run_stats(const std::string& path);
void write_run_stats(const RunStats& s, const std::string& path);

}  // namespace tierpack

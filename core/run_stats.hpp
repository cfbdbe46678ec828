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

// Note [Run counters]
// ~~~~~~~~~~~~~~~~~~~
// One definition per counter, used by the run's status lines, its statistics file, `tierpack run`'s final
// line and the report (run_counters() adds them up; docs/report.md, "Run statistics", says the same):
//   late prefetches  prefetches not complete when the op that needs their group began (RunIteration::stalls,
//                    key "stalls"; the host mover's moves_late, the GPU tier's waits).
//   stall time       how long the training waited for late prefetches (stall_ns). Only a runtime that waits
//                    measures it: the GPU tier does; the host runtime never waits (an op reads the pages
//                    where they are while the move runs), so its files say stall_ns_measured: false and
//                    every reader prints "not measured", never "0 ns".
//   budget fallbacks allocations the plan put on the fast tier that went to the slow tier because the fast
//                    tier was full (budget_fallbacks; the run's status lines and summary call them that).
//   fast peak        the highest resident bytes on the fast tier in the iteration (fast_peak_bytes, 0 where a
//                    runtime does not record it per iteration).
//   over budget      bytes of the fast peak above the run's budget: max(0, fast peak - budget). Not a count
//                    of allocations: a budget is exceeded by bytes resident, whatever put them there.

/// Counters of one iteration of the run (Note [Run counters]).
struct RunIteration {
  std::int32_t index = 0;
  std::uint64_t step_ns = 0;
  std::uint64_t bytes_to_fast = 0;
  std::uint64_t bytes_to_slow = 0;
  std::uint32_t stalls = 0;      ///< late prefetches: not complete when the op that needs them began
  std::uint64_t stall_ns = 0;    ///< time waited for them (RunStats::stall_ns_measured says whether measured)
  std::uint64_t budget_fallbacks = 0;  ///< allocations sent to the slow tier: the fast tier was full
  std::uint64_t fast_peak_bytes = 0;   ///< highest resident bytes on the fast tier (0: not recorded)

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
  std::string profile_id;                 ///< identity of the profile its plan was made from ("" unknown;
                                          ///< Note [Profile identity] in core/profile.hpp)
  std::uint64_t fast_budget_bytes = 0;    ///< budget the run enforced (0: unknown)
  std::int32_t sampled_iteration = -1;    ///< which iteration occupancy/moves/stalls describe
  bool stall_ns_measured = true;          ///< false: the runtime does not wait, stall_ns is not a measurement
  /// Tiers of the plan this machine lacked, emulated on node 0 ("cxl0 (NUMA node 1)"; Note [Tiers this
  /// machine lacks] in runtime/host/run_controller.hpp): budget and moves real, memory not slower.
  /// Key "emulated_tiers" (files from before it: tierpack_run.emulated_tiers).
  std::vector<std::string> emulated_tiers;
  std::vector<RunIteration> iterations;
  std::vector<OccupancySample> occupancy; ///< sorted by t_ns
  std::vector<MeasuredMove> moves;
  std::vector<MeasuredStall> stalls;

  /// Checks times (end >= start, samples sorted) and kinds; throws format_error.
  void validate() const;

  friend bool operator==(const RunStats&, const RunStats&) = default;
};

/// The counters of Note [Run counters] over a run's iterations.
struct RunCounters {
  std::size_t iterations = 0;
  std::uint64_t bytes_to_fast = 0;     ///< sums over the iterations
  std::uint64_t bytes_to_slow = 0;
  std::uint64_t late_prefetches = 0;
  std::uint64_t stall_ns = 0;          ///< meaningful only when stall_ns_measured
  bool stall_ns_measured = true;
  std::uint64_t budget_fallbacks = 0;
  std::uint64_t fast_peak_bytes = 0;   ///< the highest over the iterations (0: not recorded)
  std::uint64_t budget_bytes = 0;      ///< 0: unknown
  /// Bytes of the fast peak above the budget (0 when either is unknown).
  std::uint64_t over_budget_bytes() const {
    return budget_bytes && fast_peak_bytes > budget_bytes ? fast_peak_bytes - budget_bytes : 0;
  }
  /// "3 late prefetch(es), stall time not measured (the runtime does not wait)" or "..., 1.2 ms waiting".
  std::string late_text() const;
};
RunCounters run_counters(const RunStats& s);

void to_json(nlohmann::json& j, const RunStats& s);
void from_json(const nlohmann::json& j, RunStats& s);

/// Reads a run-statistics JSON file ({"format": "tierpack-run-stats", "version": 1, ...}); a wrong
/// format name, a newer version or malformed content is a format_error naming the file.
RunStats read_run_stats(const std::string& path);
void write_run_stats(const RunStats& s, const std::string& path);

}  // namespace tierpack

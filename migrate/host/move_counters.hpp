// MoveCounters: what the host mover did in one iteration (or since it was last reset): bytes per
// direction, late and failed moves, page outcomes, failures by errno. Reported to the user and
// written to the run's stats file.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace tierpack::host {

struct MoveCounters {
  std::uint64_t bytes_to_fast = 0;   ///< prefetches: bytes now resident on the target tier
  std::uint64_t bytes_to_slow = 0;   ///< evictions
  std::uint64_t moves_submitted = 0;
  std::uint64_t moves_complete = 0;  ///< every present page reached the target
  std::uint64_t moves_partial = 0;   ///< some pages stayed where they were (see failures)
  std::uint64_t moves_late = 0;      ///< a prefetch still in flight when its needed_by op began
  std::uint64_t moves_dropped = 0;   ///< discarded at shutdown or superseded before they ran
  std::uint64_t moves_empty = 0;     ///< the group had no live blocks
  std::uint64_t moves_over_budget = 0;  ///< prefetches not done: no room under the fast budget
  std::uint64_t pages_moved = 0;     ///< base pages on the target after their move
  std::uint64_t pages_absent = 0;    ///< -ENOENT: never touched; they fault in on the target later
  std::uint64_t pages_zero = 0;      ///< -EFAULT: the shared zero page (read, never written) or unmapped
  std::uint64_t pages_retried = 0;   ///< -EBUSY / EAGAIN answers retried later
  std::uint64_t pages_failed = 0;    ///< left behind for good (counted by errno below)
  std::map<int, std::uint64_t> failures_by_errno;  ///< positive errno -> pages (or calls, for mbind)

  void add(const MoveCounters& o);
  /// "moved 12.0 MiB to fast, 8.0 MiB to slow in 9 moves; 3 late prefetch(es); 1 partial (EBUSY x4)".
  std::string summary() const;
  friend bool operator==(const MoveCounters&, const MoveCounters&) = default;
};

void to_json(nlohmann::json& j, const MoveCounters& c);

}  // namespace tierpack::host

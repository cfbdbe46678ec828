// Assign: decides, for every page group, when it is on the fast tier, so that the fast tier never
// holds more than its budget during any op of the iteration (Note [Fast-tier accounting] in
// plan_check.hpp). A group leaves the fast tier in *excursions*: evicted after a use, prefetched back
// before its next use, with the gap long enough for both copies at the link's speed. Where no excursion
// frees enough, the coldest group alive is *spilled*: it lives on the slow tier (all its life, or until
// a gap lets it come in) and is read in place.
// Algorithm: Note [Excursion selection] in assign.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "placer/cost_model.hpp"
#include "placer/pack.hpp"
#include "placer/timeline.hpp"

namespace tierpack::placer {

/// One stretch of a group's life away from the fast tier.
struct Excursion {
  GroupId group = 0;
  bool evicts = true;                     ///< false: the group starts the iteration on the slow tier
  OpIndex evict_after = kBeforeIteration; ///< the eviction is issued when this op ends
  OpIndex evicted_by = kAfterIteration;   ///< from this op on, its fast memory counts as free
  bool prefetches = true;                 ///< false: it stays on the slow tier until it dies or the iteration ends
  OpIndex prefetch_after = kBeforeIteration;  ///< the prefetch is issued when this op ends (-1: at iteration start)
  OpIndex needed_by = kAfterIteration;    ///< the prefetch must arrive before this op (kAfterIteration: by the end)
  std::uint64_t evict_bytes = 0;          ///< the group's size when it leaves
  std::uint64_t prefetch_bytes = 0;       ///< the group's size when it comes back
};

struct AssignOptions {
  std::uint64_t budget = 0;     ///< fast-tier bytes
  double transfer_slack = 1.0;  ///< plan copies as if they took this much longer (contention margin)
};

struct Assignment {
  std::vector<bool> home_fast;        ///< per group: on the fast tier when it is born / the iteration starts
  std::vector<bool> spilled;          ///< per group: never on the fast tier
  std::vector<Excursion> excursions;  ///< sorted by group, then by time
  std::uint64_t natural_peak = 0;     ///< fast-tier peak with every group resident all its life
  std::uint64_t peak = 0;             ///< fast-tier peak under the assignment (accounting of plan_check.hpp)
  std::uint32_t spilled_groups = 0;        ///< on the slow tier all their life
  std::uint32_t partly_spilled_groups = 0;  ///< born on the slow tier, prefetched for later uses
  std::uint64_t spilled_bytes = 0;
};

/// Fast-tier bytes per op if every group stayed resident all its life.
std::vector<std::uint64_t> natural_occupancy(const Packing& packing, OpIndex n_ops);

Assignment assign_tiers(const Packing& packing, const Timeline& timeline, const CostModel& cost, const AssignOptions& opts);

}  // namespace tierpack::placer

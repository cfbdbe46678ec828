// Schedule: turns a tier assignment into the plan's migration schedule (evictions after the last use
// before a gap, prefetches ahead of the next use), and moves prefetches that the simulator found late
// earlier where the budget leaves room (the link is shared, so copies queue behind each other).
#pragma once

#include <vector>

#include "core/plan.hpp"
#include "placer/assign.hpp"
#include "placer/cost_model.hpp"
#include "placer/timeline.hpp"

namespace tierpack::placer {

/// The moves of an assignment, sorted by issue_after (then evictions first, then group).
std::vector<Move> make_moves(const Packing& packing, const Assignment& assignment, TierId fast, TierId slow);

/// Sorts moves into the plan's order: by issue_after, evictions before prefetches, then by group.
void sort_moves(std::vector<Move>& moves);

/// Issues late prefetches earlier: `late_ns[i]` is how late move i arrived in a simulation. Each late
/// prefetch moves back by about that much time, but never before its group's previous move arrived and
/// never so far that the fast tier would exceed `budget` at some op. Groups must carry their `home`.
/// Returns how many prefetches moved.
std::size_t advance_late_prefetches(std::vector<Move>& moves, const std::vector<double>& late_ns,
                                    const std::vector<PageGroup>& groups, const std::vector<GroupLife>& lives,
                                    const Timeline& timeline, TierId fast, std::uint64_t budget);

}  // namespace tierpack::placer

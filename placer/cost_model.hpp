// The cost model shared by the planner and the simulator: how long a copy of a page group takes in
// each direction, how the two directions share a link, what a migration costs besides the bytes, and
// how much slower an op runs when some of its tensors are read in place on the slow tier. Figures
// come from the tier model; where the model has none, documented defaults fill in and are listed in
// `assumptions` (docs/simulator.md explains each).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tier_spec.hpp"

namespace tierpack::placer {

/// Which tier is fast (where the budget applies) and which is slow, for one device's tensors.
struct TierChoice {
  TierId fast = kNoTier;
  TierId slow = kNoTier;  ///< kNoTier: the model has one tier only
  std::string note;       ///< set when the choice is not the obvious one
};

/// GPU device d: the GPU tier of device d (else the first GPU tier, else tier 0), and the first host or
/// far tier. Host (-1): the first host-DRAM tier and the next non-GPU tier. The slow tier is never a GPU
/// (the device must be able to read it in place); kNoTier when the model has no such tier.
TierChoice choose_tiers(const TierModel& model, int device);

struct CostModel {
  TierId fast = kNoTier, slow = kNoTier;
  double to_fast_bytes_per_ns = 0;   ///< slow -> fast copy rate, one direction alone
  double to_slow_bytes_per_ns = 0;   ///< fast -> slow copy rate, one direction alone
  bool full_duplex = true;           ///< both directions may copy at once
  double both_ways_bytes_per_ns = 0; ///< total when both run at once (full duplex only)
  double move_overhead_ns = 0;       ///< fixed cost of one group migration (mapping calls, move_pages)
  /// GPU tier: compute held behind the remap gate per byte moved (docs/simulator.md, "Remap gate"):
  /// the driver's unmap + map + set-access of a group's chunks once its copy is done, with the
  /// device's streams stopped meanwhile. 0 for host tiers (move_pages does not stop other threads).
  double remap_hold_ns_per_byte_to_fast = 0;
  double remap_hold_ns_per_byte_to_slow = 0;
  double fast_access_bytes_per_ns = 0;  ///< the device reading its fast tier
  double slow_access_bytes_per_ns = 0;  ///< the device reading the slow tier in place
  double fast_latency_ns = 0, slow_latency_ns = 0;
  /// The profile's op times say how long the op took (host tiers: the thread ran it). False on a GPU:
  /// an op's time there is its launch on the host thread, so it tells nothing about how much of its
  /// tensors the kernel read (Note [Launch times] in cost_model.cpp).
  bool op_times_bound_traffic = true;
  std::vector<std::string> assumptions;  ///< defaults used where the tier model had no figure

  /// Time one copy of `bytes` takes with its direction's link to itself.
  double transfer_ns(std::uint64_t bytes, bool to_fast) const;
  /// Compute held behind the remap gate once a move of `bytes` has been copied.
  double remap_hold_ns(std::uint64_t bytes, bool to_fast) const;
  /// Rate of each direction when both copy at once.
  double shared_rate(bool to_fast) const;
  /// Duration of an op that took `profiled_ns` with all its tensors on the fast tier, when
  /// `slow_bytes` of the bytes it touches (in `slow_tensors` tensors) are read in place on the slow
  /// tier. Roofline: the op cannot be faster than its memory traffic; if the profile shows it faster
  /// than moving all its bytes, it is taken to touch only that fraction of each tensor (host tiers
  /// only: on a GPU every byte is read once, Note [Launch times]).
  double op_ns(double profiled_ns, std::uint64_t fast_bytes, std::uint64_t slow_bytes, std::uint32_t slow_tensors) const;
};

CostModel make_cost_model(const TierModel& model, const TierChoice& tiers, int device);

}  // namespace tierpack::placer

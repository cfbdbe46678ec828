// Baseline placement policies, simulated on the same profile and tier model as tierpack's plans so that
// `tierpack replay` can put them side by side (docs/simulator.md describes each):
//   all-fast     every tensor on the fast tier: the reference step time; reports whether it fits
//   first-touch  a tensor's pages go to the fast tier while it has room when they are first touched,
//                else to the slow tier; nothing ever moves (Linux default NUMA policy)
//   interleave   pages alternate between the tiers (numactl --interleave), the fast share capped by
//                the budget; nothing moves
//   lru          demand migration: a tensor an op touches comes to the fast tier before the op runs,
//                evicting the least recently used ones (UVM / reactive tiering at tensor granularity);
//                the op waits for both copies. Measured on the second of two simulated iterations.
#pragma once

#include <cstdint>

#include "core/profile.hpp"
#include "core/tier_spec.hpp"
#include "placer/cost_model.hpp"
#include "placer/replay.hpp"

namespace tierpack::placer {

struct BaselineSetup {
  int device = 0;
  std::uint64_t budget = 0;   ///< fast-tier bytes
  TierChoice tiers;
  CostModel cost;
};

BaselineSetup make_baseline_setup(const TierModel& model, int device, std::uint64_t budget);

ReplayResult replay_all_fast(const Profile& profile, const BaselineSetup& setup);
ReplayResult replay_first_touch(const Profile& profile, const BaselineSetup& setup);
ReplayResult replay_interleave(const Profile& profile, const BaselineSetup& setup);
ReplayResult replay_lru(const Profile& profile, const BaselineSetup& setup);

}  // namespace tierpack::placer

// plan_from_trace: the plan of the VMM mechanism (TIERPACK_GPU mechanism:vmm): turns one traced iteration of the
// GPU runtime (allocations, frees and op accesses on the allocator's event clock, core/gpu_trace.hpp) into a Plan the
// GPU runtime can execute: page groups of tensors with similar idle windows, and evict/prefetch moves that keep the
// device under its budget at every point of the iteration. The storage mover's plan (the default mechanism) is
// saved_plan.hpp's; both are placer's, pure functions of values.
//
// Note [Trace clock]
// The clock is the allocator's event count within the iteration (every malloc and free advances it
// by one). Every iteration of a training loop has the same allocation sequence, so the clock means
// the same thing in every iteration even when no op observer runs. An op that touched a tensor is
// recorded as the interval [clock at op begin, clock at op end]: its `from` bounds the first use
// (prefetch must be done by then), its `to` the last use (eviction may start after it).
// Note [Why the VMM mechanism plans from its own trace]
// The architecture wants Profile -> placer -> Plan -> migrate. The VMM runtime plans with
// plan_from_trace rather than placer/planner.hpp's plan of a Profile because (a) its plan is keyed by the allocator's event clock and allocation
// position of the unobserved (reference) iteration, which the placer's op-indexed Plan does not
// carry yet, and (b) the runtime must plan inside the training process between two iterations,
// where the placer's inputs (a Profile with page data) are not complete. The runtime now writes the
// traced iteration as a core Profile (profile_out, Note [Runtime profile] in
// runtime/gpu/gpu_runtime.cpp), so the placer and the simulator can be checked against
// the same iteration; switching the runtime to the placer's Plan needs a mapping from op indices
// to the event clock (both are in that Profile: birth/death ops and allocation positions).
#pragma once

#include <cstdint>

#include "core/gpu_trace.hpp"
#include "core/plan.hpp"

namespace tierpack::gpu {

struct VmmPlanOptions {
  std::uint64_t budget = 0;                        ///< device bytes the plan must fit in
  std::uint64_t chunk_bytes = std::uint64_t{32} << 20;
  std::uint64_t min_tensor_bytes = std::uint64_t{1} << 20;  ///< smaller in-iteration tensors never move
  std::uint64_t group_bytes = std::uint64_t{512} << 20;     ///< target page-group size
  std::int64_t min_gap = 16;      ///< shortest idle window (clock ticks) worth a round trip
  std::int64_t eviction_lag = 4;  ///< ticks between issuing an eviction and its memory being free
  double headroom = 0.85;  ///< fraction of the budget the plan may fill (the runtime's: vmm_headroom())
  bool move_persistent = true;    ///< also move segments of tensors alive across iterations
  /// Where moves cannot meet the budget, keep persistent groups in host memory for good (Note
  /// [Groups that live on the host] in vmm_plan.cpp).
  bool host_resident = true;
  int device = 0;
};

/// Builds the plan; never throws for an infeasible budget (it says so in Plan::notes and plans the
/// best it can). Throws logic_error on an inconsistent trace.
Plan plan_from_trace(const IterationTrace& trace, const VmmPlanOptions& options);

}  // namespace tierpack::gpu

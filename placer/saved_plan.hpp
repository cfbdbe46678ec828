// The GPU tier's plan for storages saved for backward: which leave the device, when each is let go and
// when its copy back starts, under a limit on live bytes (Note [Storage move plan] in saved_plan.cpp).
// A pure function of the recorded iteration (core/saved_trace.hpp); the cost model that predicts the
// step with the plan's stalls and the transfer bound at the same limit live here too.
#pragma once

#include <cstdint>
#include <vector>

#include "core/saved_trace.hpp"

namespace tierpack::placer {

using tierpack::SavedPlanOptions;

/// The plan for `trace` under `options` (Note [Storage move plan]). Throws logic_error on options that
/// are not numbers a plan can use (bandwidth <= 0) or a trace whose events name no storage.
SavedPlan plan_saved_tensors(const SavedTrace& trace, const SavedPlanOptions& options);

/// The step `trace` takes with `plan`'s moves: copies out start at their pack, copies back at their
/// fetch (after the compute queued there and their own copy out), one copy at a time each way; compute
/// waits at a release for its copy out and at a use for its copy back (Note [Storage move cost]).
/// Fills plan.predicted_ms and plan.stall_ms.
void predict_saved_plan(const SavedTrace& trace, const SavedPlanOptions& options, SavedPlan& plan);

/// Whether the cost model counts the host's time for `trace`: every event has its host time (Note [Host time]).
bool counts_host_time(const SavedTrace& trace);

/// `trace` without host times: the cost model walks the GPU's time alone (what-if, `tierpack gpu-replay --host-time off`).
SavedTrace without_host_time(SavedTrace trace);

/// The transfer bound at `limit_bytes` of live bytes: the least step any runtime that only places these
/// tensors can take, from the trace's live curve, counting both directions (Note [Two-way transfer bound]
/// in saved_plan.cpp; bench/gpu/transfer_bound.py counts the device-to-host one alone). `remade`: bytes
/// away at each event without a copy (recomputed, Note [Recompute]), left out of what must cross.
double saved_transfer_bound_ms(const SavedTrace& trace, std::uint64_t limit_bytes, double d2h_bytes_per_s,
                               double h2d_bytes_per_s, const std::vector<std::uint64_t>* remade = nullptr);

}  // namespace tierpack::placer

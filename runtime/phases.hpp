// RunPhases: the one state machine of a run, for the host runtime and the GPU tier alike.
//
//   warm-up    iterations run without a plan (the runtime's default placement);
//   recording  iterations recorded to plan from (the host: the session's profiled iterations; the
//              GPU tier: an observed iteration and a reference one);
//   planned    the plan is in force and followed;
//   suspended  the iteration under way stopped matching the recorded one: the plan waits (no
//              routing, no moves) until it ends, and the next iteration follows it again;
//   off        for good: `divergence_limit` diverged iterations in a row (a run whose shapes keep
//              changing), or no plan could be made. Nothing turns it on again.
//
// Note [Diverged iterations]
// An iteration diverges when its allocations stop matching the recorded sequence. Most causes are
// one-off (a barrier or an evaluation between steps, a logging call, the last short batch of an
// epoch), and a plan that only ever ran on matching iterations is still right for the next
// iteration. So a divergence suspends the plan for the rest of that iteration only; the next one
// follows it again. Only `divergence_limit` diverged iterations in a row turn the plan off. The
// default, 3, lets the end of an epoch pass (its short last batch, then an evaluation or a barrier
// before the next epoch's first step: two odd iterations in a row); a DDP run's `dist.barrier()`
// between steps had turned every rank's GPU tier into a spilling caching allocator for good when
// the first divergence ended the plan (bench/results/gpu-h200-2026-11-29-4).
//
// Not thread-safe: each runtime calls it under its own lock.
#pragma once

#include <cstdint>

#include "core/config.hpp"  // RunPhaseOptions (a setting: gpu_divergences)

namespace tierpack {

enum class RunPhase : std::uint8_t { warmup, recording, planned, suspended, off };
const char* to_string(RunPhase p);

class RunPhases {
 public:
  explicit RunPhases(RunPhaseOptions options = {});

  RunPhase phase() const noexcept { return phase_; }
  /// The plan is followed now (planned; not suspended, not off).
  bool following() const noexcept { return phase_ == RunPhase::planned; }
  /// Iterations ended since record() (0 while the first recorded iteration runs).
  int recorded() const noexcept { return recorded_; }
  /// Diverged iterations in a row, the one under way included.
  int divergent_streak() const noexcept { return streak_; }
  const RunPhaseOptions& options() const noexcept { return options_; }

  /// warm-up -> recording. Throws logic_error from any other phase.
  void record();
  /// warm-up or recording -> planned: a plan is in force from now on. Throws logic_error from any other
  /// phase (a plan is in force already, or it was turned off: it never comes back).
  void follow();
  /// -> off, for good (no plan could be made).
  void turn_off() noexcept;
  /// The iteration under way stopped matching the plan: planned -> suspended, or -> off when it is the
  /// `divergence_limit`-th in a row. True when this call turned the plan off. Outside `planned`
  /// (suspended already, no plan) nothing changes.
  bool diverge() noexcept;
  /// The iteration under way ended: a followed one ends the streak, a suspended plan is followed
  /// again, a recorded one is counted.
  void end_iteration() noexcept;

 private:
  RunPhaseOptions options_;
  RunPhase phase_ = RunPhase::warmup;
  int recorded_ = 0;
  int streak_ = 0;
};

}  // namespace tierpack

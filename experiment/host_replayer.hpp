// The real-nodes replayer: executes a profile's memory behaviour on this machine's NUMA nodes. Each
// tensor of the profiled iteration is allocated at its birth op through a Placement (the policy under
// test), its bytes are written at every op that outputs it and read (one word per cache line) at every
// op that reads it, and it is freed at its death op; this repeats for a few iterations. Measured:
// wall time per iteration (residency sampling excluded), per-node residency of the live tensors'
// pages (move_pages status, sampled at op boundaries), and what the policy migrated.
//
// Simplifications (docs/experiments.md): ops are leaf ops of the profile in order, on one thread,
// with no compute besides the touches; tensors alive before the iteration are allocated once before
// the first iteration and kept to the end; tensors still alive at an iteration's end are freed then.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/profile.hpp"

namespace tierpack::experiment {

/// The profile's tensors of one device as the replayer needs them.
struct ReplayWorkload {
  struct Tensor {
    TensorId id = 0;
    std::size_t bytes = 0;
    OpIndex birth = kBeforeIteration, death = kAfterIteration;
  };
  std::vector<Tensor> tensors;
  std::vector<std::size_t> before;  ///< allocated before the first iteration
  std::vector<std::size_t> in_iteration;  ///< allocation order within an iteration (by birth op, then seq)
  std::vector<std::vector<std::size_t>> births, deaths, reads, writes;  ///< per op
  std::uint64_t peak_bytes = 0;
};

ReplayWorkload make_replay_workload(const Profile& profile, int device);

/// How one policy allocates (the policy under test).
class Placement {
 public:
  virtual ~Placement() = default;
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* p, std::size_t bytes) noexcept = 0;
  virtual void begin_iteration() {}
  virtual void end_iteration() {}
  virtual void op_begin(OpIndex) {}
  virtual void op_end(OpIndex) {}
};

struct ReplayRunStats {
  double step_ns = 0;                ///< median over the iterations after the first
  double min_ns = 0, max_ns = 0;     ///< fastest and slowest of them (the noise)
  std::uint64_t fast_peak_bytes = 0; ///< highest bytes of live tensor pages on the fast node at a sample
  std::uint64_t slow_peak_bytes = 0;
  int iterations = 0;
};

struct ReplayRunOptions {
  int iterations = 3;
  int fast_node = 0, slow_node = 1;
  int samples_per_iteration = 24;  ///< residency samples (evenly spaced op boundaries)
  /// Called once the tensors alive before the iteration exist (id -> address), before iteration 0.
  std::function<void(const std::vector<void*>&)> after_setup;
};

ReplayRunStats replay_on_nodes(const ReplayWorkload& w, Placement& placement, const ReplayRunOptions& opts);

}  // namespace tierpack::experiment

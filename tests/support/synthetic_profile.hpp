// Synthetic training-iteration profiles for tests, benchmarks and what-if experiments: parameters,
// gradients and optimizer state (persistent), forward activations freed in backward, op-scoped
// temporaries and iteration-scoped buffers, on an op timeline with durations, all derived from a
// seed. The result is an ordinary core Profile (it passes Profile::validate) and can be written
// with core's write_profile, so anything that reads .tpk files can use it.
//
// Developer tool: `tierpack-synth -o x.tpk --tensors N --seed S [--host]` (tests/support/synth_main.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "core/profile.hpp"

namespace tierpack::synth {

struct SyntheticOptions {
  std::uint32_t tensors = 1000;    ///< approximate number of tensors (about 20 per layer)
  std::uint64_t seed = 1;
  int device = 0;                  ///< -1: a CPU run on host memory; >= 0: a GPU run on that device
  /// Typical sizes; each layer scales them by a random factor in [0.5, 1.5].
  std::uint64_t activation_bytes = 8ull << 20;  ///< a saved forward activation
  std::uint64_t param_bytes = 4ull << 20;       ///< a weight matrix
  std::uint64_t small_max_bytes = 64ull << 10;  ///< small tensors (biases, norm statistics, scalars) are below this
  double hidden_access_fraction = 0;  ///< fraction of tensors flagged kTensorHiddenAccess
  bool optimizer_state = true;        ///< AdamW-style exp_avg / exp_avg_sq per parameter
  /// Op speed: memory-bound ops touch this many bytes per ns (0: 3000 on a GPU, 100 on the host), plus
  /// a fixed launch cost (0: 3000 ns on a GPU, 500 ns on the host); matmul-like ops are compute-bound
  /// and take `matmul_work` times longer than their bytes say.
  double bytes_per_ns = 0;
  double launch_ns = 0;
  double matmul_work = 6;
};

/// Builds a profile of one training iteration (forward, backward, optimizer step).
Profile make_synthetic_profile(const SyntheticOptions& opts);

/// An unstructured random profile for property tests: random op durations and gaps, some nested
/// scope ops, tensors of every lifetime kind (alive across iterations, born before and freed inside,
/// born inside and alive at the end, born and freed inside) with sizes from bytes to tens of MiB,
/// random uses and flags (hidden accesses included), and a few tensors of another device.
struct RandomProfileOptions {
  std::uint64_t seed = 1;
  int device = 0;
  std::uint32_t max_ops = 60;
  std::uint32_t max_tensors = 80;
  std::uint64_t max_tensor_bytes = 64ull << 20;
};
Profile make_random_profile(const RandomProfileOptions& opts);

/// make_synthetic_profile + write_profile.
void write_synthetic_profile(const SyntheticOptions& opts, const std::string& path);

}  // namespace tierpack::synth

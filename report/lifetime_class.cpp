// Lifetime classes for the report (see lifetime_class.hpp).
#include "report/lifetime_class.hpp"

namespace tierpack::report {

// Note [Report lifetime classes]
// Decided from the Profile alone, in this order:
//  1. persistent: flagged parameter / gradient / optimizer state, or alive from before the iteration
//     to after it (it outlives iterations);
//  2. temporary: born and dead within kTemporaryMaxOps ops (op-scoped);
//  3. activation: saved for backward, or born in a forward op and dead in a backward op;
//  4. iteration: everything else (lives across many ops, dies before the iteration ends).
// Tensors born before the iteration that die inside it count as iteration-scoped: they carry data
// from the previous step (e.g. a gradient bucket), which is neither op-scoped nor persistent.
std::vector<TensorClass> classify_lifetimes(const Profile& profile) {
  std::vector<TensorClass> out(profile.tensors.size(), TensorClass::iteration);
  const auto n_ops = static_cast<OpIndex>(profile.ops.size());
  auto phase_of = [&](OpIndex op) {
    return op >= 0 && op < n_ops ? profile.ops[static_cast<std::size_t>(op)].phase : Phase::unknown;
  };
  for (const auto& t : profile.tensors) {
    TensorClass c = TensorClass::iteration;
    const bool outlives = t.birth_op == kBeforeIteration && t.death_op == kAfterIteration;
    if (outlives || t.has(kTensorParameter) || t.has(kTensorGradient) || t.has(kTensorOptimizerState)) {
      c = TensorClass::persistent;
    } else if (t.birth_op != kBeforeIteration && t.death_op != kAfterIteration &&
               t.death_op - t.birth_op <= kTemporaryMaxOps) {
      c = TensorClass::temporary;
    } else if (t.has(kTensorSavedForBackward) ||
               (phase_of(t.birth_op) == Phase::forward && phase_of(t.death_op) == Phase::backward)) {
      c = TensorClass::activation;
    }
    out[t.id] = c;
  }
  return out;
}

}  // namespace tierpack::report

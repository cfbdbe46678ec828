// First-cut lifetime classes (see tensor_lifetime.hpp).
#include "profiler/tensor_lifetime.hpp"

#include <algorithm>

namespace tierpack {
namespace {

/// Number of top-level ops beginning in (from, to]: how many "steps" of the program a tensor spans.
int top_level_between(const std::vector<OpIndex>& top, OpIndex from, OpIndex to) {
  auto lo = std::upper_bound(top.begin(), top.end(), from);
  auto hi = std::upper_bound(top.begin(), top.end(), to);
  return static_cast<int>(hi - lo);
}

TensorClass classify(const TensorRecord& t, const std::vector<OpRecord>& ops, const std::vector<OpIndex>& top) {
  constexpr std::uint32_t kRoles = kTensorParameter | kTensorGradient | kTensorOptimizerState;
  if ((t.flags & kRoles) != 0) return TensorClass::persistent;
  if (t.birth_op == kBeforeIteration || t.death_op == kAfterIteration) return TensorClass::persistent;
  if (top_level_between(top, t.birth_op, t.death_op) <= kTemporaryTopLevelOps) return TensorClass::temporary;
  const auto n = static_cast<OpIndex>(ops.size());
  const bool born_forward = t.birth_op < n && ops[static_cast<std::size_t>(t.birth_op)].phase == Phase::forward;
  OpIndex last = t.uses.empty() ? t.death_op : std::max(t.uses.back(), t.birth_op);
  const bool ends_backward = (last < n && ops[static_cast<std::size_t>(last)].phase == Phase::backward) ||
                             (t.death_op < n && ops[static_cast<std::size_t>(t.death_op)].phase == Phase::backward);
  if (born_forward && (ends_backward || t.has(kTensorSavedForBackward))) return TensorClass::activation;
  return TensorClass::iteration;
}

std::vector<OpIndex> top_level_ops(const std::vector<OpRecord>& ops) {
  std::vector<OpIndex> top;
  for (const auto& op : ops)
    if (op.parent < 0) top.push_back(op.index);
  return top;
}

}  // namespace

TensorClass estimate_class(const TensorRecord& t, const std::vector<OpRecord>& ops) {
  return classify(t, ops, top_level_ops(ops));
}

std::vector<TensorClass> estimate_classes(const std::vector<TensorRecord>& tensors, const std::vector<OpRecord>& ops) {
  const auto top = top_level_ops(ops);
  std::vector<TensorClass> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back(classify(t, ops, top));
  return out;
}

}  // namespace tierpack

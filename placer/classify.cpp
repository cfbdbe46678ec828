// Lifetime classes and access statistics (see classify.hpp).
#include "placer/classify.hpp"

#include <algorithm>

namespace tierpack::placer {

// Note [Lifetime classes]
// ~~~~~~~~~~~~~~~~~~~~~~~
// persistent: alive when the iteration starts or still alive when it ends (parameters, gradients,
//   optimizer state, anything the framework flags as such). Found again by address at run time.
// temporary:  born and dead within `temporary_max_ops` ops (op-scoped scratch, short-lived outputs).
// activation: saved for backward (autograd's hooks flagged it), or born in a forward op and last used
//   or freed in a backward op.
// iteration:  everything else: lives across many ops but dies inside the iteration.
//
// Note [Pack keys]
// ~~~~~~~~~~~~~~~~
// Page-aware packing puts tensors with equal keys into the same page groups. The key is the class plus
// how the tensor is accessed: the set of phases that use it (a parameter is read in forward, backward
// and the optimizer; its gradient only in backward and the optimizer; optimizer state only in the
// optimizer) and a coarse access-count bucket (1-2, 3-8, more). Tensors with equal keys want the same
// tier at the same times, so sharing pages costs nothing.

namespace {
std::uint8_t phase_bit(Phase p) { return static_cast<std::uint8_t>(1u << static_cast<unsigned>(p)); }
}  // namespace

TensorClass classify_tensor(const Profile& profile, const TensorRecord& t, const ClassifyOptions& opts) {
  constexpr std::uint32_t kPersistentFlags = kTensorParameter | kTensorGradient | kTensorOptimizerState;
  if (t.birth_op == kBeforeIteration || t.death_op == kAfterIteration || (t.flags & kPersistentFlags) != 0)
    return TensorClass::persistent;
  if (t.death_op - t.birth_op <= opts.temporary_max_ops) return TensorClass::temporary;
  if (t.has(kTensorSavedForBackward)) return TensorClass::activation;
  const auto n = static_cast<OpIndex>(profile.ops.size());
  auto phase_of = [&](OpIndex op) { return op >= 0 && op < n ? profile.ops[static_cast<std::size_t>(op)].phase : Phase::unknown; };
  const OpIndex last = t.uses.empty() ? t.death_op : t.uses.back();
  if (phase_of(t.birth_op) == Phase::forward && (phase_of(last) == Phase::backward || phase_of(t.death_op) == Phase::backward))
    return TensorClass::activation;
  return TensorClass::iteration;
}

Classification classify(const Profile& profile, int device, const ClassifyOptions& opts) {
  Classification out;
  out.device = device;
  const auto n = static_cast<OpIndex>(profile.ops.size());
  const Timeline timeline(profile);
  out.tensors.reserve(profile.tensors.size());
  for (const auto& t : profile.tensors) {
    if (t.device != device) continue;
    TensorInfo info;
    info.id = t.id;
    info.cls = classify_tensor(profile, t, opts);
    const OpIndex last_op = std::max<OpIndex>(n - 1, 0);
    info.birth = t.birth_op == kBeforeIteration ? kBeforeIteration : std::min(t.birth_op, last_op);
    info.death = t.death_op == kAfterIteration ? kAfterIteration : std::min(t.death_op, last_op);
    if (info.birth != kBeforeIteration && info.death != kAfterIteration && info.death < info.birth) info.death = info.birth;
    info.uses.reserve(t.uses.size() + 1);
    info.uses.assign(t.uses.begin(), t.uses.end());
    if (!std::is_sorted(info.uses.begin(), info.uses.end())) std::sort(info.uses.begin(), info.uses.end());
    if (info.birth != kBeforeIteration && n > 0 && !std::binary_search(info.uses.begin(), info.uses.end(), info.birth)) {
      info.uses.insert(std::lower_bound(info.uses.begin(), info.uses.end(), info.birth), info.birth);
    }
    info.uses.erase(std::unique(info.uses.begin(), info.uses.end()), info.uses.end());
    info.accesses = static_cast<std::uint32_t>(t.uses.size());
    for (auto u : t.uses) info.phases |= phase_bit(profile.ops[static_cast<std::size_t>(u)].phase);
    if (t.uses.size() >= 2)
      info.reuse_interval_ns = (timeline.begin(t.uses.back()) - timeline.begin(t.uses.front())) / double(t.uses.size() - 1);
    info.pinned = t.has(kTensorHiddenAccess);
    const std::uint32_t bucket = info.accesses <= 2 ? 0 : info.accesses <= 8 ? 1 : 2;
    info.pack_key = (static_cast<std::uint32_t>(info.cls) << 8) | (std::uint32_t(info.phases) << 2) | bucket;
    const auto c = static_cast<std::size_t>(info.cls);
    out.bytes_per_class[c] += t.bytes;
    ++out.count_per_class[c];
    out.tensors.push_back(std::move(info));
  }
  return out;
}

}  // namespace tierpack::placer

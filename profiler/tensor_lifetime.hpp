// A first-cut lifetime class for each tensor of a profile, from its birth, death and the phases of
// the ops around it. The profiler needs one to call a page falsely shared (tensors of different
// classes on it) and the summary prints it; the placer has the full classification (access counts,
// intervals, framework roles) in placer/.
#pragma once

#include <vector>

#include "core/tensor_class.hpp"
#include "core/tensor_record.hpp"

namespace tierpack {

/// Top-level ops a tensor may span and still count as op-scoped (temporary).
inline constexpr int kTemporaryTopLevelOps = 2;

/// persistent: alive at the iteration's start or end, or marked parameter/gradient/optimizer state;
/// temporary: dies within kTemporaryTopLevelOps top-level ops of its birth; activation: born in a
/// forward op and dies in (or is last used in) a backward op; iteration: everything else.
TensorClass estimate_class(const TensorRecord& t, const std::vector<OpRecord>& ops);

/// estimate_class for every tensor, indexed like `tensors`.
std::vector<TensorClass> estimate_classes(const std::vector<TensorRecord>& tensors, const std::vector<OpRecord>& ops);

}  // namespace tierpack

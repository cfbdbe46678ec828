// A small lifetime classification of a Profile's tensors, used only to colour and group the report.
// The placer's classifier (placer/classify.hpp, issue 4) is the authority on classes; this stand-in
// keeps the report independent of it until it exists. Rules: see Note [Report lifetime classes].
#pragma once

#include <cstdint>
#include <vector>

#include "core/profile.hpp"
#include "core/tensor_class.hpp"

namespace tierpack::report {

/// At most this many ops between birth and death make a tensor op-scoped (a temporary).
inline constexpr std::int32_t kTemporaryMaxOps = 8;

/// One class per tensor of the profile, indexed by TensorId.
std::vector<TensorClass> classify_lifetimes(const Profile& profile);

}  // namespace tierpack::report

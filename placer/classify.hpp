// Classify: sorts one device's tensors into lifetime classes (temporary, activation, iteration,
// persistent; core/tensor_class.hpp) and measures how they are accessed (count, reuse interval, which
// phases touch them). The packer puts tensors with the same pack key into the same page groups.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/profile.hpp"
#include "core/tensor_class.hpp"
#include "placer/timeline.hpp"

namespace tierpack::placer {

struct ClassifyOptions {
  /// Tensors whose whole life spans at most this many ops are op-scoped temporaries.
  OpIndex temporary_max_ops = 3;
};

/// What the placer knows about one tensor after classification.
struct TensorInfo {
  TensorId id = 0;
  TensorClass cls = TensorClass::temporary;
  OpIndex birth = kBeforeIteration;  ///< clamped into the op range; kBeforeIteration when born before
  OpIndex death = kAfterIteration;   ///< clamped; kAfterIteration when alive at the end
  std::vector<OpIndex> uses;         ///< ops that must find it resident: its uses plus its birth op
  std::uint32_t accesses = 0;        ///< number of ops that use it
  double reuse_interval_ns = 0;      ///< mean time between consecutive uses (0 with fewer than two)
  std::uint8_t phases = 0;           ///< bit (1 << Phase) for each phase whose ops use it
  bool pinned = false;               ///< hidden accesses: never moved
  std::uint32_t pack_key = 0;        ///< tensors with equal keys may share pages (see Note [Pack keys])
};

struct Classification {
  int device = -1;
  std::vector<TensorInfo> tensors;  ///< the device's tensors, in Profile::tensors order
  std::array<std::uint64_t, kTensorClassCount> bytes_per_class{};
  std::array<std::uint32_t, kTensorClassCount> count_per_class{};
};

/// Lifetime class of one tensor (exposed for tests and the report).
TensorClass classify_tensor(const Profile& profile, const TensorRecord& t, const ClassifyOptions& opts = {});

/// Classifies the tensors of `device` (-1 host).
Classification classify(const Profile& profile, int device, const ClassifyOptions& opts = {});

}  // namespace tierpack::placer

// Page false sharing, counted: how many pages hold live tensors of different lifetime classes at the
// same time. Such a page can be neither evicted with the cold data nor kept with the hot data; moving
// it moves both. Counted over the plan's group layout (page-aware and page-agnostic plans) or over the
// addresses the framework used while profiling (the baselines, which place what the framework allocated).
#pragma once

#include <cstdint>
#include <vector>

#include "core/plan.hpp"
#include "core/profile.hpp"
#include "core/tensor_class.hpp"

namespace tierpack::placer {

/// A tensor's bytes somewhere in an address space, and when they are live (op indices, inclusive;
/// born before the iteration = -1, alive after it = the number of ops).
struct Extent {
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
  TensorClass cls = TensorClass::temporary;
  OpIndex birth = -1;
  OpIndex death = 0;
};

/// Pages of `page_size` that hold, at some op, live extents of more than one class.
std::uint64_t count_mixed_class_pages(std::vector<Extent> extents, std::uint64_t page_size);

/// Mixed-class pages of a plan's layout (group offset + offset in group, the group's page size).
std::uint64_t plan_mixed_class_pages(const Profile& profile, const Plan& plan);
/// Groups of a plan whose tensors are of more than one class.
std::uint64_t plan_mixed_class_groups(const Plan& plan);
/// Mixed-class pages at the addresses the profiled run used, for one device's tensors (classes from
/// placer/classify.hpp); `page_size` 0 means the host page size for -1 and 2 MiB for a GPU.
std::uint64_t profile_mixed_class_pages(const Profile& profile, int device, std::uint64_t page_size = 0);

}  // namespace tierpack::placer

// PageGroup: a contiguous run of pages holding tensors of one lifetime class, moved between tiers as
// one unit (one remap on the GPU, one move_pages/mbind call on the host).
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/tensor_class.hpp"
#include "core/tensor_record.hpp"
#include "core/tier.hpp"

namespace tierpack {

using GroupId = std::uint32_t;

struct PageGroup {
  GroupId id = 0;
  TensorClass cls = TensorClass::temporary;
  TierId home = kNoTier;            ///< tier at the start of the iteration
  std::uint64_t offset = 0;         ///< byte offset in its device's group address space
  std::uint64_t bytes = 0;          ///< multiple of page_size
  std::uint64_t page_size = 4096;
  std::vector<TensorId> tensors;    ///< members, in placement order
  OpIndex first_use = kAfterIteration;
  OpIndex last_use = kBeforeIteration;
  bool pinned = false;              ///< never moved (hidden accesses: unsafe to move early)

  friend bool operator==(const PageGroup&, const PageGroup&) = default;
};

void to_json(nlohmann::json& j, const PageGroup& g);
void from_json(const nlohmann::json& j, PageGroup& g);

}  // namespace tierpack

// A small list of disjoint page-aligned address ranges, kept by the tracers that do not need a
// signal-safe table (uffd-wp, soft-dirty). untrack() may remove any part of a tracked range.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tierpack::detail {

struct AddressRange {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;  ///< exclusive
  bool overlaps(std::uintptr_t b, std::uintptr_t e) const { return begin < e && b < end; }
};

/// Removes [b, e) from `ranges`, splitting ranges that straddle it. Returns the parts removed.
inline std::vector<AddressRange> subtract_range(std::vector<AddressRange>& ranges, std::uintptr_t b, std::uintptr_t e) {
  std::vector<AddressRange> kept, removed;
  for (const auto& r : ranges) {
    if (!r.overlaps(b, e)) {
      kept.push_back(r);
      continue;
    }
    if (r.begin < b) kept.push_back({r.begin, b});
    if (e < r.end) kept.push_back({e, r.end});
    removed.push_back({std::max(r.begin, b), std::min(r.end, e)});
  }
  ranges = std::move(kept);
  return removed;
}

/// Whether [b, e) overlaps any range in `ranges`.
inline bool overlaps_any(const std::vector<AddressRange>& ranges, std::uintptr_t b, std::uintptr_t e) {
  return std::any_of(ranges.begin(), ranges.end(), [&](const AddressRange& r) { return r.overlaps(b, e); });
}

}  // namespace tierpack::detail

// Helpers shared by the host mover/runtime tests and the multi-NUMA guest tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "alloc/host/host_arena_allocator.hpp"
#include "core/topology.hpp"

namespace tierpack::host::testing {

/// "dram0" (id 0) on node 0 and "cxl1" (id 1) on node 1 when the machine has two nodes, else on
/// node 0 too (moves are then no-ops for the kernel, but everything else runs).
inline Topology fast_and_far() {
  const int nodes = system_os().node_count();
  Topology t;
  Tier fast;
  fast.kind = TierKind::host_dram;
  fast.name = "dram0";
  fast.numa_node = 0;
  fast.capacity_bytes = 1ull << 30;
  t.add(fast);
  Tier far;
  far.kind = TierKind::far_memory;
  far.name = "cxl1";
  far.numa_node = nodes >= 2 ? 1 : 0;
  far.capacity_bytes = 1ull << 30;
  t.add(far);
  return t;
}

/// FNV-1a style hash over 8-byte words (then the tail bytes): position-sensitive, fast enough to
/// run twice per migration.
inline std::uint64_t checksum(const void* p, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* b = static_cast<const unsigned char*>(p);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, b + i, 8);
    h = (h ^ w) * 1099511628211ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/// Node of every base page of [p, p + n) (node, or a negative errno).
inline std::vector<int> page_nodes(const void* p, std::size_t n) {
  const std::uintptr_t page = system_os().page_size();
  std::vector<void*> pages;
  for (std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p) & ~(page - 1); a < reinterpret_cast<std::uintptr_t>(p) + n;
       a += page) {
    pages.push_back(reinterpret_cast<void*>(a));
  }
  std::vector<int> status(pages.size(), -1);
  if (system_os().move_pages(pages, {}, status) != 0) status.assign(pages.size(), -1000);
  return status;
}

/// Pages of [p, p + n) that are on `node` / anywhere else (not counting untouched ones).
inline std::pair<std::size_t, std::size_t> pages_on(const void* p, std::size_t n, int node) {
  std::size_t on = 0, off = 0;
  for (int s : page_nodes(p, n)) {
    if (s == node) {
      ++on;
    } else if (s >= 0) {
      ++off;
    }
  }
  return {on, off};
}

}  // namespace tierpack::host::testing

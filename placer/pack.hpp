// Pack: puts one device's tensors into page groups, the unit that moves between tiers.
//
// Page-aware packing (Sentinel's co-allocation) keeps one arena per pack key (class + access pattern,
// Note [Pack keys] in classify.cpp): small tensors of one key share pages, large tensors get their own run
// of pages, tensors allocated one after another land in the same group (so groups used together are
// contiguous), and tensors with hidden accesses go to pinned groups that never move. Allocation-order
// packing ("page-agnostic") is what a caching allocator does: one arena for every class, tensors in
// allocation order, so a page can hold a temporary next to a gradient. Both reuse freed space inside a
// group (first fit) and release a group when its last tensor dies.
#pragma once

#include <cstdint>
#include <vector>

#include "core/page_group.hpp"
#include "core/plan.hpp"
#include "core/profile.hpp"
#include "placer/classify.hpp"

namespace tierpack::placer {

enum class PackPolicy : std::uint8_t { page_aware, allocation_order };

struct PackOptions {
  PackPolicy policy = PackPolicy::page_aware;
  std::uint64_t page_size = 4096;        ///< the fast tier's page (4 KiB host, 2 MiB GPU)
  std::uint64_t group_bytes = 2ull << 20;  ///< target size of a shared group
  std::uint64_t large_bytes = 0;         ///< tensors at least this big get their own group (0: group_bytes / 4)
  std::uint64_t alignment = 512;         ///< offset granularity inside a group
};

/// When a group exists and when it is needed, in op indices.
struct GroupLife {
  OpIndex birth = kBeforeIteration;   ///< first member born (kBeforeIteration: exists at the start)
  OpIndex death = kAfterIteration;    ///< last member dies (kAfterIteration: exists at the end)
  std::vector<OpIndex> uses;          ///< ops that use a member (or allocate one), ascending, unique
  std::vector<std::uint64_t> use_bytes;  ///< per use: bytes of the members that op touches (packer only)
  /// Bytes the group holds from each op on, (op, bytes) with ops ascending from first_op(): pages are
  /// populated as tensors are allocated into it, so a group grows (only at uses: births are uses) up to
  /// PageGroup::bytes.
  std::vector<std::pair<OpIndex, std::uint64_t>> sizes;

  bool exists_at_start() const { return birth == kBeforeIteration; }
  bool exists_at_end() const { return death == kAfterIteration; }
  /// First and last op during which the group holds memory.
  OpIndex first_op() const { return birth == kBeforeIteration ? 0 : birth; }
  OpIndex last_op(OpIndex n_ops) const { return death == kAfterIteration ? n_ops - 1 : death; }
  /// Bytes held during op `op` (the first size before the first step).
  std::uint64_t size_at(OpIndex op) const;
};

/// Adds `sign` x the group's size to diff[op] .. diff[b] for ops in [a, b] (diff has n_ops + 1 entries;
/// the running sum of diff is then the occupancy).
void add_group_bytes(std::vector<std::int64_t>& diff, const GroupLife& life, OpIndex a, OpIndex b, std::int64_t sign);

/// Records that a group holds `bytes` from op `op` on (kept ascending and non-decreasing).
void grow_group(GroupLife& life, OpIndex op, std::uint64_t bytes);

struct Packing {
  std::vector<PageGroup> groups;           ///< ids 0..n-1; home is left unset (the assigner decides)
  std::vector<GroupLife> lives;            ///< per group
  std::vector<TensorPlacement> placements; ///< sorted by seq, then tensor id
  std::uint64_t address_space_bytes = 0;   ///< span of the group address space
};

/// Packs the classified tensors. Deterministic.
Packing pack(const Profile& profile, const Classification& classes, const PackOptions& opts);

}  // namespace tierpack::placer

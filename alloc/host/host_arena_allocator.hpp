// HostArenaAllocator: host memory for tensors, one jemalloc arena per (tensor class, host tier),
// each arena's extents bound to its tier's NUMA node. It keeps a record of every live block (class,
// tier, iteration sequence position, page group) so that any address maps back to its block and
// group (the profiler's page join, the mover's group ranges), and it enforces per-tier budgets.
//
// Note [Page groups on the host]
// The plan's page groups are sets of tensors of one class. On the host a group's memory is the set
// of pages its live blocks cover (group_ranges): large blocks are whole jemalloc extents of their
// own, small blocks share slab pages with other blocks of the same class and tier (never with other
// classes: one arena per class). Moving a group moves those pages; a page shared with a block of
// another group of the same class moves with it (the data stays intact either way).
//
// Thread safety: every member function may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "alloc/host/host_arena.hpp"
#include "core/page_group.hpp"
#include "core/topology.hpp"
#include "platform/host_os.hpp"

namespace tierpack::host {

inline constexpr GroupId kNoGroup = 0xffffffffu;

/// What the caller knows about a block when it allocates it.
struct AllocationTag {
  std::int64_t seq = -1;      ///< allocation position in the iteration (-1: none / outside)
  GroupId group = kNoGroup;   ///< plan group it belongs to
};

/// One live block (what lookup() answers).
struct AllocationInfo {
  void* base = nullptr;
  std::size_t bytes = 0;     ///< as requested
  std::size_t usable = 0;    ///< jemalloc size class: what it charges the tier
  TensorClass cls = TensorClass::temporary;
  TierId home = kNoTier;     ///< tier of the arena it came from
  TierId tier = kNoTier;     ///< tier its pages are on now (changes when its group moves)
  std::int64_t seq = -1;
  GroupId group = kNoGroup;
};

struct TierUsage {
  TierId tier = kNoTier;
  int node = -1;
  std::uint64_t budget = 0;       ///< 0: unlimited
  std::uint64_t resident = 0;     ///< usable bytes of live blocks on the tier (+ charge_resident())
  std::uint64_t peak = 0;         ///< highest `resident` seen
  std::uint64_t mapped = 0;       ///< extents mapped by the tier's arenas
  std::uint64_t allocations = 0;  ///< live blocks on the tier
};

/// A page-aligned address range [begin, end).
struct PageRange {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  std::size_t bytes() const { return end - begin; }
  friend bool operator==(const PageRange&, const PageRange&) = default;
};

struct HostAllocatorOptions {
  HostOs* os = nullptr;                 ///< null: system_os()
  BindMode bind = BindMode::preferred;  ///< how extents are tied to their node
  bool huge_pages = false;              ///< THP for every arena (see HostArena)
  ExtentObserver* observer = nullptr;   ///< told about every extent; must outlive the allocator
  std::size_t alignment = 64;           ///< of every block (c10's CPU alignment)
  bool thread_caches = true;            ///< per-thread caches per arena (see HostArena)
};

class HostArenaAllocator {
 public:
  /// One arena per (class, tier) for every tier of `topo` with a NUMA node (host DRAM and far
  /// memory). Tiers whose node this machine lacks are refused with logic_error. A topology without
  /// host tiers gets one tier, "dram0" on node 0. Throws os_error when jemalloc refuses an arena.
  explicit HostArenaAllocator(const Topology& topo, HostAllocatorOptions options = {});
  /// Destroys the arenas; blocks still allocated are discarded with them.
  ~HostArenaAllocator();
  HostArenaAllocator(const HostArenaAllocator&) = delete;
  HostArenaAllocator& operator=(const HostArenaAllocator&) = delete;

  /// A block of `bytes` from the (cls, tier) arena. Throws out_of_memory (requested size, tier,
  /// budget and resident bytes in the message) when the tier's budget or the OS refuses it, and
  /// logic_error for a tier that is not a host tier of this allocator.
  void* allocate(std::size_t bytes, TensorClass cls, TierId tier, AllocationTag tag = {});
  /// Frees a block from allocate(). Null and unknown pointers are ignored (counted in unknown_frees()).
  void deallocate(void* p) noexcept;

  /// The live block holding `addr` (any byte of its usable size), if any.
  std::optional<AllocationInfo> lookup(const void* addr) const;
  /// Sets the tag of the block starting at `base` (the runtime tags blocks that predate its plan).
  bool retag(void* base, AllocationTag tag);
  /// Calls f for every live block (under the allocator's lock: f must not call back into it).
  void for_each(const std::function<void(const AllocationInfo&)>& f) const;

  /// Page-aligned, merged ranges of the live blocks of `group` (see Note [Page groups on the host]).
  std::vector<PageRange> group_ranges(GroupId group) const;
  /// Usable bytes of the live blocks of `group`.
  std::uint64_t group_bytes(GroupId group) const;
  /// Records that the group's pages now live on `to`: its blocks' tier and the tiers' resident
  /// bytes follow (called by the mover after a successful move). `reserved` bytes of `to` held by
  /// reserve() for this move become the group's charge (the rest is given back), so the tier never
  /// counts the group twice. With `moved`, the page ranges the move covered (group_ranges() when it
  /// started), only blocks wholly inside them change tier: a block that joined the group while its
  /// pages moved was not moved and stays charged where it is. Returns the bytes re-charged.
  std::uint64_t set_group_tier(GroupId group, TierId to, std::uint64_t reserved = 0,
                               const std::vector<PageRange>* moved = nullptr);
  /// Holds `bytes` of the tier's budget for a move in flight (Note [Prefetches respect the budget]):
  /// false, holding nothing, when that would pass the budget.
  bool reserve(TierId tier, std::uint64_t bytes);
  /// Gives back a reservation that no move used (or a charge_resident()).
  void release(TierId tier, std::uint64_t bytes) noexcept;
  /// Counts `bytes` this allocator did not hand out as resident on the tier whatever its budget
  /// says (the charge follows the data): pages of tensors from before the plan that the runtime
  /// moves (migrate/host/foreign_pages.hpp). Given back with release().
  void charge_resident(TierId tier, std::uint64_t bytes);

  /// 0 removes the limit. Lowering it below what is resident only refuses new blocks.
  void set_budget(TierId tier, std::uint64_t bytes);
  TierUsage usage(TierId tier) const;
  /// Starts a new peak window (the runtime does at each iteration start).
  void reset_peak(TierId tier);
  /// Host tiers this allocator serves, in id order.
  const std::vector<TierId>& tiers() const noexcept { return tiers_; }
  bool serves(TierId tier) const noexcept;
  int node_of(TierId tier) const;
  const Tier& tier_info(TierId tier) const;
  const HostArena& arena(TensorClass cls, TierId tier) const;
  HostOs& os() const noexcept { return *os_; }
  BindMode bind_mode() const noexcept { return options_.bind; }
  std::uint64_t unknown_frees() const noexcept { return unknown_frees_.load(std::memory_order_relaxed); }

 private:
  struct Record {
    std::size_t bytes;
    std::size_t usable;
    TensorClass cls;
    TierId home;
    TierId tier;
    std::int64_t seq;
    GroupId group;
  };
  struct TierState {
    Tier info;
    std::atomic<std::uint64_t> budget{0};
    std::atomic<std::uint64_t> resident{0};
    std::atomic<std::uint64_t> peak{0};
    std::uint64_t allocations = 0;  // live blocks on the tier; guarded by mu_, like the records it counts
    std::array<std::unique_ptr<HostArena>, kTensorClassCount> arenas;
  };

  TierState& state(TierId tier) const;
  /// Adds `bytes` to the tier's resident count unless that passes its budget.
  bool charge(TierState& t, std::uint64_t bytes);
  void uncharge(TierState& t, std::uint64_t bytes) noexcept;
  /// A moved block is freed: its whole pages go back to the arena's node (Note [Purged pages refault]).
  void rehome_pages(const Record& r, std::uintptr_t base) noexcept;
  static AllocationInfo info(std::uintptr_t base, const Record& r);

  HostOs* os_;
  HostAllocatorOptions options_;
  std::vector<TierId> tiers_;
  std::vector<std::unique_ptr<TierState>> states_;  // indexed by TierId (null: not a host tier)
  mutable std::mutex mu_;
  std::map<std::uintptr_t, Record> records_;  // base address -> block
  std::atomic<std::uint64_t> unknown_frees_{0};
};

}  // namespace tierpack::host

// ForeignPages: memory the host runtime did not allocate whose page groups' moves must carry it:
// tensors from before the plan (parameters, optimizer state in the profiling arena), registered by
// the run controller with the plan group the placer gave them. The mover moves their whole pages
// with its group's blocks; this registry knows where they are and charges their bytes to that tier.
//
// Note [Foreign pages]
// A registered tensor [address, address + bytes) has two parts:
//  - its whole pages (the page-aligned range inside it): they follow its group's moves (HostMover
//    moves them with move_pages, page by page, as its own blocks) and are charged to the tier they
//    are on (HostArenaAllocator::charge_resident), so the fast tier's resident bytes, its peak and
//    the room a prefetch reserves count them exactly like the runtime's blocks;
//  - the rest (the first and last partial pages, shared with neighbours the runtime knows nothing
//    of): never moved, charged for good to the tier it was registered on.
// remove() (the tensor is freed) drops both charges, and from then on no move touches its pages.
// The mover moves a tensor's pages in batches, each under the registry's lock after checking that
// the tensor (by its id, not its address: a freed address may be registered again for another
// tensor) is still registered, so remove() waits for at most one batch in flight and no page of a
// freed tensor is moved after it returns. Pages that answered -EBUSY keep their tensor's id for the
// retry. Unlike the runtime's ranges, foreign ranges are never re-bound with mbind: the memory
// belongs to another allocator, which may reuse it after the free with its own policy; a page never
// touched (-ENOENT) faults in wherever that allocator's policy says. With transparent huge pages
// set to "always", a 2 MiB page of that allocator may hold several tensors: moving one of its base
// pages moves or splits it as the kernel decides (data intact either way); the per-page status says
// where each page is, and the charge follows the registered tensor only.
//
// Thread safety: every member function may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "alloc/host/host_arena_allocator.hpp"

namespace tierpack::host {

/// A tensor from before the plan, as the run controller hands it to the runtime.
struct ForeignTensor {
  std::uintptr_t address = 0;
  std::size_t bytes = 0;
  GroupId group = kNoGroup;
};

class ForeignPages {
 public:
  struct Entry {
    std::uint64_t id = 0;        ///< unique per registration (never reused)
    std::uintptr_t address = 0;  ///< the tensor
    std::size_t bytes = 0;
    GroupId group = kNoGroup;
    PageRange pages;             ///< its whole pages (empty: smaller than a page, or straddling one)
    TierId tier = kNoTier;       ///< where `pages` are, charged there
    TierId pinned_tier = kNoTier;  ///< where the rest stays, charged there
    std::size_t pinned_bytes() const { return bytes - pages.bytes(); }
  };

  explicit ForeignPages(HostArenaAllocator& alloc) : alloc_(alloc) {}
  /// Drops every charge left (the allocator must still exist).
  ~ForeignPages();
  ForeignPages(const ForeignPages&) = delete;
  ForeignPages& operator=(const ForeignPages&) = delete;

  /// Registers a tensor of `group` whose pages are on `tier` now and charges its bytes there.
  /// Throws logic_error for an empty tensor, a tier the allocator does not serve, or one that
  /// overlaps a registered tensor.
  Entry add(std::uintptr_t address, std::size_t bytes, GroupId group, TierId tier);
  /// The tensor starting at `address` is freed: drops it and its charges. False when unknown.
  bool remove(std::uintptr_t address) noexcept;
  std::optional<Entry> find(std::uintptr_t address) const;
  /// The group's tensors (reports: where their pages are).
  std::vector<Entry> group_entries(GroupId group) const;
  std::size_t size() const;
  /// Bytes charged to the tier (whole pages there plus the pinned rest registered there).
  std::uint64_t bytes_on(TierId tier) const;

  // ---- for HostMover ----
  /// The group's tensors whose whole pages are not on `to` (what a move to `to` carries).
  std::vector<Entry> movable(GroupId group, TierId to) const;
  /// Bytes of movable(group, to).
  std::uint64_t movable_bytes(GroupId group, TierId to) const;
  /// Runs f() under the registry's lock when the tensor `id` registered at `address` still is;
  /// false (f not run) when it was freed.
  template <class F>
  bool with_live(std::uint64_t id, std::uintptr_t address, F&& f) const {
    std::lock_guard lock(mu_);
    auto it = entries_.find(address);
    if (it == entries_.end() || it->second.id != id) return false;
    f();
    return true;
  }
  /// The tensors of `moved` that are still registered now have their whole pages on `to`: their
  /// charge follows. `reserved` bytes of `to` held for the move are used first; returns what is left
  /// of them (the caller gives it back or hands it on).
  std::uint64_t set_tier(const std::vector<Entry>& moved, TierId to, std::uint64_t reserved);

 private:
  HostArenaAllocator& alloc_;
  mutable std::mutex mu_;
  std::map<std::uintptr_t, Entry> entries_;  // by address
  std::uint64_t next_id_ = 1;
};

}  // namespace tierpack::host

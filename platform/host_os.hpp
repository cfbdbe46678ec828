// HostOs: tierpack's one door to the kernel's memory calls: anonymous mappings and reservations,
// protection, mlock, madvise, mbind / set_mempolicy, move_pages, get_mempolicy. The host tier
// (alloc/host, migrate/host), the profiler (page residency, tracer probes), the profiling arena
// (runtime/session) and the real-nodes experiment all call it; everything above it speaks in tiers
// and page groups, everything below it is one system call each. It sees nothing of tierpack (no core
// types), so every other library may link it (platform/CMakeLists.txt).
//
// Note [Host OS layer preconditions]
// Stated once here, as mimalloc's prim.h does, instead of at every call site:
//  - `addr` arguments are aligned to page_size() and `bytes` are multiples of it (checked with
//    TIERPACK_EXPECTS in debug builds by the callers' invariant checks, never silently rounded);
//  - `node` arguments are in [0, node_count());
//  - every call returns 0 on success or a positive errno value; nothing throws, nothing leaves
//    errno for the caller to read. The caller decides what a failure means (an extent hook returns
//    "failed" to jemalloc, the mover counts it and keeps the data where it is);
//  - move_pages() fills one status per page: the node the page is on after the call, or a negative
//    errno for that page (-ENOENT: never touched, -EBUSY: pinned or under I/O, -EFAULT: not mapped,
//    -EACCES: shared with another process, -ENOMEM: target node full).
// The interface is virtual so tests can wrap it (platform/fault_injecting_os.hpp, after RMM's
// failure adaptor) and inject errno values per call or status values per page.
#pragma once

#include <cstddef>
#include <span>

namespace tierpack::host {

/// How an extent or a page range is tied to its node.
enum class BindMode : unsigned char {
  preferred,  ///< MPOL_PREFERRED: the node first, other nodes when it is full (never OOM-kills)
  strict,     ///< MPOL_BIND: only the node (the kernel's OOM killer runs when it is full)
};

/// A NUMA policy over a set of nodes, for a range (set_policy) or a thread (set_thread_policy).
enum class NodePolicy : unsigned char {
  local,       ///< MPOL_DEFAULT: the node of the CPU that touches the page first; the node set is ignored
  preferred,   ///< MPOL_PREFERRED: the set's first node, other nodes when it is full (empty set: local)
  bind,        ///< MPOL_BIND: only the set's nodes
  interleave,  ///< MPOL_INTERLEAVE: page by page, round robin over the set's nodes
};

class HostOs {
 public:
  virtual ~HostOs() = default;

  /// Base page size (4 KiB on x86-64).
  virtual std::size_t page_size() const noexcept = 0;
  /// Number of NUMA node ids (highest node + 1); 1 on a machine or build without NUMA.
  virtual int node_count() const noexcept = 0;

  /// Maps `bytes` of private anonymous read/write memory (MAP_NORESERVE); *out receives the address.
  virtual int map(std::size_t bytes, void** out) noexcept = 0;
  /// Reserves `bytes` of address space (PROT_NONE, MAP_NORESERVE): no access until commit(); *out
  /// receives the address. unmap() gives it back.
  virtual int reserve(std::size_t bytes, void** out) noexcept = 0;
  /// Makes part of a reservation readable and writable (mprotect); pages appear zeroed on first touch.
  virtual int commit(void* addr, std::size_t bytes) noexcept = 0;
  virtual int unmap(void* addr, std::size_t bytes) noexcept = 0;
  /// mlock: faults the range in and pins it, so neither reclaim nor demotion can take it; unmap() unpins.
  virtual int lock(void* addr, std::size_t bytes) noexcept = 0;
  /// Gives the pages back to the kernel (MADV_FREE when `lazy`, else MADV_DONTNEED). The next
  /// touch refaults zeroed pages on the range's policy node (see Note [Purged pages refault]).
  virtual int purge(void* addr, std::size_t bytes, bool lazy) noexcept = 0;
  /// madvise(MADV_HUGEPAGE) or MADV_NOHUGEPAGE.
  virtual int advise_huge(void* addr, std::size_t bytes, bool huge) noexcept = 0;

  /// mbind: sets the policy of the range to `node`; with `move` also migrates the pages already
  /// there (MPOL_MF_MOVE | MPOL_MF_STRICT: EIO when some could not be moved).
  virtual int bind(void* addr, std::size_t bytes, int node, BindMode mode, bool move) noexcept = 0;
  /// mbind without moving: the policy of the range for pages touched from now on, over a node set.
  virtual int set_policy(void* addr, std::size_t bytes, NodePolicy policy, std::span<const int> nodes) noexcept = 0;
  /// set_mempolicy: the calling thread's policy (threads it starts later inherit it) for the pages it
  /// touches first in ranges without a policy of their own (NodePolicy::local: back to the default).
  virtual int set_thread_policy(NodePolicy policy, std::span<const int> nodes) noexcept = 0;
  /// move_pages(2) on this process. `nodes` empty: query only (status = node or -errno per page);
  /// else nodes.size() == pages.size(). status.size() == pages.size().
  virtual int move_pages(std::span<void* const> pages, std::span<const int> nodes,
                         std::span<int> status) noexcept = 0;
  /// get_mempolicy(MPOL_F_ADDR): the policy of the range holding addr. *node receives the first
  /// node of its mask, or -1 for the default (local) policy.
  virtual int policy_of(void* addr, int* mode, int* node) noexcept = 0;
};

/// The real kernel. Stateless, so one shared instance is no hidden state.
HostOs& system_os() noexcept;

}  // namespace tierpack::host

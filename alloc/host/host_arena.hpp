// HostArena: one jemalloc arena whose memory lives on one NUMA node. jemalloc does the size
// classes, slabs, reuse and purging; we only supply its extents (custom extent hooks) and choose
// which arena an allocation goes to (see host_arena_allocator.hpp).
//
// Note [Extent hooks bind to the node]
// jemalloc asks the arena's extent hooks for address space (`alloc`) and gives it back (`dalloc`,
// `destroy`, `purge_*`). Our `alloc` maps anonymous memory with HostOs::map and mbinds it to the
// arena's node *before* any page is touched, so first-touch faults land on that node. jemalloc
// also places the arena's own metadata (its "base") through these hooks, so it lands there too.
//
// Note [Purged pages refault]
// A purged page (MADV_DONTNEED / MADV_FREE reclaimed) refaults on the node of its range's policy,
// not on the node move_pages last put it on. So whoever moves pages of an arena to another node
// also re-mbinds the moved range to that node (migrate/host/host_mover.cpp does), and the allocator
// re-binds a moved block's whole pages to the arena's node when the block is freed.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <jemalloc/jemalloc.h>

#include "alloc/host/host_os.hpp"
#include "core/tensor_class.hpp"
#include "core/tier.hpp"

namespace tierpack::host {

namespace detail {
struct ArenaCacheRegistry;  // host_arena.cpp: Note [Per-thread arena caches]
}

/// An extent mapped or unmapped by an arena (for the profiler's page tracer).
struct ExtentEvent {
  void* addr = nullptr;
  std::size_t bytes = 0;
  TensorClass cls = TensorClass::temporary;
  TierId tier = kNoTier;
  int node = -1;
};

/// Told about every extent an arena maps and unmaps. Called from inside jemalloc's extent hooks:
/// it must not allocate from tierpack's arenas (plain malloc is fine) and must not throw. Ranges
/// are unmapped when the arena is destroyed (jemalloc keeps and reuses them until then); an
/// unmapped range can be part of a mapped one or span several (jemalloc splits and merges extents).
class ExtentObserver {
 public:
  virtual ~ExtentObserver() = default;
  virtual void on_extent_mapped(const ExtentEvent& e) noexcept = 0;
  virtual void on_extent_unmapped(const ExtentEvent& e) noexcept = 0;
};

struct ArenaSpec {
  TensorClass cls = TensorClass::temporary;
  TierId tier = kNoTier;
  int node = 0;
  BindMode bind = BindMode::preferred;
  bool huge_pages = false;  ///< madvise(MADV_HUGEPAGE) on extents; large blocks 2 MiB aligned
  bool thread_caches = true;  ///< per-thread explicit tcaches (Note [Per-thread arena caches])
  std::size_t alignment = 64;  ///< of every block (PyTorch's CPU tensors want 64); a power of two
};

class HostArena {
 public:
  static constexpr std::size_t kHugePage = 2u << 20;

  /// Creates the jemalloc arena ("arenas.create" with our hooks). Throws tierpack::error when
  /// jemalloc refuses. `observer` may be null and must outlive the arena.
  HostArena(HostOs& os, ArenaSpec spec, ExtentObserver* observer);
  /// Destroys the arena ("arena.<i>.destroy"): every block still allocated from it is discarded
  /// and its extents are unmapped. Until then extents given back by jemalloc stay mapped (purged):
  /// see Note [Extents are retained, not unmapped] in host_arena.cpp.
  ~HostArena();
  HostArena(const HostArena&) = delete;
  HostArena& operator=(const HostArena&) = delete;

  /// mallocx(MALLOCX_ARENA | this thread's cache of this arena, or MALLOCX_TCACHE_NONE);
  /// nullptr when the hooks could not get memory.
  void* allocate(std::size_t bytes) noexcept;
  /// sdallocx with the size given to allocate (any thread: it goes to the freeing thread's cache).
  void deallocate(void* p, std::size_t bytes) noexcept;
  /// The size jemalloc will really reserve for `bytes` (its size class).
  std::size_t usable_size(std::size_t bytes) const noexcept;

  unsigned index() const noexcept { return index_; }
  const ArenaSpec& spec() const noexcept { return spec_; }
  /// Bytes of extents currently mapped through the hooks (blocks, slabs, cached pages, metadata).
  std::size_t mapped_bytes() const noexcept { return mapped_.load(std::memory_order_relaxed); }
  /// The mapped extents, sorted by address (merged where adjacent).
  std::vector<std::pair<void*, std::size_t>> extents() const;
  /// errno of the last failed OS call inside a hook (0: none), and how many hook calls failed.
  int last_hook_error() const noexcept { return last_error_.load(std::memory_order_relaxed); }
  std::uint64_t hook_failures() const noexcept { return hook_failures_.load(std::memory_order_relaxed); }

 private:
  // jemalloc passes our extent_hooks_t* back to every hook; it is the first member of this block,
  // so the hook finds its HostArena without any global table.
  struct HookBlock {
    extent_hooks_t hooks;
    HostArena* self;
  };
  static HostArena& from(extent_hooks_t* h) { return *reinterpret_cast<HookBlock*>(h)->self; }
  static void* hook_alloc(extent_hooks_t*, void* new_addr, std::size_t size, std::size_t alignment, bool* zero,
                          bool* commit, unsigned arena);
  static bool hook_dalloc(extent_hooks_t*, void* addr, std::size_t size, bool committed, unsigned arena);
  static void hook_destroy(extent_hooks_t*, void* addr, std::size_t size, bool committed, unsigned arena);
  static bool hook_commit(extent_hooks_t*, void*, std::size_t, std::size_t, std::size_t, unsigned);
  static bool hook_decommit(extent_hooks_t*, void*, std::size_t, std::size_t, std::size_t, unsigned);
  static bool hook_purge_lazy(extent_hooks_t*, void* addr, std::size_t size, std::size_t offset, std::size_t length,
                              unsigned);
  static bool hook_purge_forced(extent_hooks_t*, void* addr, std::size_t size, std::size_t offset,
                                std::size_t length, unsigned);
  static bool hook_split(extent_hooks_t*, void*, std::size_t, std::size_t, std::size_t, bool, unsigned);
  static bool hook_merge(extent_hooks_t*, void*, std::size_t, void*, std::size_t, bool, unsigned);

  /// MALLOCX_TCACHE(id) of the calling thread's cache for this arena (made on first use), or
  /// MALLOCX_TCACHE_NONE.
  int cache_flag() noexcept;
  [[gnu::noinline]] int cache_flag_slow() noexcept;
  int size_flags(std::size_t bytes) const noexcept;
  void* map_extent(std::size_t size, std::size_t alignment) noexcept;
  void unmap_extent(void* addr, std::size_t size) noexcept;
  void note_error(int err) noexcept;
  ExtentEvent event(void* addr, std::size_t bytes) const noexcept;

  HostOs& os_;
  ArenaSpec spec_;
  ExtentObserver* observer_;
  HookBlock block_;
  unsigned index_ = 0;
  std::uint64_t instance_ = 0;               // unique per HostArena ever made (indices are recycled)
  std::shared_ptr<detail::ArenaCacheRegistry> caches_;    // explicit tcaches made for this arena, by any thread
  std::atomic<std::size_t> mapped_{0};
  std::atomic<int> last_error_{0};
  bool destroying_ = false;  // see Note [Extents are retained, not unmapped]
  std::atomic<std::uint64_t> hook_failures_{0};
  mutable std::mutex extents_mu_;
  std::map<std::uintptr_t, std::size_t> extents_;  // start -> bytes
};

}  // namespace tierpack::host

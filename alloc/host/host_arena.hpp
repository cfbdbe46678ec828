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
//
// Note [Alignment without MALLOCX_ALIGN]
// Every block is aligned to spec.alignment (64 for PyTorch). MALLOCX_ALIGN would say so, but it
// sends every call down jemalloc's aligned path (~3-5 ns more per allocate+free pair). We round
// the request up to a multiple of the alignment instead and pass no align flag, which gives the
// same block: a small size class's regions sit at multiples of the class size from a page-aligned
// slab, so a class that is a multiple of the alignment is aligned to it (jemalloc's own aligned
// path for small sizes is exactly "round up and allocate that class", sz_sa2u), and large blocks
// are page aligned plus, with opt.cache_oblivious, a random multiple of the 64-byte cache line.
// We do not take that on faith: (1) when the arena is created, choose_natural_max() checks with
// nallocx that every rounded small request lands on a class that is a multiple of the alignment
// and is the class MALLOCX_ALIGN would give (so usable_size() and sdallocx agree whichever way a
// block was allocated); large requests go unflagged only when the alignment is at most what
// large blocks get anyway and the large classes check out the same way; everything else (and
// huge-page blocks, which want 2 MiB) keeps MALLOCX_ALIGN. (2) allocate() still tests the address
// (one AND): a misaligned block is allocated again with MALLOCX_ALIGN and counted in realigned().
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>


#include "core/tensor_class.hpp"
#include "core/tier.hpp"
#include "platform/host_os.hpp"
#include "platform/jemalloc.hpp"

namespace tierpack::host {

namespace detail {
struct ArenaCacheRegistry;  // host_arena.cpp: Note [Per-thread arena caches]

// The hot path of Note [Per-thread arena caches]: a direct-mapped table of (arena instance ->
// mallocx cache flag) per thread. constinit, so no TLS guard or wrapper call; initial-exec, so no
// __tls_get_addr call in PIC code (128 bytes of the static TLS surplus glibc keeps for libraries
// loaded later). It lives in the header so that allocate/deallocate inline into their callers.
struct FastSlot {
  std::uint64_t arena;  // HostArena instance (never 0, never reused)
  int flag;             // MALLOCX_TCACHE(id) or MALLOCX_TCACHE_NONE
};
inline constexpr std::size_t kFastSlots = 8;
[[gnu::tls_model("initial-exec")]] inline constinit thread_local FastSlot tls_fast[kFastSlots] = {};
}  // namespace detail

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

  /// platform::jemalloc::mallocx(MALLOCX_ARENA | this thread's cache of this arena, or MALLOCX_TCACHE_NONE), aligned
  /// to spec().alignment (Note [Alignment without MALLOCX_ALIGN]); nullptr when the hooks could
  /// not get memory.
  void* allocate(std::size_t bytes) noexcept {
    if (bytes <= natural_max_) [[likely]] {
      void* p = platform::jemalloc::mallocx(rounded(bytes), arena_flag_ | cache_flag());
      if ((reinterpret_cast<std::uintptr_t>(p) & align_mask_) == 0) [[likely]] return p;  // null too
      return realign(p, bytes);
    }
    return allocate_flagged(bytes);
  }
  /// sdallocx with the size given to allocate (any thread: it goes to the freeing thread's cache).
  void deallocate(void* p, std::size_t bytes) noexcept {
    if (p == nullptr) return;
    if (bytes <= natural_max_) [[likely]] {
      platform::jemalloc::sdallocx(p, rounded(bytes), cache_flag());
    } else {
      deallocate_flagged(p, bytes);
    }
  }
  /// The size jemalloc will really reserve for `bytes` (its size class).
  std::size_t usable_size(std::size_t bytes) const noexcept {
    return bytes <= natural_max_ ? platform::jemalloc::nallocx(rounded(bytes), arena_flag_)
                                 : platform::jemalloc::nallocx(bytes == 0 ? 1 : bytes, arena_flag_ | size_flags(bytes));
  }
  /// Requests up to this size are allocated without MALLOCX_ALIGN (Note [Alignment without
  /// MALLOCX_ALIGN]); larger ones with it. Decided once, when the arena is created.
  std::size_t unflagged_max() const noexcept { return natural_max_; }
  /// Blocks that came back from the unflagged path misaligned and were allocated again with
  /// MALLOCX_ALIGN (expected: 0; the check is what makes the unflagged path safe to take).
  std::uint64_t realigned() const noexcept { return realigned_.load(std::memory_order_relaxed); }

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
  int cache_flag() noexcept {
    const detail::FastSlot& slot = detail::tls_fast[instance_ % detail::kFastSlots];
    if (slot.arena == instance_) [[likely]] return slot.flag;
    return cache_flag_slow();
  }
  [[gnu::noinline]] int cache_flag_slow() noexcept;
  /// `bytes` (0 counts as 1) rounded up to the alignment: the unflagged path's request size.
  std::size_t rounded(std::size_t bytes) const noexcept {
    return ((bytes == 0 ? 1 : bytes) + align_mask_) & ~align_mask_;
  }
  /// The MALLOCX_ALIGN flag of the flagged path (requests above natural_max_).
  int size_flags(std::size_t bytes) const noexcept;
  [[gnu::noinline]] void* realign(void* p, std::size_t bytes) noexcept;
  [[gnu::noinline]] void* allocate_flagged(std::size_t bytes) noexcept;
  [[gnu::noinline]] void deallocate_flagged(void* p, std::size_t bytes) noexcept;
  /// Checks the installed jemalloc's size classes once (Note [Alignment without MALLOCX_ALIGN]).
  std::size_t choose_natural_max() const noexcept;
  void* map_extent(std::size_t size, std::size_t alignment) noexcept;
  void unmap_extent(void* addr, std::size_t size) noexcept;
  void note_error(int err) noexcept;
  ExtentEvent event(void* addr, std::size_t bytes) const noexcept;

  HostOs& os_;
  ArenaSpec spec_;
  ExtentObserver* observer_;
  HookBlock block_;
  unsigned index_ = 0;
  int arena_flag_ = 0;                       // MALLOCX_ARENA(index_)
  std::size_t align_mask_ = 0;               // spec_.alignment - 1
  std::size_t natural_max_ = 0;              // see unflagged_max()
  std::uint64_t instance_ = 0;               // unique per HostArena ever made (indices are recycled)
  std::atomic<std::uint64_t> realigned_{0};
  std::shared_ptr<detail::ArenaCacheRegistry> caches_;    // explicit tcaches made for this arena, by any thread
  std::atomic<std::size_t> mapped_{0};
  std::atomic<int> last_error_{0};
  bool destroying_ = false;  // see Note [Extents are retained, not unmapped]
  std::atomic<std::uint64_t> hook_failures_{0};
  mutable std::mutex extents_mu_;
  std::map<std::uintptr_t, std::size_t> extents_;  // start -> bytes
};

}  // namespace tierpack::host

// HostArena: a jemalloc arena with extent hooks that map and mbind extents to one node.
// See Note [Extent hooks bind to the node] and Note [Purged pages refault] in host_arena.hpp.
#include "alloc/host/host_arena.hpp"

#include <cerrno>
#include <string>

#include "core/error.hpp"

namespace tierpack::host {

namespace je = platform::jemalloc;

// Note [Per-thread arena caches]
// jemalloc's automatic thread cache may hand out memory of whatever arena filled it, so our arenas
// cannot use it; without any cache (MALLOCX_TCACHE_NONE) every small allocation takes the arena's
// bin lock and costs ~10x a cached one. So each thread gets one explicit tcache per arena
// ("tcache.create"), found in a small thread_local table and used with MALLOCX_TCACHE(id): an
// explicit tcache only ever caches what was allocated or freed through it, i.e. this arena's memory.
// Hot path: allocate/deallocate (inline, host_arena.hpp) read the flag from detail::tls_fast, a
// direct-mapped copy keyed by arena instance (instances are never reused, so a slot of a destroyed
// arena never matches); a miss goes to cache_flag_slow(), which searches the full table, creates
// the cache on first use and refills the slot. Arenas made without caches keep MALLOCX_TCACHE_NONE
// in the slot the same way, and so does every arena once the exiting thread's caches are destroyed
// (destructors of other thread_locals may still free blocks then).
// Lifetime: a thread's caches are destroyed (flushed back to their arenas) when the thread exits;
// an arena destroys every cache made for it before the arena itself goes (its registry tells which),
// and threads that outlive it find the registry gone and skip it. The table is per-thread state that
// jemalloc's API forces on us; it holds caches only, no policy. jemalloc allows 4095 explicit
// tcaches per process: past that, allocation falls back to MALLOCX_TCACHE_NONE.
struct detail::ArenaCacheRegistry {
  std::mutex mu;
  bool alive = true;
  std::vector<unsigned> ids;
};

namespace {

constexpr unsigned kNoCache = ~0u;
std::atomic<std::uint64_t> next_instance{1};

void destroy_tcache(unsigned id) noexcept { je::mallctl("tcache.destroy", nullptr, nullptr, &id, sizeof(id)); }

struct ThreadCaches {
  struct Entry {
    std::uint64_t arena;
    unsigned id;
    std::weak_ptr<detail::ArenaCacheRegistry> registry;
  };
  std::vector<Entry> entries;
  ~ThreadCaches();
};

thread_local ThreadCaches tls_caches;
// Set when this thread's caches are gone (thread exit): blocks freed after that, from destructors of
// thread_locals that outlive tls_caches, go to their arena without a cache.
constinit thread_local bool tls_caches_gone = false;

ThreadCaches::~ThreadCaches() {
  // The fast table still names the caches destroyed below; a later call would use a dead tcache id
  // (jemalloc aborts, or uses whatever took the id over). Empty it, so calls go to the slow path.
  tls_caches_gone = true;
  for (detail::FastSlot& slot : detail::tls_fast) slot = {};
  for (Entry& e : entries) {
    auto reg = e.registry.lock();
    if (!reg || e.id == kNoCache) continue;
    std::lock_guard lock(reg->mu);
    if (!reg->alive) continue;  // the arena destroyed it already
    destroy_tcache(e.id);
    std::erase(reg->ids, e.id);
  }
}

}  // namespace

int HostArena::cache_flag_slow() noexcept {
  detail::FastSlot& slot = detail::tls_fast[instance_ % detail::kFastSlots];
  if (!caches_ || tls_caches_gone) {  // no cache (now): remember that, so the next call stays fast
    slot = {instance_, MALLOCX_TCACHE_NONE};
    return slot.flag;
  }
  for (const auto& e : tls_caches.entries) {
    if (e.arena == instance_) {
      slot = {instance_, e.id == kNoCache ? MALLOCX_TCACHE_NONE : static_cast<int>(MALLOCX_TCACHE(e.id))};
      return slot.flag;
    }
  }
  unsigned id = kNoCache;
  try {
    std::erase_if(tls_caches.entries, [](const ThreadCaches::Entry& e) { return e.registry.expired(); });
    std::size_t sz = sizeof(id);
    if (je::mallctl("tcache.create", &id, &sz, nullptr, 0) != 0) id = kNoCache;
    if (id != kNoCache) {
      std::lock_guard lock(caches_->mu);
      caches_->ids.push_back(id);
    }
    tls_caches.entries.push_back({instance_, id, caches_});
  } catch (...) {
    if (id != kNoCache) destroy_tcache(id);  // not recorded anywhere: give it back
    return MALLOCX_TCACHE_NONE;
  }
  slot = {instance_, id == kNoCache ? MALLOCX_TCACHE_NONE : static_cast<int>(MALLOCX_TCACHE(id))};
  return slot.flag;
}

int HostArena::size_flags(std::size_t bytes) const noexcept {
  // THP arenas: a block that spans huge pages starts on one, so its huge pages hold only it.
  if (spec_.huge_pages && bytes >= kHugePage) return MALLOCX_ALIGN(kHugePage);
  return static_cast<int>(MALLOCX_ALIGN(spec_.alignment));
}

void* HostArena::realign(void* p, std::size_t bytes) noexcept {
  // Not expected (Note [Alignment without MALLOCX_ALIGN]): take the aligned path before giving the
  // misaligned block back, or the cache would hand the same block out again. Both blocks have the
  // same size class (checked in choose_natural_max), so sdallocx with either size/flags is right.
  realigned_.fetch_add(1, std::memory_order_relaxed);
  void* q = je::mallocx(bytes == 0 ? 1 : bytes, arena_flag_ | cache_flag() | size_flags(bytes));
  je::sdallocx(p, rounded(bytes), cache_flag());
  return q;
}

void* HostArena::allocate_flagged(std::size_t bytes) noexcept {
  return je::mallocx(bytes == 0 ? 1 : bytes, arena_flag_ | cache_flag() | size_flags(bytes));
}

void HostArena::deallocate_flagged(void* p, std::size_t bytes) noexcept {
  je::sdallocx(p, bytes == 0 ? 1 : bytes, cache_flag() | size_flags(bytes));
}

namespace {

// A size_t mallctl value by name; 0 when jemalloc does not know the name.
std::size_t mallctl_size(const char* name) noexcept {
  std::size_t v = 0, sz = sizeof(v);
  return je::mallctl(name, &v, &sz, nullptr, 0) == 0 ? v : 0;
}

// Whether every request n in [first, last], rounded up to a multiple of `a` and unflagged, lands on
// a size class that is a multiple of `a` and is the class MALLOCX_ALIGN(a) gives for n. One step per
// size class: nallocx is monotone in the size, so agreeing at both ends of [n, c] covers all of it.
bool classes_aligned(std::size_t a, std::size_t first, std::size_t last) noexcept {
  const int align = static_cast<int>(MALLOCX_ALIGN(a));
  for (std::size_t n = first; n <= last;) {
    const std::size_t c = je::nallocx((n + a - 1) & ~(a - 1), 0);
    if (c == 0 || c % a != 0 || je::nallocx(n, align) != c || je::nallocx(c, align) != c) return false;
    n = c + 1;
  }
  return true;
}

}  // namespace

std::size_t HostArena::choose_natural_max() const noexcept {
  const std::size_t a = spec_.alignment;
  // Small classes: up to the largest bin ("arenas.bin.<nbins-1>.size").
  unsigned nbins = 0;
  std::size_t sz = sizeof(nbins);
  if (je::mallctl("arenas.nbins", &nbins, &sz, nullptr, 0) != 0 || nbins == 0) return 0;
  const std::string bin = "arenas.bin." + std::to_string(nbins - 1) + ".size";
  const std::size_t small_max = mallctl_size(bin.c_str());
  const std::size_t small_last = small_max - small_max % a;  // last multiple of a that stays small
  if (small_last == 0 || !classes_aligned(a, 1, small_last)) return 0;
  // Large blocks start on a page, or with opt.cache_oblivious on a random multiple of jemalloc's
  // 64-byte cache line within it; when that query fails, assume the weaker one.
  const std::size_t page = mallctl_size("arenas.page");
  bool oblivious = true;
  sz = sizeof(oblivious);
  if (je::mallctl("opt.cache_oblivious", &oblivious, &sz, nullptr, 0) != 0) oblivious = true;
  const std::size_t large_align = oblivious ? 64 : page;
  if (page == 0 || a > large_align) return small_last;
  // Large classes are multiples of the page: check them all, up to the huge-page size (THP arenas
  // keep MALLOCX_ALIGN(2 MiB) from there) or a bound past any tensor (larger requests keep the flag).
  const std::size_t last = spec_.huge_pages ? kHugePage - 1 : std::size_t{1} << 46;
  return classes_aligned(a, small_last + 1, last) ? last : small_last;
}

HostArena::HostArena(HostOs& os, ArenaSpec spec, ExtentObserver* observer)
    : os_(os), spec_(spec), observer_(observer) {
  TIERPACK_EXPECTS(spec.node >= 0 && spec.node < os.node_count(), "arena node out of range");
  TIERPACK_EXPECTS(spec.alignment > 0 && (spec.alignment & (spec.alignment - 1)) == 0 && spec.alignment <= 4096,
                   "arena alignment must be a power of two up to 4096");
  block_.hooks = extent_hooks_t{&hook_alloc,     &hook_dalloc,      &hook_destroy,
                                &hook_commit,    &hook_decommit,    &hook_purge_lazy,
                                &hook_purge_forced, &hook_split,    &hook_merge};
  block_.self = this;
  extent_hooks_t* hooks = &block_.hooks;
  if (!je::available()) throw error(je::load_error());
  std::size_t sz = sizeof(index_);
  if (int err = je::mallctl("arenas.create", &index_, &sz, &hooks, sizeof(hooks))) {
    throw os_error("mallctl(arenas.create)", err);
  }
  arena_flag_ = static_cast<int>(MALLOCX_ARENA(index_));
  align_mask_ = spec_.alignment - 1;
  natural_max_ = choose_natural_max();
  instance_ = next_instance.fetch_add(1, std::memory_order_relaxed);
  if (spec_.thread_caches) caches_ = std::make_shared<detail::ArenaCacheRegistry>();
}

HostArena::~HostArena() {
  if (caches_) {
    std::lock_guard lock(caches_->mu);
    caches_->alive = false;
    for (unsigned id : caches_->ids) destroy_tcache(id);  // flushes their blocks into this arena
    caches_->ids.clear();
  }
  destroying_ = true;
  const std::string name = "arena." + std::to_string(index_) + ".destroy";
  je::mallctl(name.c_str(), nullptr, nullptr, nullptr, 0);
}

std::vector<std::pair<void*, std::size_t>> HostArena::extents() const {
  std::lock_guard lock(extents_mu_);
  std::vector<std::pair<void*, std::size_t>> out;
  for (const auto& [start, bytes] : extents_) {
    if (!out.empty() && reinterpret_cast<std::uintptr_t>(out.back().first) + out.back().second == start) {
      out.back().second += bytes;
    } else {
      out.emplace_back(reinterpret_cast<void*>(start), bytes);
    }
  }
  return out;
}

void HostArena::note_error(int err) noexcept {
  last_error_.store(err, std::memory_order_relaxed);
  hook_failures_.fetch_add(1, std::memory_order_relaxed);
}

ExtentEvent HostArena::event(void* addr, std::size_t bytes) const noexcept {
  return ExtentEvent{addr, bytes, spec_.cls, spec_.tier, spec_.node};
}

void* HostArena::map_extent(std::size_t size, std::size_t alignment) noexcept {
  const std::size_t page = os_.page_size();
  if (alignment < page) alignment = page;
  // Over-map by the alignment and trim both ends: mmap only promises page alignment.
  const std::size_t span = size + alignment - page;
  void* raw = nullptr;
  if (int err = os_.map(span, &raw)) {
    note_error(err);
    return nullptr;
  }
  const auto base = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t start = (base + alignment - 1) & ~(alignment - 1);
  if (start > base) os_.unmap(raw, start - base);
  if (const std::uintptr_t tail = base + span - (start + size); tail > 0) {
    os_.unmap(reinterpret_cast<void*>(start + size), tail);
  }
  void* addr = reinterpret_cast<void*>(start);
  // Bind before the first touch, so every page faults in on the arena's node.
  if (int err = os_.bind(addr, size, spec_.node, spec_.bind, /*move=*/false)) {
    note_error(err);
    os_.unmap(addr, size);
    return nullptr;
  }
  // Either THP on purpose (2 MiB-aligned large blocks) or none at all, whatever the system default
  // says: a THP that spans blocks of several groups would move with any one of them.
  os_.advise_huge(addr, size, spec_.huge_pages);  // advisory: failure changes nothing
  try {
    std::lock_guard lock(extents_mu_);
    extents_[start] = size;
  } catch (...) {
    os_.unmap(addr, size);
    note_error(ENOMEM);
    return nullptr;
  }
  mapped_.fetch_add(size, std::memory_order_relaxed);
  if (observer_ != nullptr) observer_->on_extent_mapped(event(addr, size));
  return addr;
}

void HostArena::unmap_extent(void* addr, std::size_t size) noexcept {
  if (observer_ != nullptr) observer_->on_extent_unmapped(event(addr, size));
  const auto a = reinterpret_cast<std::uintptr_t>(addr);
  const std::uintptr_t b = a + size;
  {
    // Remove [a, b) from the extent set; jemalloc may give back a piece of one extent or a merge
    // of several, so cut entries at both ends.
    std::lock_guard lock(extents_mu_);
    auto it = extents_.upper_bound(a);
    if (it != extents_.begin()) --it;
    while (it != extents_.end() && it->first < b) {
      const std::uintptr_t s = it->first;
      const std::uintptr_t e = s + it->second;
      if (e <= a) {
        ++it;
        continue;
      }
      it = extents_.erase(it);
      try {
        if (s < a) extents_[s] = a - s;
        if (e > b) extents_[b] = e - b;
      } catch (...) {
        // Losing a bookkeeping entry only under-reports mapped extents; the memory is gone anyway.
      }
    }
  }
  mapped_.fetch_sub(size, std::memory_order_relaxed);
  if (int err = os_.unmap(addr, size)) note_error(err);
}

void* HostArena::hook_alloc(extent_hooks_t* h, void* new_addr, std::size_t size, std::size_t alignment, bool* zero,
                            bool* commit, unsigned) {
  // Growing in place at new_addr is optional for hooks; refusing makes jemalloc map elsewhere.
  if (new_addr != nullptr) return nullptr;
  void* p = from(h).map_extent(size, alignment);
  if (p != nullptr) {
    *zero = true;  // fresh anonymous memory
    *commit = true;
  }
  return p;
}

// Note [Extents are retained, not unmapped]
// dalloc opts out (returns true), as jemalloc's own default hooks do on Linux with opt.retain: the
// range stays mapped (already purged, so it holds no memory) and jemalloc reuses it; it is unmapped
// by `destroy` when the arena is destroyed. Unmapping in dalloc and returning false is allowed by
// the API, but jemalloc 5.3 (Debian's) then corrupts its extent heaps under concurrent allocation
// (a null-pointer write in its pairing heap within seconds of the stress test); kept out on purpose.
// Only while the arena is being destroyed (one thread, no allocations) does dalloc unmap: that is
// how jemalloc gives back the arena's metadata blocks, which never reach `destroy`.
bool HostArena::hook_dalloc(extent_hooks_t* h, void* addr, std::size_t size, bool, unsigned) {
  HostArena& self = from(h);
  if (!self.destroying_) return true;
  self.unmap_extent(addr, size);
  return false;
}

void HostArena::hook_destroy(extent_hooks_t* h, void* addr, std::size_t size, bool, unsigned) {
  from(h).unmap_extent(addr, size);
}

// Extents are always committed (Linux overcommits); a commit is a no-op and a decommit is refused
// (true), so jemalloc purges instead.
bool HostArena::hook_commit(extent_hooks_t*, void*, std::size_t, std::size_t, std::size_t, unsigned) {
  return false;
}
bool HostArena::hook_decommit(extent_hooks_t*, void*, std::size_t, std::size_t, std::size_t, unsigned) {
  return true;
}

bool HostArena::hook_purge_lazy(extent_hooks_t* h, void* addr, std::size_t, std::size_t offset, std::size_t length,
                                unsigned) {
  HostArena& self = from(h);
  if (int err = self.os_.purge(static_cast<char*>(addr) + offset, length, /*lazy=*/true)) {
    self.note_error(err);
    return true;
  }
  return false;
}

bool HostArena::hook_purge_forced(extent_hooks_t* h, void* addr, std::size_t, std::size_t offset,
                                  std::size_t length, unsigned) {
  HostArena& self = from(h);
  if (int err = self.os_.purge(static_cast<char*>(addr) + offset, length, /*lazy=*/false)) {
    self.note_error(err);
    return true;
  }
  return false;
}

// Splitting and merging are bookkeeping inside jemalloc: any page-aligned piece of our mappings
// can be unmapped on its own, so both are always allowed (false = success).
bool HostArena::hook_split(extent_hooks_t*, void*, std::size_t, std::size_t, std::size_t, bool, unsigned) {
  return false;
}
bool HostArena::hook_merge(extent_hooks_t*, void*, std::size_t, void*, std::size_t, bool, unsigned) {
  return false;
}

}  // namespace tierpack::host

// The profiling arena (see profiling_arena.hpp, Note [Arena extents]).
#include "runtime/session/profiling_arena.hpp"

#include <string>


#include "core/error.hpp"
#include "platform/host_os.hpp"
#include "platform/jemalloc.hpp"

namespace tierpack {

// One hooks table per arena: jemalloc passes the table pointer back, and we embed it first in a
// struct that also points at the arena object.
struct ArenaHooks {
  extent_hooks_t table;
  ProfilingArena* arena;
};

namespace {

void* extent_alloc(extent_hooks_t* h, void* new_addr, std::size_t size, std::size_t alignment, bool* zero, bool* commit,
                 unsigned) {
  if (new_addr != nullptr) return nullptr;  // cannot place an extent at a given address: let jemalloc pick
  void* p = reinterpret_cast<ArenaHooks*>(h)->arena->hook_alloc(size, alignment);
  if (p) {
    *zero = true;  // fresh anonymous pages
    *commit = true;
  }
  return p;
}

// Refuse: jemalloc keeps ("retains") the extent and reuses it later (Note [Arena extents]).
bool hook_dalloc(extent_hooks_t*, void*, std::size_t, bool, unsigned) { return true; }

void hook_destroy(extent_hooks_t*, void* addr, std::size_t size, bool, unsigned) {
  host::system_os().purge(addr, size, /*lazy=*/false);
}

bool hook_purge_forced(extent_hooks_t*, void* addr, std::size_t, std::size_t offset, std::size_t length, unsigned) {
  return host::system_os().purge(static_cast<char*>(addr) + offset, length, /*lazy=*/false) != 0;
}

bool hook_purge_lazy(extent_hooks_t*, void* addr, std::size_t, std::size_t offset, std::size_t length, unsigned) {
  return host::system_os().purge(static_cast<char*>(addr) + offset, length, /*lazy=*/true) != 0;
}

bool hook_split(extent_hooks_t*, void*, std::size_t, std::size_t, std::size_t, bool, unsigned) { return false; }
bool hook_merge(extent_hooks_t*, void*, std::size_t, void*, std::size_t, bool, unsigned) { return false; }

}  // namespace

ProfilingArena::ProfilingArena(std::size_t reserve_bytes) {
  if (!platform::jemalloc::available()) throw error(platform::jemalloc::load_error());
  void* base = nullptr;
  if (const int err = host::system_os().reserve(reserve_bytes, &base); err != 0)
    throw os_error("mmap(reserve " + std::to_string(reserve_bytes) + ")", err);
  base_ = reinterpret_cast<std::uintptr_t>(base);
  size_ = reserve_bytes;
  next_ = base_;
  hooks_ = std::make_unique<ArenaHooks>();
  ArenaHooks* hooks = hooks_.get();
  hooks->table.alloc = extent_alloc;
  hooks->table.dalloc = hook_dalloc;
  hooks->table.destroy = hook_destroy;
  hooks->table.commit = nullptr;
  hooks->table.decommit = nullptr;
  hooks->table.purge_lazy = hook_purge_lazy;
  hooks->table.purge_forced = hook_purge_forced;
  hooks->table.split = hook_split;
  hooks->table.merge = hook_merge;
  hooks->arena = this;
  extent_hooks_t* table = &hooks->table;
  unsigned index = 0;
  std::size_t len = sizeof index;
  if (const int rc = platform::jemalloc::mallctl("arenas.create", &index, &len, &table, sizeof table); rc != 0) {
    host::system_os().unmap(base, reserve_bytes);
    throw error("jemalloc arenas.create failed (error " + std::to_string(rc) + ")");
  }
  arena_ = index;
  arena_created_ = true;
}

ProfilingArena::~ProfilingArena() {
  if (arena_created_) {
    const std::string cmd = "arena." + std::to_string(arena_) + ".destroy";
    platform::jemalloc::mallctl(cmd.c_str(), nullptr, nullptr, nullptr, 0);
  }
  if (base_) host::system_os().unmap(reinterpret_cast<void*>(base_), size_);
}

void* ProfilingArena::hook_alloc(std::size_t size, std::size_t alignment) noexcept {
  std::lock_guard lock(grow_mu_);
  if (alignment == 0) alignment = 4096;
  const std::uintptr_t start = (next_.load() + alignment - 1) & ~(alignment - 1);
  if (start + size > base_ + size_ || start + size < start) return nullptr;
  if (host::system_os().commit(reinterpret_cast<void*>(start), size) != 0) return nullptr;
  next_.store(start + size);
  return reinterpret_cast<void*>(start);
}

void* ProfilingArena::allocate(std::size_t bytes) noexcept {
  // Tensors of a page or more start on a page boundary: jemalloc otherwise shifts large allocations
  // by a random number of cache lines (opt.cache_oblivious), so each would straddle one more page.
  const int align = bytes >= 4096 ? MALLOCX_ALIGN(4096) : MALLOCX_ALIGN(64);
  return platform::jemalloc::mallocx(bytes == 0 ? 1 : bytes, MALLOCX_ARENA(arena_) | MALLOCX_TCACHE_NONE | align);
}

void ProfilingArena::deallocate(void* p) noexcept {
  if (p) platform::jemalloc::dallocx(p, MALLOCX_TCACHE_NONE);
}

}  // namespace tierpack

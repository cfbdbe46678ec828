// ProfilingArena: page-aligned, trackable memory for CPU tensors while a profile is recorded. A
// jemalloc arena (arenas.create) whose extents come from one reserved virtual range: jemalloc does the
// size classes and reuse; we only hand it address space. Everything in the range is tensor data or
// jemalloc's metadata for this arena, nothing else of the process, so its pages can be protected and
// traced, and "does this pointer belong to the arena" is a range check.
//
// Note [Arena extents]
// The alloc hook carves extents out of a PROT_NONE reservation (bump pointer, made read-write on
// demand); the dalloc hook refuses (returns true), so jemalloc retains extents and reuses them instead
// of giving address space back; purges are madvise(MADV_DONTNEED). The reservation, the commits and the
// purges are the OS layer's (platform/host_os.hpp: reserve, commit, purge); the constructor's reserve
// is its first use, so no hook is the one that creates system_os() inside jemalloc. Small tensors share slabs, which
// is the layout the profile should see: pages holding tensors of several lifetimes are what page
// false sharing is about. Allocations use MALLOCX_TCACHE_NONE: jemalloc's thread caches could hand a
// region of another arena back (BRIEF.md, known traps). Tensors of a page or more are page-aligned.
// Loading: libjemalloc uses initial-exec TLS, so a process that dlopen()s it (Python) needs static
// TLS surplus: GLIBC_TUNABLES=glibc.rtld.optional_static_tls=... (`tierpack profile` sets it).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "runtime/session/host_memory.hpp"

namespace tierpack {

struct ArenaHooks;

class ProfilingArena final : public HostMemory {
 public:
  /// Reserves `reserve_bytes` of address space and creates the jemalloc arena. Throws os_error /
  /// tierpack::error when the kernel or jemalloc refuses.
  explicit ProfilingArena(std::size_t reserve_bytes = std::size_t{64} << 30);
  /// Never called for the process-wide instance (tensors may outlive everything); tests destroy
  /// theirs after freeing what they allocated.
  ~ProfilingArena() override;
  ProfilingArena(const ProfilingArena&) = delete;
  ProfilingArena& operator=(const ProfilingArena&) = delete;

  std::string_view name() const override { return "profiling-arena"; }
  void* allocate(std::size_t bytes) noexcept override;
  void deallocate(void* p) noexcept override;
  bool owns(const void* p) const noexcept override {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    return a >= base_ && a < base_ + size_;
  }
  bool page_trackable() const noexcept override { return true; }
  /// Everything handed to jemalloc so far is one contiguous run from the reservation's start.
  std::optional<std::pair<std::uintptr_t, std::uintptr_t>> extent_of(std::uintptr_t p) const noexcept override {
    const std::uintptr_t end = next_.load(std::memory_order_acquire);
    if (p < base_ || p >= end) return std::nullopt;
    return std::make_pair(base_, end);
  }

  unsigned arena_index() const { return arena_; }
  /// Bytes of the reservation handed to jemalloc so far.
  std::size_t mapped_bytes() const { return next_.load() - base_; }

  // jemalloc extent hook entry points (private to profiling_arena.cpp, public for its C callbacks).
  void* hook_alloc(std::size_t size, std::size_t alignment) noexcept;  // NOLINT: called by the C hook

 private:
  std::uintptr_t base_ = 0;
  std::size_t size_ = 0;
  std::atomic<std::uintptr_t> next_{0};
  std::mutex grow_mu_;
  unsigned arena_ = 0;
  bool arena_created_ = false;
  std::unique_ptr<ArenaHooks> hooks_;  ///< jemalloc holds a pointer to it until the arena is destroyed
};

}  // namespace tierpack

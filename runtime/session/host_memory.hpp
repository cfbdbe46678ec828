// HostMemory: where CPU tensors' bytes come from while tierpack is active. A fan-out point of the
// Session: the profiling arena (profiling_arena.hpp) serves page-aligned, trackable memory while a
// profile is recorded; the host runtime (alloc/host page-group arenas) plugs in here for `tierpack run`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

namespace tierpack {

class HostMemory {
 public:
  virtual ~HostMemory() = default;

  virtual std::string_view name() const = 0;
  /// `bytes` > 0, 64-byte aligned; nullptr when it cannot (the caller raises the framework's OOM).
  virtual void* allocate(std::size_t bytes) noexcept = 0;
  /// Frees memory this source returned.
  virtual void deallocate(void* p) noexcept = 0;
  /// Whether p was returned by this source (cheap: called on every free of a CPU tensor).
  virtual bool owns(const void* p) const noexcept = 0;
  /// Whether its pages hold only tensor data in page-aligned extents, so a page tracer may watch them.
  virtual bool page_trackable() const noexcept = 0;
  /// The page-aligned extent [first, second) holding p, so the profiler can watch whole extents
  /// (profiler/page_join.hpp, Note [Watching whole extents]); nullopt: unknown, watch per tensor.
  virtual std::optional<std::pair<std::uintptr_t, std::uintptr_t>> extent_of(std::uintptr_t p) const noexcept {
    (void)p;
    return std::nullopt;
  }
};

}  // namespace tierpack

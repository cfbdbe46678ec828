// The GPU allocator's chunk layer (Note [GPU allocator layout] in gpu_allocator.hpp): the slots of the
// reservation (runs of free slots, one chunk each), the physical handle behind each chunk and where
// it lives, and a device handle for a new chunk when the budget is full (reclaim, then wait for an
// eviction).
#include "alloc/gpu/detail/gpu_allocator_impl.hpp"

#include <chrono>

namespace tierpack::gpu {
using namespace detail;

// ---- virtual address runs
std::optional<std::uint32_t> GpuAllocator::Impl::alloc_run(std::uint32_t n) {
  for (auto it = free_runs.begin(); it != free_runs.end(); ++it) {
    if (it->second < n) continue;
    const std::uint32_t first = it->first, len = it->second;
    free_runs.erase(it);
    if (len > n) free_runs[first + n] = len - n;
    return first;
  }
  return std::nullopt;
}

void GpuAllocator::Impl::free_run(std::uint32_t first, std::uint32_t n) {
  auto next = free_runs.lower_bound(first);
  if (next != free_runs.end() && next->first == first + n) {
    n += next->second;
    next = free_runs.erase(next);
  }
  if (next != free_runs.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == first) {
      prev->second += n;
      return;
    }
  }
  free_runs[first] = n;
}

// A device handle for a new chunk: from the pool, else by reclaiming empty segments, else by
// waiting for evictions. Empty result: the chunk would have to spill.
PooledHandle GpuAllocator::Impl::acquire_device(std::unique_lock<std::mutex>& lk) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    if (PooledHandle h = pool(Residence::device).try_acquire()) return h;
    if (reclaim_one(false) || reclaim_one(true)) continue;
    if (!pressure) break;
    ++st.pressure_waits;
    lk.unlock();
    bool more = false;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      more = pressure();
    } catch (...) {
      more = false;
    }
    const double waited = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    lk.lock();
    st.pressure_wait_ns += waited;
    if (!more) return pool(Residence::device).try_acquire();
  }
  return {};
}

std::optional<Residence> GpuAllocator::residence_of(const void* p) const {
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (a < base_ || a >= base_ + va_bytes_) return std::nullopt;
  const Segment* s = I.segment_of(a);
  if (!s) return std::nullopt;
  return I.chunks[(a - base_) / options_.chunk_bytes].where;
}

}  // namespace tierpack::gpu

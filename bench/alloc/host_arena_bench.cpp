// One allocate + free pair, by size: glibc malloc, jemalloc's malloc/free (this program's malloc is
// jemalloc's: it links libjemalloc, which Debian builds without a symbol prefix; checked below),
// jemalloc mallocx(n, 0)/dallocx, jemalloc without a cache, jemalloc with an explicit arena +
// explicit tcache (raw mallctl; once more with MALLOCX_ALIGN(64)), one tierpack arena (mallocx with
// MALLOCX_ARENA | this thread's tcache for it, blocks 64-byte aligned), and the whole
// HostArenaAllocator path (arena + block record + budget charge). Target (issue 5): the arena pair
// within 1.2x of plain jemalloc. Results: bench/results/host_backend.md.
//   build/bench/alloc/bench_host_arena [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>

#include <jemalloc/jemalloc.h>

#include "alloc/host/host_arena.hpp"
#include "alloc/host/host_arena_allocator.hpp"

extern "C" void* __libc_malloc(std::size_t);
extern "C" void __libc_free(void*);

namespace tierpack::host {
namespace {

void sizes(benchmark::internal::Benchmark* b) {
  for (long n : {64L, 4096L, 64L << 10, 1L << 20}) b->Arg(n);
}

void BM_GlibcMallocFree(benchmark::State& s) {
  const auto n = static_cast<std::size_t>(s.range(0));
  for (auto _ : s) {
    void* p = __libc_malloc(n);
    benchmark::DoNotOptimize(p);
    __libc_free(p);
  }
}
BENCHMARK(BM_GlibcMallocFree)->Apply(sizes);

// Whether this program's malloc is jemalloc's: jemalloc counts the bytes it hands this thread.
bool malloc_is_jemalloc() {
  std::uint64_t* allocated = nullptr;
  std::size_t sz = sizeof(allocated);
  if (mallctl("thread.allocatedp", &allocated, &sz, nullptr, 0) != 0) return false;
  const std::uint64_t before = *allocated;
  void* p = std::malloc(1000);
  benchmark::DoNotOptimize(p);
  const std::uint64_t after = *allocated;
  std::free(p);
  return after - before >= 1000;
}

// jemalloc's malloc/free: its inlined fast path (automatic arena, automatic tcache, no flags).
void BM_JemallocMalloc(benchmark::State& s) {
  if (!malloc_is_jemalloc()) {
    s.SkipWithError("this program's malloc is not jemalloc's");
    return;
  }
  const auto n = static_cast<std::size_t>(s.range(0));
  for (auto _ : s) {
    void* p = std::malloc(n);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
}
BENCHMARK(BM_JemallocMalloc)->Apply(sizes);

// mallocx(n, 0)/dallocx: jemalloc's non-standard API without flags (not malloc's fast path).
void BM_JemallocMallocxFree(benchmark::State& s) {
  const auto n = static_cast<std::size_t>(s.range(0));
  for (auto _ : s) {
    void* p = mallocx(n, 0);
    benchmark::DoNotOptimize(p);
    dallocx(p, 0);
  }
}
BENCHMARK(BM_JemallocMallocxFree)->Apply(sizes);

void BM_JemallocNoTcache(benchmark::State& s) {
  const auto n = static_cast<std::size_t>(s.range(0));
  for (auto _ : s) {
    void* p = mallocx(n, MALLOCX_TCACHE_NONE);
    benchmark::DoNotOptimize(p);
    dallocx(p, MALLOCX_TCACHE_NONE);
  }
}
BENCHMARK(BM_JemallocNoTcache)->Apply(sizes);

// jemalloc's own mallocx with an explicit arena and an explicit tcache, plus `extra` flags on both calls.
void explicit_arena_tcache(benchmark::State& s, int extra) {
  unsigned arena = 0, tc = 0;
  std::size_t sz = sizeof(unsigned);
  mallctl("arenas.create", &arena, &sz, nullptr, 0);
  mallctl("tcache.create", &tc, &sz, nullptr, 0);
  const auto n = static_cast<std::size_t>(s.range(0));
  const int cache = static_cast<int>(MALLOCX_TCACHE(tc)) | extra;
  const int flags = static_cast<int>(MALLOCX_ARENA(arena)) | cache;
  for (auto _ : s) {
    void* p = mallocx(n, flags);
    benchmark::DoNotOptimize(p);
    sdallocx(p, n, cache);
  }
  mallctl("tcache.destroy", nullptr, nullptr, &tc, sizeof(tc));
}

// The floor for any per-arena cache: jemalloc's own mallocx with flags (an explicit tcache and an
// explicit arena) takes its general path, not malloc's inlined fast path.
void BM_JemallocExplicitArenaTcache(benchmark::State& s) { explicit_arena_tcache(s, 0); }
BENCHMARK(BM_JemallocExplicitArenaTcache)->Apply(sizes);

// The same with MALLOCX_ALIGN(64): what jemalloc's aligned path costs (the tierpack arena gets 64-byte
// blocks without it: Note [Alignment without MALLOCX_ALIGN] in alloc/host/host_arena.hpp).
void BM_JemallocExplicitArenaTcacheAlign64(benchmark::State& s) {
  explicit_arena_tcache(s, static_cast<int>(MALLOCX_ALIGN(64)));
}
BENCHMARK(BM_JemallocExplicitArenaTcacheAlign64)->Apply(sizes);

void BM_TierpackArena(benchmark::State& s) {
  HostArena arena(system_os(), ArenaSpec{TensorClass::activation, 0, 0}, nullptr);
  const auto n = static_cast<std::size_t>(s.range(0));
  for (auto _ : s) {
    void* p = arena.allocate(n);
    benchmark::DoNotOptimize(p);
    arena.deallocate(p, n);
  }
}
BENCHMARK(BM_TierpackArena)->Apply(sizes);

void BM_HostArenaAllocator(benchmark::State& s) {
  HostArenaAllocator alloc(Topology{});
  const auto n = static_cast<std::size_t>(s.range(0));
  const TierId tier = alloc.tiers().front();
  for (auto _ : s) {
    void* p = alloc.allocate(n, TensorClass::activation, tier);
    benchmark::DoNotOptimize(p);
    alloc.deallocate(p);
  }
}
BENCHMARK(BM_HostArenaAllocator)->Apply(sizes);

}  // namespace
}  // namespace tierpack::host

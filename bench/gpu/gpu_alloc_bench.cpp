// GPU-tier benchmarks.
//  * BM_AllocFree/<backend>/<bytes>: one allocate + deallocate pair on one stream (the cost PyTorch's
//    caching allocator pays per tensor; compare with bench/gpu/alloc_latency.py for torch's own).
//  * BM_Migrate/<group MiB>/<chunk MiB>: evict a page group to host memory and prefetch it back
//    through the GroupMover (copy on the copy streams + remap of every chunk); counters give each
//    direction's GB/s and the driver time of the remaps.
//  * BM_MigrateBothWays/<group MiB>/<chunk MiB>: one group leaves while another arrives.
//  * BM_PinnedCopy/<MiB>: the reference, cuMemcpyAsync between device memory and a pinned buffer.
//  * BM_Migrate's third argument is the verification (0 off, 1 evictions, 2 sampled, 3 all; Note [Verified
//    remaps]); BM_Checksum/<where>/<MiB> is the checksum kernel alone on device or host-backed memory.
//  * BM_RemapParts/<chunk MiB>/<where>/<batched>/<busy>/<threads>: the driver phases of remapping 1 GiB
//    of chunks (unmap, map, set access) on device (0) or host (1) handles; batched: one unmap and one
//    set-access call per run of chunks; busy: copies run both ways meanwhile (as during training),
//    1 as 256 MiB copies, 2 as 4 MiB pieces.
// The CUDA benchmarks report "no CUDA device" and skip where there is none.
#include <benchmark/benchmark.h>

#include <chrono>
#include <vector>

#include "alloc/gpu/chunk_checksum.hpp"
#include "alloc/gpu/gpu_allocator.hpp"
#include "alloc/gpu/memfd_backend.hpp"
#include "bench/gpu/bench_device.hpp"
#include "migrate/gpu/group_mover.hpp"

namespace tierpack::gpu::bench {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

struct Backends {
  std::unique_ptr<VmmBackend> cuda;
  std::string why;
  MemfdBackend twin{TwinOptions{}};
  Backends() { cuda = make_cuda_backend(&why); }
};

Backends& backends() {
  static Backends b;  // one per benchmark process: creating CUDA state per benchmark is slow
  return b;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void BM_AllocFree(benchmark::State& st, bool cuda) {
  VmmBackend* be = cuda ? backends().cuda.get() : &backends().twin;
  if (!be) {
    st.SkipWithError(backends().why.c_str());
    return;
  }
  GpuAllocatorOptions o;
  o.chunk_bytes = cuda ? 32 * MiB : 2 * MiB;
  o.page_bytes = 2 * MiB;
  o.small_threshold = MiB;
  o.host_limit = 64 * MiB;
  GpuAllocator a(*be, o);
  const auto size = static_cast<std::size_t>(st.range(0));
  a.deallocate(a.allocate(size, 0));  // the segment exists: measure the cached path
  for (auto _ : st) {
    void* p = a.allocate(size, 0);
    benchmark::DoNotOptimize(p);
    a.deallocate(p);
  }
  st.SetItemsProcessed(st.iterations());
}
BENCHMARK_CAPTURE(BM_AllocFree, twin, false)->Arg(512)->Arg(64 << 10)->Arg(1 << 20)->Arg(16 << 20)->Arg(256 << 20);
BENCHMARK_CAPTURE(BM_AllocFree, cuda, true)->Arg(512)->Arg(64 << 10)->Arg(1 << 20)->Arg(16 << 20)->Arg(256 << 20);

struct MigrationSetup {
  std::unique_ptr<GpuAllocator> alloc;
  std::unique_ptr<GroupMover> mover;
};

MigrationSetup make_setup(VmmBackend& be, std::size_t chunk, std::size_t host_bytes, Verify verify = Verify::all) {
  MigrationSetup s;
  GpuAllocatorOptions o;
  o.chunk_bytes = chunk;
  o.page_bytes = 2 * MiB;
  o.small_threshold = MiB;
  o.host_limit = host_bytes;
  s.alloc = std::make_unique<GpuAllocator>(be, o);
  MoverOptions mo;
  mo.verify = verify;
  s.mover = std::make_unique<GroupMover>(*s.alloc, mo);
  s.alloc->prewarm_host(host_bytes);  // host handles are slow to create: not what is measured here
  return s;
}

void BM_Migrate(benchmark::State& st) {
  VmmBackend* be = backends().cuda.get();
  if (!be) {
    st.SkipWithError(backends().why.c_str());
    return;
  }
  const std::size_t group = static_cast<std::size_t>(st.range(0)) * MiB, chunk = static_cast<std::size_t>(st.range(1)) * MiB;
  auto s = make_setup(*be, chunk, group + chunk, static_cast<Verify>(st.range(2)));
  const ArenaId g = s.alloc->create_arena("bench");
  void* p = s.alloc->allocate(group, 0, g);
  be->synchronize_stream(0);
  double evict_s = 0, prefetch_s = 0;
  s.mover->take_counters();
  for (auto _ : st) {
    auto t0 = std::chrono::steady_clock::now();
    s.mover->evict(g, 0);
    s.mover->drain();
    const double e = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    s.mover->prefetch(g, 0);
    s.mover->ensure_resident(g);
    const double f = seconds_since(t0);
    evict_s += e;
    prefetch_s += f;
    st.SetIterationTime(e + f);
  }
  const MoverCounters c = s.mover->take_counters();
  const double n = static_cast<double>(st.iterations());
  st.counters["to_host_GBps"] = static_cast<double>(group) * n / evict_s / 1e9;
  st.counters["to_device_GBps"] = static_cast<double>(group) * n / prefetch_s / 1e9;
  st.counters["remap_ms_per_GiB"] = c.remap_ns / 1e6 / (2.0 * n * static_cast<double>(group) / (1024.0 * MiB));
  st.counters["failures"] = static_cast<double>(c.failures);
  st.counters["verify_ms_per_GiB"] = c.verify_ns / 1e6 / (2.0 * n * static_cast<double>(group) / (1024.0 * MiB));
  st.SetBytesProcessed(static_cast<std::int64_t>(2 * group) * st.iterations());
  s.alloc->deallocate(p);
}
BENCHMARK(BM_Migrate)
    ->ArgsProduct({{2, 8, 32, 128, 512}, {2}, {0, 3}})
    ->ArgsProduct({{32, 128, 512, 2048}, {32}, {0, 1, 2, 3}})
    ->ArgsProduct({{128, 512, 2048}, {128}, {0, 3}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.3);

void BM_MigrateBothWays(benchmark::State& st) {
  VmmBackend* be = backends().cuda.get();
  if (!be) {
    st.SkipWithError(backends().why.c_str());
    return;
  }
  const std::size_t group = static_cast<std::size_t>(st.range(0)) * MiB, chunk = static_cast<std::size_t>(st.range(1)) * MiB;
  auto s = make_setup(*be, chunk, 2 * group + chunk);
  const ArenaId a = s.alloc->create_arena("a"), b = s.alloc->create_arena("b");
  void* pa = s.alloc->allocate(group, 0, a);
  void* pb = s.alloc->allocate(group, 0, b);
  s.mover->evict(b, 0);
  s.mover->drain();
  ArenaId on_device = a, on_host = b;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    s.mover->evict(on_device, 0);
    s.mover->prefetch(on_host, 0);
    s.mover->ensure_resident(on_host);
    s.mover->drain();
    st.SetIterationTime(seconds_since(t0));
    std::swap(on_device, on_host);
  }
  st.SetBytesProcessed(static_cast<std::int64_t>(2 * group) * st.iterations());
  s.alloc->deallocate(pa);
  s.alloc->deallocate(pb);
}
BENCHMARK(BM_MigrateBothWays)->ArgsProduct({{128, 512, 2048}, {32, 128}})->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.3);

void BM_PinnedCopy(benchmark::State& st) {
  VmmBackend* be = backends().cuda.get();
  if (!be) {
    st.SkipWithError(backends().why.c_str());
    return;
  }
  const std::size_t bytes = static_cast<std::size_t>(st.range(0)) * MiB;
  GpuAllocatorOptions o;
  o.chunk_bytes = 32 * MiB;
  GpuAllocator a(*be, o);
  void* d = a.allocate(bytes, 0);
  PinnedBuffer h = pinned_alloc(*be, bytes);
  const StreamHandle s = be->create_stream();
  double d2h = 0, h2d = 0;
  for (auto _ : st) {
    auto t0 = std::chrono::steady_clock::now();
    be->copy_async(reinterpret_cast<std::uintptr_t>(h.ptr), reinterpret_cast<std::uintptr_t>(d), bytes, s);
    be->synchronize_stream(s);
    const double x = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    be->copy_async(reinterpret_cast<std::uintptr_t>(d), reinterpret_cast<std::uintptr_t>(h.ptr), bytes, s);
    be->synchronize_stream(s);
    const double y = seconds_since(t0);
    d2h += x;
    h2d += y;
    st.SetIterationTime(x + y);
  }
  const double n = static_cast<double>(st.iterations());
  st.counters["to_host_GBps"] = static_cast<double>(bytes) * n / d2h / 1e9;
  st.counters["to_device_GBps"] = static_cast<double>(bytes) * n / h2d / 1e9;
  st.SetBytesProcessed(static_cast<std::int64_t>(2 * bytes) * st.iterations());
  be->destroy_stream(s);
  pinned_free(*be, h);
  a.deallocate(d);
}
BENCHMARK(BM_PinnedCopy)->Arg(32)->Arg(128)->Arg(512)->Arg(2048)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.3);

void BM_Checksum(benchmark::State& st, Residence where) {
  VmmBackend* be = backends().cuda.get();
  if (!be) {
    st.SkipWithError(backends().why.c_str());
    return;
  }
  const std::size_t bytes = static_cast<std::size_t>(st.range(0)) * MiB;
  const std::uintptr_t va = be->reserve(bytes);
  const PhysHandle h = be->create(where, bytes);
  be->map(va, h);
  std::uint64_t* words = be->host_words(kChecksumWords);
  const StreamHandle s = be->create_stream();
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    be->checksum_async(va, bytes, static_cast<std::size_t>(st.range(1)) * 1024, words, s);
    be->synchronize_stream(s);
    st.SetIterationTime(seconds_since(t0));
  }
  st.SetBytesProcessed(static_cast<std::int64_t>(bytes) * st.iterations());
  be->destroy_stream(s);
  be->unmap(va, bytes);
  be->release(h);
  be->unreserve(va, bytes);
}
// Second argument: sample stride in KiB (0: every byte; 1024: 64 KiB of every MiB, Verify::sampled).
BENCHMARK_CAPTURE(BM_Checksum, device, Residence::device)->ArgsProduct({{64, 512}, {0, 1024}})->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
BENCHMARK_CAPTURE(BM_Checksum, host, Residence::host)->ArgsProduct({{64, 512}, {0, 1024}})->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);

void BM_RemapParts(benchmark::State& st) {
  VmmBackend* be = backends().cuda.get();
  if (!be) {
    st.SkipWithError(backends().why.c_str());
    return;
  }
  const std::size_t total = 1024 * MiB, chunk = static_cast<std::size_t>(st.range(0)) * MiB;
  const Residence where = st.range(1) ? Residence::host : Residence::device;
  const bool batched = st.range(2) != 0, busy = st.range(3) != 0;
  const std::size_t piece = st.range(3) == 2 ? 4 * MiB : 256 * MiB;  // busy 2: copies issued in 4 MiB pieces
  const int threads = static_cast<int>(st.range(4));
  const std::uintptr_t va = be->reserve(total);
  std::vector<PhysHandle> hs;
  for (std::size_t off = 0; off < total; off += chunk) {
    hs.push_back(be->create(where, chunk));
    be->map(va + off, hs.back());
  }
  // Copies both ways while the driver remaps, as the movers run during training.
  constexpr std::size_t kCopy = 256 * MiB;
  std::uintptr_t dva = 0;
  PhysHandle dh;
  PinnedBuffer pin;
  StreamHandle up = 0, down = 0;
  if (busy) {
    dva = be->reserve(kCopy);
    dh = be->create(Residence::device, kCopy);
    be->map(dva, dh);
    pin = pinned_alloc(*be, 2 * kCopy);
    up = be->create_stream();
    down = be->create_stream();
  }
  RemapParts sum;
  for (auto _ : st) {
    if (busy) {
      const auto h = reinterpret_cast<std::uintptr_t>(pin.ptr);
      for (std::size_t off = 0; off < 4 * kCopy; off += piece) {
        be->copy_async(dva + off % kCopy, h + off % kCopy, piece, up);
        be->copy_async(h + kCopy + off % kCopy, dva + off % kCopy, piece, down);
      }
    }
    RemapParts r;
    try {
      r = remap_pass(*be, va, hs, batched, threads);
    } catch (const std::exception& e) {  // a call the driver refuses (left mapped as it is: leaked)
      st.SkipWithError(e.what());
      return;
    }
    st.SetIterationTime(r.unmap_s + r.map_s + r.access_s);
    sum.unmap_s += r.unmap_s;
    sum.map_s += r.map_s;
    sum.access_s += r.access_s;
    if (busy) {
      be->synchronize_stream(up);
      be->synchronize_stream(down);
    }
  }
  const double gib = static_cast<double>(st.iterations()) * static_cast<double>(total) / (1024.0 * MiB);
  st.counters["unmap_ms_per_GiB"] = sum.unmap_s * 1e3 / gib;
  st.counters["map_ms_per_GiB"] = sum.map_s * 1e3 / gib;
  st.counters["access_ms_per_GiB"] = sum.access_s * 1e3 / gib;
  st.counters["remap_ms_per_GiB"] = (sum.unmap_s + sum.map_s + sum.access_s) * 1e3 / gib;
  if (busy) {
    be->destroy_stream(up);
    be->destroy_stream(down);
    pinned_free(*be, pin);
    be->unmap(dva, kCopy);
    be->release(dh);
    be->unreserve(dva, kCopy);
  }
  for (std::size_t i = 0; i < hs.size(); ++i) be->unmap(va + i * chunk, chunk);
  for (const PhysHandle& h : hs) be->release(h);
  be->unreserve(va, total);
}
BENCHMARK(BM_RemapParts)
    ->ArgsProduct({{2, 32, 64, 128, 256}, {0, 1}, {0}, {0, 1}, {1}})
    ->ArgsProduct({{32, 64, 256}, {0, 1}, {1}, {0, 1}, {1}})
    ->ArgsProduct({{64}, {0, 1}, {0, 1}, {1}, {2, 4}})
    ->ArgsProduct({{64, 256}, {0, 1}, {0}, {2}, {1}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.2);

}  // namespace
}  // namespace tierpack::gpu::bench

BENCHMARK_MAIN();

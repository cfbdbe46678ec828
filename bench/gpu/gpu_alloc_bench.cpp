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
//  * BM_RemapBehindCopies/<queued MiB>/<where>/<engine>: remapping 256 MiB right after that much was
//    queued to copy each way (engine 0: copy engines, 1: a copy kernel): what a remap pays for the
//    copies ahead of it.
//  * BM_SmCopy/<blocks>/<dir>: a copy kernel's bandwidth between device and pinned host memory.
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

// Copies both ways on two streams of their own (as the movers' during training), through one
// device buffer and one pinned buffer of kCopy bytes each way; by the copy engines, or with
// `sm_blocks` > 0 by a copy kernel of that many blocks.
class BusyCopies {
 public:
  static constexpr std::size_t kCopy = 256 * MiB;
  explicit BusyCopies(VmmBackend& be, int sm_blocks = 0) : be_(be), sm_blocks_(sm_blocks) {
    dva_ = be_.reserve(kCopy);
    dh_ = be_.create(Residence::device, kCopy);
    be_.map(dva_, dh_);
    pin_ = pinned_alloc(be_, 2 * kCopy);
    up_ = be_.create_stream();
    down_ = be_.create_stream();
  }
  ~BusyCopies() {
    finish();
    be_.destroy_stream(up_);
    be_.destroy_stream(down_);
    pinned_free(be_, pin_);
    be_.unmap(dva_, kCopy);
    be_.release(dh_);
    be_.unreserve(dva_, kCopy);
  }
  BusyCopies(const BusyCopies&) = delete;
  BusyCopies& operator=(const BusyCopies&) = delete;
  /// Queues `bytes` each way as copies of `piece` bytes.
  void queue(std::size_t bytes, std::size_t piece) {
    const auto h = reinterpret_cast<std::uintptr_t>(pin_.ptr);
    for (std::size_t off = 0; off < bytes; off += piece) {
      if (sm_blocks_) {
        sm_copy_async(be_, dva_ + off % kCopy, h + off % kCopy, piece, sm_blocks_, up_);
        sm_copy_async(be_, h + kCopy + off % kCopy, dva_ + off % kCopy, piece, sm_blocks_, down_);
        continue;
      }
      be_.copy_async(dva_ + off % kCopy, h + off % kCopy, piece, up_);
      be_.copy_async(h + kCopy + off % kCopy, dva_ + off % kCopy, piece, down_);
    }
  }
  void finish() {
    be_.synchronize_stream(up_);
    be_.synchronize_stream(down_);
  }

 private:
  VmmBackend& be_;
  int sm_blocks_ = 0;
  std::uintptr_t dva_ = 0;
  PhysHandle dh_;
  PinnedBuffer pin_;
  StreamHandle up_ = 0, down_ = 0;
};

// `total` bytes of chunks of `chunk` bytes on `where`, mapped at one reserved range.
struct MappedChunks {
  VmmBackend& be;
  std::size_t total, chunk;
  std::uintptr_t va = 0;
  std::vector<PhysHandle> hs;
  MappedChunks(VmmBackend& b, std::size_t total_bytes, std::size_t chunk_bytes, Residence where)
      : be(b), total(total_bytes), chunk(chunk_bytes) {
    va = be.reserve(total);
    for (std::size_t off = 0; off < total; off += chunk) {
      hs.push_back(be.create(where, chunk));
      be.map(va + off, hs.back());
    }
  }
  ~MappedChunks() {
    for (std::size_t i = 0; i < hs.size(); ++i) be.unmap(va + i * chunk, chunk);
    for (const PhysHandle& h : hs) be.release(h);
    be.unreserve(va, total);
  }
  MappedChunks(const MappedChunks&) = delete;
  MappedChunks& operator=(const MappedChunks&) = delete;
};

void BM_RemapParts(benchmark::State& st) {
  VmmBackend* be = backends().cuda.get();
  if (!be) {
    st.SkipWithError(backends().why.c_str());
    return;
  }
  const Residence where = st.range(1) ? Residence::host : Residence::device;
  MappedChunks chunks(*be, 1024 * MiB, static_cast<std::size_t>(st.range(0)) * MiB, where);
  const bool batched = st.range(2) != 0, busy = st.range(3) != 0;
  const std::size_t piece = st.range(3) == 2 ? 4 * MiB : 256 * MiB;  // busy 2: copies issued in 4 MiB pieces
  const int threads = static_cast<int>(st.range(4));
  std::unique_ptr<BusyCopies> copies;
  if (busy) copies = std::make_unique<BusyCopies>(*be);
  RemapParts sum;
  for (auto _ : st) {
    if (copies) copies->queue(4 * BusyCopies::kCopy, piece);
    RemapParts r;
    try {
      r = remap_pass(*be, chunks.va, chunks.hs, batched, threads);
    } catch (const std::exception& e) {  // a call the driver refuses (left mapped as it is: leaked)
      st.SkipWithError(e.what());
      chunks.hs.clear();
      return;
    }
    st.SetIterationTime(r.unmap_s + r.map_s + r.access_s);
    sum.unmap_s += r.unmap_s;
    sum.map_s += r.map_s;
    sum.access_s += r.access_s;
    if (copies) copies->finish();
  }
  const double gib = static_cast<double>(st.iterations()) * static_cast<double>(chunks.total) / (1024.0 * MiB);
  st.counters["unmap_ms_per_GiB"] = sum.unmap_s * 1e3 / gib;
  st.counters["map_ms_per_GiB"] = sum.map_s * 1e3 / gib;
  st.counters["access_ms_per_GiB"] = sum.access_s * 1e3 / gib;
  st.counters["remap_ms_per_GiB"] = (sum.unmap_s + sum.map_s + sum.access_s) * 1e3 / gib;
}
BENCHMARK(BM_RemapParts)
    ->ArgsProduct({{2, 32, 64, 128, 256}, {0, 1}, {0}, {0, 1}, {1}})
    ->ArgsProduct({{32, 64, 256}, {0, 1}, {1}, {0, 1}, {1}})
    ->ArgsProduct({{64}, {0, 1}, {0, 1}, {1}, {2, 4}})
    ->ArgsProduct({{64, 256}, {0, 1}, {0}, {2}, {1}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.2);

// Whether a remap pays for the copies queued when it starts (Note [When to remap] in
// migrate/gpu/group_mover.hpp): 256 MiB of 64 MiB chunks remapped right after `queued` MiB were
// queued each way in 64 MiB copies, by the copy engines (engine 0) or by a copy kernel of 32 blocks
// (engine 1). `queued_ms` is what those copies take at 55 GB/s.
void BM_RemapBehindCopies(benchmark::State& st) {
  VmmBackend* be = backends().cuda.get();
  if (!be) {
    st.SkipWithError(backends().why.c_str());
    return;
  }
  const std::size_t queued = static_cast<std::size_t>(st.range(0)) * MiB;
  MappedChunks chunks(*be, 256 * MiB, 64 * MiB, st.range(1) ? Residence::host : Residence::device);
  BusyCopies copies(*be, st.range(2) ? 32 : 0);
  for (auto _ : st) {
    if (queued) copies.queue(queued, std::min<std::size_t>(queued, 64 * MiB));
    RemapParts r;
    try {
      r = remap_pass(*be, chunks.va, chunks.hs, false, 1);
    } catch (const std::exception& e) {
      st.SkipWithError(e.what());
      chunks.hs.clear();
      return;
    }
    st.SetIterationTime(r.unmap_s + r.map_s + r.access_s);
    copies.finish();
  }
  st.counters["queued_ms"] = static_cast<double>(queued) / 55e9 * 1e3;
}
BENCHMARK(BM_RemapBehindCopies)
    ->ArgsProduct({{0, 16, 64, 256, 1024, 4096}, {0, 1}, {0}})
    ->ArgsProduct({{64, 1024}, {0, 1}, {1}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.2);

// A copy kernel of <blocks> blocks moving 256 MiB between device memory and pinned host memory
// (<dir> 0: host to device, 1: device to host): the link bandwidth a few SMs reach without the copy
// engines.
void BM_SmCopy(benchmark::State& st) {
  VmmBackend* be = backends().cuda.get();
  if (!be) {
    st.SkipWithError(backends().why.c_str());
    return;
  }
  const std::size_t bytes = 256 * MiB;
  const int blocks = static_cast<int>(st.range(0));
  MappedChunks dev(*be, bytes, bytes, Residence::device);
  PinnedBuffer h = pinned_alloc(*be, bytes);
  const StreamHandle s = be->create_stream();
  const auto hp = reinterpret_cast<std::uintptr_t>(h.ptr);
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    if (st.range(1) == 0) sm_copy_async(*be, dev.va, hp, bytes, blocks, s);
    else sm_copy_async(*be, hp, dev.va, bytes, blocks, s);
    be->synchronize_stream(s);
    st.SetIterationTime(seconds_since(t0));
  }
  st.SetBytesProcessed(static_cast<std::int64_t>(bytes) * st.iterations());
  be->destroy_stream(s);
  pinned_free(*be, h);
}
BENCHMARK(BM_SmCopy)->ArgsProduct({{4, 8, 16, 32, 64, 132}, {0, 1}})->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.2);

}  // namespace
}  // namespace tierpack::gpu::bench

BENCHMARK_MAIN();

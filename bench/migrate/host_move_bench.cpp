// Page-group migration throughput between NUMA nodes by group size: 4 KiB pages (arena without THP,
// every base page passed to move_pages) vs 2 MiB THP (THP arena, one address per huge page plus a
// check of the base pages), and mbind(MPOL_MF_MOVE) per group. Needs two nodes; on this project's
// machines that is the QEMU guest, where the figures are EMULATED (TCG; both nodes have the same
// real speed): scripts/numa-guest.sh -- build/bench/migrate/bench_host_move
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>

#include "migrate/host/host_mover.hpp"

namespace tierpack::host {
namespace {

Topology two_nodes() {
  Topology t;
  Tier a;
  a.name = "dram0";
  a.numa_node = 0;
  t.add(a);
  Tier b;
  b.name = "cxl1";
  b.kind = TierKind::far_memory;
  b.numa_node = system_os().node_count() >= 2 ? 1 : 0;
  t.add(b);
  return t;
}

void run(benchmark::State& s, bool huge, MoverOptions::Method method) {
  if (system_os().node_count() < 2) {
    s.SkipWithError("needs two NUMA nodes (run it in scripts/numa-guest.sh)");
    return;
  }
  const auto bytes = static_cast<std::size_t>(s.range(0));
  HostAllocatorOptions o;
  o.huge_pages = huge;
  HostArenaAllocator alloc(two_nodes(), o);
  HostMover mover(alloc, {.method = method, .huge_page_stride = huge, .worker = false});
  void* p = alloc.allocate(bytes, TensorClass::activation, 0, {0, 1});
  std::memset(p, 1, bytes);
  TierId to = 1;
  std::uint64_t moved = 0;
  for (auto _ : s) {
    MoveResult r = mover.move_now(1, to, MoveKind::evict);
    moved += r.counters.pages_moved * system_os().page_size();
    if (!r.complete) s.SkipWithError(r.counters.summary().c_str());
    to = to == 1 ? 0 : 1;
  }
  s.SetBytesProcessed(static_cast<std::int64_t>(moved));
  s.SetLabel(std::getenv("TIERPACK_IN_GUEST") ? "emulated (QEMU TCG guest)" : "real");
  alloc.deallocate(p);
}

void sizes(benchmark::internal::Benchmark* b) {
  for (long n : {2L << 20, 8L << 20, 32L << 20}) b->Arg(n);
  b->Unit(benchmark::kMillisecond);
}

void BM_MovePages4K(benchmark::State& s) { run(s, false, MoverOptions::Method::move_pages); }
void BM_MovePagesTHP(benchmark::State& s) { run(s, true, MoverOptions::Method::move_pages); }
void BM_Mbind4K(benchmark::State& s) { run(s, false, MoverOptions::Method::mbind); }
BENCHMARK(BM_MovePages4K)->Apply(sizes);
BENCHMARK(BM_MovePagesTHP)->Apply(sizes);
BENCHMARK(BM_Mbind4K)->Apply(sizes);

}  // namespace
}  // namespace tierpack::host

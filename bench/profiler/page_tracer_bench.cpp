// What page tracing costs per touched page, against the same loop untraced.
//   Untraced/<pages>/<stride>          write one byte in each of <pages> pages, <stride> pages apart
//   UntracedFault/<pages>/<stride>     same loop after MADV_DONTNEED: one plain kernel page fault per
//                                      page (the machine's baseline fault cost, to compare with)
//   Mprotect/<pages>/<stride>          same loop traced by mprotect: one SIGSEGV per page + end_window
//   UffdWp/<pages>/<stride>            same loop traced by uffd-wp: in-kernel WP_ASYNC faults + end_window
//   MprotectWindowEnd/<pages>/<stride> only end_window (drain + re-arm) after <pages> faulted pages
//   UffdWpScan/<pages>/<stride>        only end_window (one PAGEMAP_SCAN + re-arm) after <pages> writes
// items_per_second = touched pages per second (for the *WindowEnd/*Scan rows: pages reported per
// second of end_window). Each range is <pages> * <stride> pages of anonymous memory.
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include <benchmark/benchmark.h>

#include "platform/host_os.hpp"
#include "profiler/detail/page_tracer_backends.hpp"
#include "profiler/page_tracer.hpp"

using namespace tierpack;

namespace {

struct Region {
  explicit Region(std::size_t pages) : page(detail::host_page_size()), bytes(pages * page) {
    void* p = nullptr;
    if (host::system_os().map(bytes, &p) != 0) throw std::runtime_error("map");
    base = static_cast<char*>(p);
    host::system_os().advise_huge(base, bytes, false);
    for (std::size_t off = 0; off < bytes; off += page) base[off] = 1;  // populate: measure tracing, not first-touch
  }
  ~Region() { host::system_os().unmap(base, bytes); }
  std::size_t page, bytes;
  char* base;
};

void touch(const Region& r, std::size_t pages, std::size_t stride, char v) {
  for (std::size_t i = 0; i < pages; ++i) *static_cast<volatile char*>(r.base + i * stride * r.page) = v;
}

std::unique_ptr<PageTracer> make(const char* kind, benchmark::State& state) {
  if (std::string_view(kind) == "uffd-wp") {
    const auto s = detail::probe_uffd_wp();
    if (!s.available) {
      state.SkipWithError(("uffd-wp unavailable: " + s.why).c_str());
      return nullptr;
    }
    return detail::make_uffd_wp_tracer();
  }
  return detail::make_mprotect_tracer();
}

void Untraced(benchmark::State& state) {
  const auto pages = static_cast<std::size_t>(state.range(0)), stride = static_cast<std::size_t>(state.range(1));
  Region r(pages * stride);
  char v = 0;
  for (auto _ : state) touch(r, pages, stride, ++v);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * pages));
}

/// The loop with a zero-fill page fault per page (timed by hand; the madvise is not timed).
void UntracedFault(benchmark::State& state) {
  const auto pages = static_cast<std::size_t>(state.range(0)), stride = static_cast<std::size_t>(state.range(1));
  Region r(pages * stride);
  char v = 0;
  for (auto _ : state) {
    host::system_os().purge(r.base, r.bytes, false);  // MADV_DONTNEED
    const auto start = std::chrono::steady_clock::now();
    touch(r, pages, stride, ++v);
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * pages));
}

/// Touch + end_window per iteration: the whole cost of tracing one window; `window_end_only`: only end_window,
/// timed by hand after an untimed touch loop.
void Traced(benchmark::State& state, const char* kind, bool window_end_only) {
  const auto pages = static_cast<std::size_t>(state.range(0)), stride = static_cast<std::size_t>(state.range(1));
  Region r(pages * stride);
  auto t = make(kind, state);
  if (!t) return;
  t->track(r.base, r.bytes);
  std::vector<PageTouch> out;
  out.reserve(pages);
  char v = 0;
  for (auto _ : state) {
    touch(r, pages, stride, ++v);
    out.clear();
    const auto start = std::chrono::steady_clock::now();
    t->end_window(out);
    if (window_end_only)
      state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  if (out.size() != pages) state.SkipWithError("tracer reported a different number of pages");
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * pages));
  state.counters["dropped"] = static_cast<double>(t->stats().dropped);
}

void Args(benchmark::internal::Benchmark* b) {
  for (std::int64_t pages : {64, 1024, 16384}) {
    b->Args({pages, 1});  // contiguous
    b->Args({pages, 4});  // sparse: every 4th page
  }
}

}  // namespace

BENCHMARK(Untraced)->Apply(Args);
BENCHMARK(UntracedFault)->Apply(Args)->UseManualTime();
BENCHMARK_CAPTURE(Traced, Mprotect, "mprotect", false)->Name("Mprotect")->Apply(Args);
BENCHMARK_CAPTURE(Traced, UffdWp, "uffd-wp", false)->Name("UffdWp")->Apply(Args);
BENCHMARK_CAPTURE(Traced, MprotectWindowEnd, "mprotect", true)->Name("MprotectWindowEnd")->Apply(Args)->UseManualTime();
BENCHMARK_CAPTURE(Traced, UffdWpScan, "uffd-wp", true)->Name("UffdWpScan")->Apply(Args)->UseManualTime();

BENCHMARK_MAIN();

// HostArena alignment: every block is aligned to ArenaSpec::alignment although small and most large
// requests go to jemalloc without MALLOCX_ALIGN (Note [Alignment without MALLOCX_ALIGN]), and the
// size class jemalloc really gave each block is the one usable_size() reports, which is what makes
// sdallocx with the request size safe.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <set>
#include <utility>

#include "alloc/host/host_arena.hpp"

namespace tierpack::host {
namespace {

// 1..4096 every size, then a stride of 61 up to 70000, plus every jemalloc size class boundary
// (c - 1, c, c + 1) and every multiple of the alignment +-1 below 20000.
std::set<std::size_t> request_sizes(std::size_t alignment, std::size_t limit) {
  std::set<std::size_t> out;
  for (std::size_t n = 1; n <= 4096; ++n) out.insert(n);
  for (std::size_t n = 4097; n <= limit; n += 61) out.insert(n);
  for (std::size_t n = 1; n <= limit;) {
    const std::size_t c = tierpack::platform::jemalloc::nallocx(n, 0);
    for (std::size_t m : {c - 1, c, c + 1}) {
      if (m >= 1 && m <= limit) out.insert(m);
    }
    n = c + 1;
  }
  for (std::size_t r = alignment; r <= 20000; r += alignment) {
    out.insert(r - 1);
    out.insert(r);
    out.insert(r + 1);
  }
  out.insert(0);
  return out;
}

struct Case {
  std::size_t alignment;
  bool huge_pages;
  bool thread_caches;
};

class HostArenaAlignment : public ::testing::TestWithParam<Case> {};

TEST_P(HostArenaAlignment, EveryBlockIsAlignedAndHasTheReportedSizeClass) {
  const Case c = GetParam();
  ArenaSpec spec{TensorClass::activation, 0, 0};
  spec.alignment = c.alignment;
  spec.huge_pages = c.huge_pages;
  spec.thread_caches = c.thread_caches;
  HostArena arena(system_os(), spec, nullptr);
  // The fast path is in use for small blocks at least (the point of the exercise): a jemalloc whose
  // size classes failed the check would still be correct, only slower, and should be looked at.
  EXPECT_GE(arena.unflagged_max(), 4096u);

  std::set<std::size_t> sizes = request_sizes(c.alignment, 70000);
  if (c.huge_pages) {
    for (std::size_t n : {HostArena::kHugePage - 1, HostArena::kHugePage, HostArena::kHugePage + 1,
                          3 * HostArena::kHugePage + 4097}) {
      sizes.insert(n);
    }
  }
  // Keep a window of live blocks, so that blocks come from fresh slab regions and extents as well
  // as straight back from the cache.
  std::deque<std::pair<unsigned char*, std::size_t>> live;
  std::size_t checked = 0;
  for (std::size_t n : sizes) {
    auto* p = static_cast<unsigned char*>(arena.allocate(n));
    ASSERT_NE(p, nullptr) << n << " bytes";
    const auto addr = reinterpret_cast<std::uintptr_t>(p);
    const std::size_t want = c.huge_pages && n >= HostArena::kHugePage ? HostArena::kHugePage : c.alignment;
    ASSERT_EQ(addr % want, 0u) << n << " bytes at " << p << " not aligned to " << want;
    const std::size_t usable = arena.usable_size(n);
    ASSERT_GE(usable, n == 0 ? 1 : n) << n << " bytes";
    // What jemalloc really reserved: the size sdallocx must be consistent with.
    ASSERT_EQ(tierpack::platform::jemalloc::sallocx(p, 0), usable) << n << " bytes";
    unsigned ind = 0;
    std::size_t sz = sizeof(ind);
    ASSERT_EQ(tierpack::platform::jemalloc::mallctl("arenas.lookup", &ind, &sz, &p, sizeof(p)), 0);
    ASSERT_EQ(ind, arena.index()) << n << " bytes";
    p[0] = 1;
    p[usable - 1] = 2;
    live.emplace_back(p, n);
    if (live.size() > 64) {
      arena.deallocate(live.front().first, live.front().second);
      live.pop_front();
    }
    ++checked;
  }
  for (auto [p, n] : live) arena.deallocate(p, n);
  EXPECT_GT(checked, 5000u);
  EXPECT_EQ(arena.realigned(), 0u) << "jemalloc handed out misaligned blocks without MALLOCX_ALIGN";

  // Freed blocks were given back with the right size: allocating them again finds them sound.
  for (std::size_t n : {1u, 64u, 100u, 4096u, 20000u}) {
    void* p = arena.allocate(n);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % c.alignment, 0u);
    EXPECT_EQ(tierpack::platform::jemalloc::sallocx(p, 0), arena.usable_size(n));
    arena.deallocate(p, n);
  }
}

INSTANTIATE_TEST_SUITE_P(Alignments, HostArenaAlignment,
                         ::testing::Values(Case{16, false, true}, Case{64, false, true}, Case{128, false, true},
                                           Case{4096, false, true}, Case{64, true, true}, Case{64, false, false}),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           return "align" + std::to_string(p.param.alignment) +
                                  (p.param.huge_pages ? "_huge" : "") +
                                  (p.param.thread_caches ? "" : "_nocache");
                         });

}  // namespace
}  // namespace tierpack::host

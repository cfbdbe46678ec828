// HostArena: jemalloc arena creation, extent hooks that mbind to the node, the extent observer,
// hook failures reported as a null block (never a crash).
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "alloc/host/host_arena.hpp"
#include "platform/fault_injecting_os.hpp"

namespace tierpack::host {
namespace {

struct RecordingObserver final : ExtentObserver {
  std::mutex mu;
  std::vector<ExtentEvent> mapped, unmapped;
  void on_extent_mapped(const ExtentEvent& e) noexcept override {
    std::lock_guard lock(mu);
    mapped.push_back(e);
  }
  void on_extent_unmapped(const ExtentEvent& e) noexcept override {
    std::lock_guard lock(mu);
    unmapped.push_back(e);
  }
  std::size_t total(const std::vector<ExtentEvent>& v) {
    std::lock_guard lock(mu);
    std::size_t n = 0;
    for (const auto& e : v) n += e.bytes;
    return n;
  }
};

bool inside(const std::vector<std::pair<void*, std::size_t>>& extents, const void* p, std::size_t n) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  for (const auto& [s, len] : extents) {
    const auto b = reinterpret_cast<std::uintptr_t>(s);
    if (a >= b && a + n <= b + len) return true;
  }
  return false;
}

TEST(HostArena, CreatesDistinctArenasAndServesBlocksFromTheirExtents) {
  HostArena a(system_os(), ArenaSpec{TensorClass::activation, 0, 0}, nullptr);
  HostArena b(system_os(), ArenaSpec{TensorClass::persistent, 0, 0}, nullptr);
  EXPECT_NE(a.index(), b.index());
  EXPECT_NE(a.index(), 0u) << "never the automatic arena";
  std::vector<void*> blocks;
  for (std::size_t n : {1u, 24u, 4096u, 100000u, 3u << 20}) {
    void* p = a.allocate(n);
    ASSERT_NE(p, nullptr);
    std::memset(p, 0xab, n);
    EXPECT_TRUE(inside(a.extents(), p, n)) << n << " bytes not inside the arena's extents";
    EXPECT_FALSE(inside(b.extents(), p, 1));
    unsigned ind = 0;
    std::size_t sz = sizeof(ind);
    ASSERT_EQ(tierpack::platform::jemalloc::mallctl("arenas.lookup", &ind, &sz, &p, sizeof(p)), 0);
    EXPECT_EQ(ind, a.index());
    blocks.push_back(p);
    EXPECT_GE(a.usable_size(n), n);
  }
  std::size_t i = 0;
  for (std::size_t n : {1u, 24u, 4096u, 100000u, 3u << 20}) a.deallocate(blocks[i++], n);
  EXPECT_GT(a.mapped_bytes(), 0u);
}

TEST(HostArena, ExtentsAreBoundToTheNodeBeforeFirstTouch) {
  for (BindMode mode : {BindMode::preferred, BindMode::strict}) {
    HostArena a(system_os(), ArenaSpec{TensorClass::iteration, 0, 0, mode}, nullptr);
    const std::size_t n = 1u << 20;
    char* p = static_cast<char*>(a.allocate(n));
    ASSERT_NE(p, nullptr);
    int pmode = -1, node = -1;
    ASSERT_EQ(system_os().policy_of(p, &pmode, &node), 0);
    EXPECT_EQ(node, 0);
    EXPECT_EQ(pmode, mode == BindMode::strict ? 2 /*MPOL_BIND*/ : 1 /*MPOL_PREFERRED*/);
    std::memset(p, 1, n);
    std::vector<void*> pages;
    for (std::size_t off = 0; off < n; off += system_os().page_size()) pages.push_back(p + off);
    std::vector<int> status(pages.size(), -1);
    ASSERT_EQ(system_os().move_pages(pages, {}, status), 0);
    for (std::size_t k = 0; k < status.size(); ++k) ASSERT_EQ(status[k], 0) << "page " << k;
    a.deallocate(p, n);
  }
}

TEST(HostArena, ObserverSeesEveryExtentMappedAndUnmapped) {
  RecordingObserver obs;
  std::vector<void*> blocks;
  {
    HostArena a(system_os(), ArenaSpec{TensorClass::temporary, 3, 0}, &obs);
    for (int i = 0; i < 8; ++i) blocks.push_back(a.allocate(5u << 20));
    std::lock_guard lock(obs.mu);
    ASSERT_FALSE(obs.mapped.empty());
    for (const auto& e : obs.mapped) {
      EXPECT_EQ(e.cls, TensorClass::temporary);
      EXPECT_EQ(e.tier, 3);
      EXPECT_EQ(e.node, 0);
    }
    std::vector<std::pair<void*, std::size_t>> seen;
    for (const auto& e : obs.mapped) seen.emplace_back(e.addr, e.bytes);
    for (void* p : blocks) EXPECT_TRUE(inside(seen, p, 5u << 20));
  }
  // Destroying the arena gives every extent back.
  EXPECT_EQ(obs.total(obs.mapped), obs.total(obs.unmapped));
}

TEST(HostArena, HookFailureGivesNullAndTheArenaRecovers) {
  FaultInjectingOs os(system_os());
  HostArena a(os, ArenaSpec{TensorClass::activation, 0, 0}, nullptr);
  os.fail_next(OsCall::map, ENOMEM, 1000);
  EXPECT_EQ(a.allocate(64u << 20), nullptr);
  EXPECT_EQ(a.last_hook_error(), ENOMEM);
  os.clear();
  os.fail_next(OsCall::bind, EIO, 1000);
  EXPECT_EQ(a.allocate(64u << 20), nullptr) << "an extent that cannot be bound is not used";
  EXPECT_EQ(a.last_hook_error(), EIO);
  os.clear();
  void* p = a.allocate(64u << 20);
  ASSERT_NE(p, nullptr);
  static_cast<char*>(p)[0] = 1;
  a.deallocate(p, 64u << 20);
  EXPECT_GT(a.hook_failures(), 0u);
}

TEST(HostArena, HugePageArenaAlignsLargeBlocks) {
  HostArena a(system_os(), ArenaSpec{TensorClass::persistent, 0, 0, BindMode::preferred, true}, nullptr);
  void* p = a.allocate(6u << 20);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % HostArena::kHugePage, 0u);
  a.deallocate(p, 6u << 20);
}

// A thread_local whose destructor frees blocks. Touched before the thread's first allocation, it is
// registered before the thread's arena caches and so destroyed after them.
struct FreesAtThreadExit {
  HostArena* arena = nullptr;
  std::vector<std::pair<void*, std::size_t>> blocks;
  ~FreesAtThreadExit() {
    for (auto [p, n] : blocks) arena->deallocate(p, n);
  }
};
thread_local FreesAtThreadExit frees_at_exit;

TEST(HostArena, BlocksFreedAfterTheThreadsCachesAreGoneGoToTheArena) {
  HostArena a(system_os(), ArenaSpec{TensorClass::activation, 0, 0}, nullptr);
  for (int round = 0; round < 3; ++round) {
    std::thread t([&] {
      frees_at_exit.arena = &a;
      for (std::size_t n : {64u, 4096u, 20000u}) {
        frees_at_exit.blocks.emplace_back(a.allocate(n), n);
        ASSERT_NE(frees_at_exit.blocks.back().first, nullptr);
      }
    });
    t.join();  // its caches are destroyed, then frees_at_exit frees: without a cache, not a dead one
  }
  // Caches made afterwards (which may reuse the destroyed ids) work.
  std::thread u([&] {
    for (int i = 0; i < 100; ++i) {
      void* p = a.allocate(64);
      ASSERT_NE(p, nullptr);
      a.deallocate(p, 64);
    }
  });
  u.join();
}

}  // namespace
}  // namespace tierpack::host

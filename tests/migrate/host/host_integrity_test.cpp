// Data integrity under migration (issue 9, guarantee 1): >= 10^4 random group migrations while
// other threads rewrite other groups (some of which share pages with the moving one), with random
// injected per-page failures; every group's checksum must match before and after every move.
// Seeded; the seed is printed on failure (TIERPACK_SEED=N replays, TIERPACK_MIGRATIONS=N resizes).
// On two NUMA nodes (the guest) the moves are real and complete moves are checked page by page.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "migrate/host/host_mover.hpp"
#include "platform/fault_injecting_os.hpp"
#include "tests/migrate/host/host_test_util.hpp"

namespace tierpack::host {
namespace {

using testing::checksum;

std::uint64_t env_or(const char* name, std::uint64_t dflt) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::strtoull(v, nullptr, 10) : dflt;
}

struct Group {
  std::vector<std::pair<unsigned char*, std::size_t>> blocks;
  std::vector<std::uint64_t> sums;
  std::atomic<int> state{0};  // 0 idle, 1 being written, 2 being moved
};

TEST(HostMigrationIntegrity, RandomMigrationsWithConcurrentWritersKeepEveryByte) {
  const std::uint64_t seed = env_or("TIERPACK_SEED", std::random_device{}());
  const std::uint64_t migrations = env_or("TIERPACK_MIGRATIONS", 10000);
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay with TIERPACK_SEED=" + std::to_string(seed) + ")");
  std::mt19937_64 rng(seed);

  FaultInjectingOs os(system_os());
  HostAllocatorOptions ao;
  ao.os = &os;
  HostArenaAllocator alloc(testing::fast_and_far(), ao);
  HostMover mover(alloc, {.max_retries = 2, .worker = false});
  const bool two_nodes = alloc.node_of(0) != alloc.node_of(1);

  constexpr int kGroups = 24;
  std::vector<Group> groups(kGroups);
  for (int g = 0; g < kGroups; ++g) {
    const int n = 1 + static_cast<int>(rng() % 3);
    for (int b = 0; b < n; ++b) {
      const std::size_t bytes = 512 + rng() % (20u << 10);
      const auto cls = static_cast<TensorClass>(g % 2);  // groups of a class share slab pages
      auto* p = static_cast<unsigned char*>(alloc.allocate(bytes, cls, 0, {b, static_cast<GroupId>(g)}));
      for (std::size_t i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(rng());
      groups[g].blocks.emplace_back(p, bytes);
      groups[g].sums.push_back(checksum(p, bytes));
    }
  }

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> writes{0};
  auto writer = [&](std::uint64_t wseed) {
    std::mt19937_64 wr(wseed);
    while (!stop.load(std::memory_order_relaxed)) {
      Group& g = groups[wr() % kGroups];
      int idle = 0;
      if (!g.state.compare_exchange_strong(idle, 1)) continue;
      for (std::size_t b = 0; b < g.blocks.size(); ++b) {
        auto [p, n] = g.blocks[b];
        const auto v = static_cast<unsigned char>(wr());
        for (std::size_t i = 0; i < n; i += 1 + wr() % 64) p[i] = static_cast<unsigned char>(v + i);
        g.sums[b] = checksum(p, n);
      }
      g.state.store(0);
      writes.fetch_add(1, std::memory_order_relaxed);
      // Leave the (few, maybe emulated) cores to the mover now and then.
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  };
  std::thread w1(writer, seed + 1), w2(writer, seed + 2);

  std::uint64_t bad = 0, complete = 0, partial = 0, node_checked = 0, misplaced = 0;
  for (std::uint64_t m = 0; m < migrations && bad == 0; ++m) {
    const int gi = static_cast<int>(rng() % kGroups);
    Group& g = groups[gi];
    int idle = 0;
    if (!g.state.compare_exchange_strong(idle, 2)) {
      --m;  // busy with a writer: pick another
      continue;
    }
    for (std::size_t b = 0; b < g.blocks.size(); ++b) bad += checksum(g.blocks[b].first, g.blocks[b].second) != g.sums[b];
    // Now and then a page of the group refuses to move.
    if (rng() % 8 == 0) {
      static constexpr int kErrs[] = {-EBUSY, -EACCES, -ENOMEM, -EIO};
      auto [p, n] = g.blocks[rng() % g.blocks.size()];
      os.fail_page(p + rng() % n, kErrs[rng() % 4], 1 + static_cast<int>(rng() % 3));
    }
    const auto to = static_cast<TierId>(rng() % 2);
    MoveResult r = mover.move_now(static_cast<GroupId>(gi), to, to == 0 ? MoveKind::prefetch : MoveKind::evict);
    os.clear();
    (r.complete ? complete : partial) += 1;
    for (std::size_t b = 0; b < g.blocks.size(); ++b) bad += checksum(g.blocks[b].first, g.blocks[b].second) != g.sums[b];
    if (two_nodes && r.complete && m % 16 == 0) {
      // Whole pages of the group's blocks are on the target now (edge pages may be shared with a
      // group that moved later in this same check window, so only interior pages are counted).
      for (auto [p, n] : g.blocks) {
        const std::uintptr_t page = os.page_size();
        const std::uintptr_t first = (reinterpret_cast<std::uintptr_t>(p) + page - 1) & ~(page - 1);
        const std::uintptr_t last = (reinterpret_cast<std::uintptr_t>(p) + n) & ~(page - 1);
        if (last <= first) continue;
        auto [on, off] = testing::pages_on(reinterpret_cast<void*>(first), last - first, alloc.node_of(to));
        node_checked += on + off;
        misplaced += off;
      }
    }
    g.state.store(0);
  }
  stop = true;
  w1.join();
  w2.join();
  for (auto& g : groups) {
    for (std::size_t b = 0; b < g.blocks.size(); ++b) bad += checksum(g.blocks[b].first, g.blocks[b].second) != g.sums[b];
    for (auto [p, n] : g.blocks) alloc.deallocate(p);
  }
  EXPECT_EQ(bad, 0u) << "blocks whose checksum changed across a migration";
  EXPECT_EQ(misplaced, 0u) << "pages of completely moved groups not on the target node (of " << node_checked << ")";
  EXPECT_GT(complete, migrations / 2);
  EXPECT_GT(partial, 0u) << "injected failures must show up as partial moves";
  EXPECT_GT(writes.load(), 0u);
  const MoveCounters c = mover.counters();
  std::printf("integrity: %llu migrations (%llu complete, %llu partial), %llu writes, %s nodes, %s\n",
              static_cast<unsigned long long>(migrations), static_cast<unsigned long long>(complete),
              static_cast<unsigned long long>(partial), static_cast<unsigned long long>(writes.load()),
              two_nodes ? "two" : "one", c.summary().c_str());
}

}  // namespace
}  // namespace tierpack::host

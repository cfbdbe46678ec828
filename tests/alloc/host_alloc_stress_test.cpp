// Allocator stress after mimalloc's test-stress: several threads allocate random sizes from 1 B to
// 64 MiB in random classes and tiers, write a pattern derived from the block's identity, hand some
// blocks to other threads to free, and check the pattern at every free. Sized to run in a few
// seconds; TIERPACK_STRESS_SCALE=N multiplies the rounds.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "alloc/host/host_arena_allocator.hpp"

namespace tierpack::host {
namespace {

struct Block {
  std::uint8_t* p = nullptr;
  std::size_t n = 0;
  std::uint64_t key = 0;
};

std::uint8_t pattern(std::uint64_t key, std::size_t i) { return static_cast<std::uint8_t>((key * 131 + i * 7) >> 3); }

// Whole blocks up to 256 KiB; larger ones at every 4 KiB plus both ends (a full check of 64 MiB
// blocks would turn a stress test into a memset benchmark).
template <class F>
void for_checked_bytes(std::size_t n, F&& f) {
  if (n <= (256u << 10)) {
    for (std::size_t i = 0; i < n; ++i) f(i);
    return;
  }
  for (std::size_t i = 0; i < 256; ++i) f(i);
  for (std::size_t i = 4096; i < n; i += 4096) f(i);
  for (std::size_t i = n - 256; i < n; ++i) f(i);
}

std::size_t random_size(std::mt19937_64& rng) {
  // Mostly small, as in mimalloc's stress: 1 B..4 KiB 90%, ..1 MiB 9.75%, ..64 MiB 0.25%.
  const unsigned r = rng() % 400;
  const std::size_t cap = r < 360 ? 4096 : r < 399 ? (1u << 20) : (64u << 20);
  return 1 + rng() % cap;
}

TEST(HostAllocStress, ThreadsRandomSizesCrossThreadFreesPatternChecked) {
  Topology topo;
  for (const char* name : {"dram0", "cxl0"}) {
    Tier t;
    t.name = name;
    t.numa_node = 0;
    topo.add(t);
  }
  HostArenaAllocator alloc(topo);
  const int scale = std::getenv("TIERPACK_STRESS_SCALE") ? std::atoi(std::getenv("TIERPACK_STRESS_SCALE")) : 1;
  const int threads = 4;
  const int rounds = 2500 * std::max(scale, 1);
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));

  std::mutex handoff_mu;
  std::vector<Block> handoff;  // blocks allocated by one thread, freed by another
  std::atomic<std::uint64_t> bad{0}, allocated{0}, cross_frees{0};

  auto check_and_free = [&](const Block& b) {
    for_checked_bytes(b.n, [&](std::size_t i) {
      if (b.p[i] != pattern(b.key, i)) bad.fetch_add(1);
    });
    alloc.deallocate(b.p);
  };

  auto worker = [&](int id) {
    std::mt19937_64 rng(seed + id);
    std::vector<Block> slots(48);
    for (int r = 0; r < rounds; ++r) {
      Block& s = slots[rng() % slots.size()];
      if (s.p != nullptr) {
        if (rng() % 4 == 0) {
          std::lock_guard lock(handoff_mu);
          handoff.push_back(s);
        } else {
          check_and_free(s);
        }
        s = Block{};
        continue;
      }
      const std::size_t n = random_size(rng);
      const auto cls = static_cast<TensorClass>(rng() % kTensorClassCount);
      const auto tier = static_cast<TierId>(rng() % 2);
      Block b;
      b.n = n;
      b.key = (static_cast<std::uint64_t>(id) << 40) | static_cast<std::uint64_t>(r);
      b.p = static_cast<std::uint8_t*>(alloc.allocate(n, cls, tier));
      for_checked_bytes(n, [&](std::size_t i) { b.p[i] = pattern(b.key, i); });
      allocated.fetch_add(1);
      s = b;
      if (r % 16 == 0) {  // free what other threads handed over
        std::vector<Block> mine;
        {
          std::lock_guard lock(handoff_mu);
          mine.swap(handoff);
        }
        for (const Block& h : mine) {
          check_and_free(h);
          cross_frees.fetch_add(1);
        }
      }
    }
    for (const Block& s : slots) {
      if (s.p != nullptr) check_and_free(s);
    }
  };

  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) pool.emplace_back(worker, i);
  for (auto& t : pool) t.join();
  for (const Block& h : handoff) check_and_free(h);

  EXPECT_EQ(bad.load(), 0u) << "corrupted bytes";
  EXPECT_GT(cross_frees.load(), 0u);
  EXPECT_GT(allocated.load(), static_cast<std::uint64_t>(threads * rounds / 3));
  for (TierId t : alloc.tiers()) {
    EXPECT_EQ(alloc.usage(t).resident, 0u);
    EXPECT_EQ(alloc.usage(t).allocations, 0u);
  }
  EXPECT_EQ(alloc.unknown_frees(), 0u);
}

}  // namespace
}  // namespace tierpack::host

// HostArenaAllocator: class routing, address -> block/group lookup, group ranges, budgets and
// out_of_memory, re-charging when a group changes tier.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "alloc/host/host_arena_allocator.hpp"
#include "core/error.hpp"
#include "platform/fault_injecting_os.hpp"

namespace tierpack::host {
namespace {

/// Two host tiers on node 0 (this machine has one node): "dram0" (id 0) and "cxl0" (id 1).
Topology two_tiers_on_node0() {
  Topology t;
  Tier a;
  a.kind = TierKind::host_dram;
  a.name = "dram0";
  a.numa_node = 0;
  t.add(a);
  Tier b;
  b.kind = TierKind::far_memory;
  b.name = "cxl0";
  b.numa_node = 0;
  t.add(b);
  Tier g;
  g.kind = TierKind::gpu;
  g.name = "gpu0";
  g.device = 0;
  t.add(g);
  return t;
}

bool inside_arena(const HostArena& a, const void* p) {
  const auto x = reinterpret_cast<std::uintptr_t>(p);
  for (const auto& [s, n] : a.extents()) {
    const auto b = reinterpret_cast<std::uintptr_t>(s);
    if (x >= b && x < b + n) return true;
  }
  return false;
}

TEST(HostArenaAllocator, ServesHostTiersOnly) {
  HostArenaAllocator alloc(two_tiers_on_node0());
  EXPECT_EQ(alloc.tiers(), (std::vector<TierId>{0, 1}));
  EXPECT_TRUE(alloc.serves(1));
  EXPECT_FALSE(alloc.serves(2)) << "the GPU tier is not a host tier";
  EXPECT_THROW(alloc.allocate(16, TensorClass::temporary, 2), logic_error);
  EXPECT_THROW(alloc.allocate(16, TensorClass::temporary, 7), logic_error);
}

TEST(HostArenaAllocator, EmptyTopologyGetsOneTierOnNodeZero) {
  HostArenaAllocator alloc(Topology{});
  ASSERT_EQ(alloc.tiers().size(), 1u);
  EXPECT_EQ(alloc.node_of(alloc.tiers()[0]), 0);
  void* p = alloc.allocate(100, TensorClass::persistent, alloc.tiers()[0]);
  alloc.deallocate(p);
}

TEST(HostArenaAllocator, RefusesNodesThisMachineLacks) {
  Topology t;
  Tier far;
  far.name = "cxl9";
  far.kind = TierKind::far_memory;
  far.numa_node = 1000;
  t.add(far);
  try {
    HostArenaAllocator alloc(t);
    FAIL() << "expected logic_error";
  } catch (const logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("cxl9"), std::string::npos) << e.what();
  }
}

TEST(HostArenaAllocator, RoutesEachClassAndTierToItsOwnArena) {
  HostArenaAllocator alloc(two_tiers_on_node0());
  std::set<unsigned> indices;
  for (TierId tier : {TierId{0}, TierId{1}}) {
    for (int c = 0; c < kTensorClassCount; ++c) {
      const auto cls = static_cast<TensorClass>(c);
      indices.insert(alloc.arena(cls, tier).index());
      for (std::size_t n : {8u, 3000u, 1u << 20}) {
        void* p = alloc.allocate(n, cls, tier);
        std::memset(p, c, n);
        EXPECT_TRUE(inside_arena(alloc.arena(cls, tier), p)) << to_string(cls) << " tier " << tier << " n=" << n;
        for (int other = 0; other < kTensorClassCount; ++other) {
          if (other != c) {
            EXPECT_FALSE(inside_arena(alloc.arena(static_cast<TensorClass>(other), tier), p));
          }
        }
        auto info = alloc.lookup(p);
        ASSERT_TRUE(info);
        EXPECT_EQ(info->cls, cls);
        EXPECT_EQ(info->tier, tier);
        EXPECT_EQ(info->home, tier);
        alloc.deallocate(p);
      }
    }
  }
  EXPECT_EQ(indices.size(), 2u * kTensorClassCount);
}

TEST(HostArenaAllocator, BlocksAreAlignedForTensors) {
  HostArenaAllocator alloc(two_tiers_on_node0());
  std::vector<void*> blocks;
  for (std::size_t n = 0; n < 300; n += 7) {
    void* p = alloc.allocate(n, TensorClass::temporary, 0);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u) << n << " bytes";
    blocks.push_back(p);
  }
  for (void* p : blocks) alloc.deallocate(p);
  HostAllocatorOptions o;
  o.thread_caches = false;
  o.alignment = 256;
  HostArenaAllocator uncached(two_tiers_on_node0(), o);
  void* p = uncached.allocate(40, TensorClass::temporary, 1);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 256, 0u);
  uncached.deallocate(p);
}

TEST(HostArenaAllocator, LookupMapsInteriorAddressesToTheirBlockAndGroup) {
  HostArenaAllocator alloc(two_tiers_on_node0());
  char* a = static_cast<char*>(alloc.allocate(10000, TensorClass::activation, 0, {5, 42}));
  char* b = static_cast<char*>(alloc.allocate(64, TensorClass::activation, 0, {6, 43}));
  auto ia = alloc.lookup(a + 9999);
  ASSERT_TRUE(ia);
  EXPECT_EQ(ia->base, a);
  EXPECT_EQ(ia->bytes, 10000u);
  EXPECT_EQ(ia->seq, 5);
  EXPECT_EQ(ia->group, 42u);
  auto ib = alloc.lookup(b);
  ASSERT_TRUE(ib);
  EXPECT_EQ(ib->group, 43u);
  EXPECT_FALSE(alloc.lookup(reinterpret_cast<void*>(0x1000)));
  EXPECT_TRUE(alloc.retag(b, {7, 44}));
  EXPECT_EQ(alloc.lookup(b + 3)->group, 44u);
  alloc.deallocate(a);
  EXPECT_FALSE(alloc.lookup(a + 100)) << "freed blocks are forgotten";
  alloc.deallocate(b);
  alloc.deallocate(b);  // double free of a forgotten block is ignored and counted
  alloc.deallocate(reinterpret_cast<void*>(0x1234));
  EXPECT_EQ(alloc.unknown_frees(), 2u);
}

TEST(HostArenaAllocator, GroupRangesArePageAlignedAndMerged) {
  HostArenaAllocator alloc(two_tiers_on_node0());
  const std::size_t page = alloc.os().page_size();
  std::vector<void*> g1, g2;
  for (int i = 0; i < 6; ++i) g1.push_back(alloc.allocate(3 * page, TensorClass::iteration, 0, {i, 1}));
  for (int i = 0; i < 3; ++i) g2.push_back(alloc.allocate(200000, TensorClass::iteration, 0, {10 + i, 2}));
  auto r1 = alloc.group_ranges(1);
  ASSERT_FALSE(r1.empty());
  std::uint64_t covered = 0;
  for (std::size_t i = 0; i < r1.size(); ++i) {
    EXPECT_EQ(r1[i].begin % page, 0u);
    EXPECT_EQ(r1[i].end % page, 0u);
    if (i > 0) {
      EXPECT_GT(r1[i].begin, r1[i - 1].end) << "ranges are merged and sorted";
    }
    covered += r1[i].bytes();
  }
  EXPECT_GE(covered, 6 * 3 * page);
  for (void* p : g1) {
    const auto x = reinterpret_cast<std::uintptr_t>(p);
    bool found = false;
    for (const auto& r : r1) found = found || (x >= r.begin && x + 3 * page <= r.end);
    EXPECT_TRUE(found);
  }
  EXPECT_EQ(alloc.group_bytes(2), 3 * alloc.arena(TensorClass::iteration, 0).usable_size(200000));
  EXPECT_TRUE(alloc.group_ranges(99).empty());
  for (void* p : g1) alloc.deallocate(p);
  for (void* p : g2) alloc.deallocate(p);
  EXPECT_TRUE(alloc.group_ranges(1).empty());
}

TEST(HostArenaAllocator, BudgetExhaustionNamesSizeTierBudgetAndResidentThenRecovers) {
  HostArenaAllocator alloc(two_tiers_on_node0());
  alloc.set_budget(0, 8u << 20);
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(alloc.allocate(2u << 20, TensorClass::activation, 0));
  EXPECT_EQ(alloc.usage(0).resident, 8u << 20);
  try {
    alloc.allocate(3u << 20, TensorClass::temporary, 0);
    FAIL() << "expected out_of_memory";
  } catch (const out_of_memory& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.requested(), 3u << 20);
    EXPECT_EQ(e.tier(), "dram0");
    EXPECT_EQ(e.free_bytes(), 0u);
    EXPECT_NE(msg.find("requested 3.00 MiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("budget 8.00 MiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("resident 8.00 MiB"), std::string::npos) << msg;
  }
  EXPECT_EQ(alloc.usage(0).resident, 8u << 20) << "a refused block leaves no charge behind";
  void* other = alloc.allocate(3u << 20, TensorClass::temporary, 1);  // the other tier has no budget
  alloc.deallocate(blocks.back());
  blocks.pop_back();
  alloc.deallocate(blocks.back());
  blocks.pop_back();
  void* again = alloc.allocate(3u << 20, TensorClass::temporary, 0);
  std::memset(again, 1, 3u << 20);
  alloc.deallocate(again);
  for (void* p : blocks) alloc.deallocate(p);
  alloc.deallocate(other);
  EXPECT_EQ(alloc.usage(0).resident, 0u);
  EXPECT_EQ(alloc.usage(0).allocations, 0u);
  EXPECT_GE(alloc.usage(0).peak, 8u << 20);
}

TEST(HostArenaAllocator, OsRefusalIsOutOfMemoryAndAllocationWorksAfterwards) {
  FaultInjectingOs os(system_os());
  HostAllocatorOptions opt;
  opt.os = &os;
  HostArenaAllocator alloc(two_tiers_on_node0(), opt);
  os.fail_next(OsCall::map, ENOMEM, 1000);
  try {
    alloc.allocate(256u << 20, TensorClass::activation, 1);
    FAIL() << "expected out_of_memory";
  } catch (const out_of_memory& e) {
    EXPECT_EQ(e.tier(), "cxl0");
    EXPECT_NE(std::string(e.what()).find("errno 12"), std::string::npos) << e.what();
  }
  EXPECT_EQ(alloc.usage(1).resident, 0u);
  os.clear();
  void* p = alloc.allocate(256u << 20, TensorClass::activation, 1);
  ASSERT_NE(p, nullptr);
  alloc.deallocate(p);
}

TEST(HostArenaAllocator, SetGroupTierMovesTheChargeAndFreeingRehomes) {
  HostArenaAllocator alloc(two_tiers_on_node0());
  void* a = alloc.allocate(1u << 20, TensorClass::activation, 0, {0, 7});
  void* b = alloc.allocate(1u << 20, TensorClass::activation, 0, {1, 8});
  std::memset(a, 3, 1u << 20);
  EXPECT_EQ(alloc.set_group_tier(7, 1), alloc.lookup(a)->usable);
  EXPECT_EQ(alloc.lookup(a)->tier, 1);
  EXPECT_EQ(alloc.lookup(a)->home, 0);
  EXPECT_EQ(alloc.usage(0).resident, alloc.lookup(b)->usable);
  EXPECT_EQ(alloc.usage(1).resident, alloc.lookup(a)->usable);
  EXPECT_EQ(alloc.set_group_tier(7, 1), 0u) << "already there";
  alloc.deallocate(a);
  EXPECT_EQ(alloc.usage(1).resident, 0u) << "freed from the tier it was on";
  alloc.deallocate(b);
  EXPECT_EQ(alloc.usage(0).resident, 0u);
}

}  // namespace
}  // namespace tierpack::host

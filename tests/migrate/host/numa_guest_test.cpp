// Multi-node checks (numa_guest_tests), run inside the two-node QEMU guest (scripts/numa-guest.sh; node 1 is
// memory-only, like a CXL expander): arenas land on their planned node, page groups migrate both
// ways with data intact, purged pages refault on the group's current node, and a plan for a small
// training-like workload keeps node 0 within its budget while the unplanned run does not.
// On a one-node machine every test skips.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include "alloc/host/host_arena_allocator.hpp"
#include "migrate/host/host_mover.hpp"
#include "runtime/host/host_runtime.hpp"
#include "tests/migrate/host/host_test_util.hpp"

namespace tierpack::host {
namespace {

using testing::checksum;
using testing::pages_on;

#define REQUIRE_TWO_NODES()                                                  \
  if (system_os().node_count() < 2) GTEST_SKIP() << "needs two NUMA nodes (run in scripts/numa-guest.sh)"

TEST(NumaGuest, ArenasLandOnTheirPlannedNode) {
  REQUIRE_TWO_NODES();
  for (BindMode mode : {BindMode::preferred, BindMode::strict}) {
    HostAllocatorOptions o;
    o.bind = mode;
    HostArenaAllocator alloc(testing::fast_and_far(), o);
    for (TierId tier : {TierId{0}, TierId{1}}) {
      for (int c = 0; c < kTensorClassCount; ++c) {
        for (std::size_t n : {100u, 20000u, 3u << 20}) {
          void* p = alloc.allocate(n, static_cast<TensorClass>(c), tier);
          std::memset(p, 1, n);
          auto [on, off] = pages_on(p, n, alloc.node_of(tier));
          EXPECT_GT(on, 0u);
          EXPECT_EQ(off, 0u) << n << " bytes of class " << c << " on tier " << tier << ": " << off
                             << " pages off node " << alloc.node_of(tier);
          alloc.deallocate(p);
        }
      }
    }
  }
}

TEST(NumaGuest, GroupsMigrateBothWaysWithDataIntact) {
  REQUIRE_TWO_NODES();
  for (bool huge : {false, true}) {
    for (auto method : {MoverOptions::Method::move_pages, MoverOptions::Method::mbind}) {
      HostAllocatorOptions o;
      o.huge_pages = huge;
      HostArenaAllocator alloc(testing::fast_and_far(), o);
      HostMover mover(alloc, {.method = method, .huge_page_stride = huge, .worker = false});
      std::vector<std::pair<unsigned char*, std::size_t>> blocks;
      std::vector<std::uint64_t> sums;
      for (std::size_t n : {4096u, 100000u, 4u << 20}) {
        auto* p = static_cast<unsigned char*>(alloc.allocate(n, TensorClass::activation, 0, {0, 1}));
        for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(i * 13 + n);
        blocks.emplace_back(p, n);
        sums.push_back(checksum(p, n));
      }
      for (int round = 0; round < 3; ++round) {
        for (TierId to : {TierId{1}, TierId{0}}) {
          MoveResult r = mover.move_now(1, to, to == 1 ? MoveKind::evict : MoveKind::prefetch);
          EXPECT_TRUE(r.complete) << r.counters.summary();
          for (std::size_t b = 0; b < blocks.size(); ++b) {
            auto [on, off] = pages_on(blocks[b].first, blocks[b].second, alloc.node_of(to));
            EXPECT_EQ(off, 0u) << "huge=" << huge << " block " << b << " after moving to tier " << to;
            EXPECT_EQ(checksum(blocks[b].first, blocks[b].second), sums[b]);
          }
          EXPECT_EQ(alloc.lookup(blocks[0].first)->tier, to);
        }
      }
      for (auto [p, n] : blocks) alloc.deallocate(p);
    }
  }
}

TEST(NumaGuest, PurgedPagesRefaultOnTheGroupsCurrentNode) {
  REQUIRE_TWO_NODES();
  HostArenaAllocator alloc(testing::fast_and_far());
  HostMover mover(alloc, {.worker = false});
  const std::size_t n = 64 * system_os().page_size();
  char* p = static_cast<char*>(alloc.allocate(n, TensorClass::iteration, 0, {0, 3}));
  std::memset(p, 1, n);
  ASSERT_TRUE(mover.move_now(3, 1, MoveKind::evict).complete);
  // What jemalloc's purge does to dirty pages: they go away and refault on the range's policy node.
  const std::uintptr_t page = system_os().page_size();
  const auto first = (reinterpret_cast<std::uintptr_t>(p) + page - 1) & ~(page - 1);
  const auto last = (reinterpret_cast<std::uintptr_t>(p) + n) & ~(page - 1);
  ASSERT_EQ(system_os().purge(reinterpret_cast<void*>(first), last - first, false), 0);
  std::memset(p, 2, n);
  auto [on, off] = pages_on(reinterpret_cast<void*>(first), last - first, 1);
  EXPECT_EQ(off, 0u) << "refaulted pages must follow the group (the mover re-binds its ranges)";
  EXPECT_GT(on, 0u);

  // The trap, for contrast: move_pages alone leaves the old policy, so a refault goes back.
  std::vector<void*> pages;
  for (std::uintptr_t a = first; a < last; a += page) pages.push_back(reinterpret_cast<void*>(a));
  std::vector<int> nodes(pages.size(), 0), status(pages.size());
  ASSERT_EQ(system_os().move_pages(pages, nodes, status), 0);
  ASSERT_EQ(system_os().purge(reinterpret_cast<void*>(first), last - first, false), 0);
  std::memset(p, 3, n);
  auto [on1, off1] = pages_on(reinterpret_cast<void*>(first), last - first, 1);
  EXPECT_GT(on1, 0u) << "without a re-bind, purged pages refault on the old policy node";
  (void)off1;
  alloc.deallocate(p);
}

// A training-like step: 4 layers. Ops 0..3 forward (layer i allocates activation i and a
// temporary), ops 4..7 backward (layer 7-op reads activation 7-op, frees it), op 8 optimizer.
// Parameters and gradients (persistent) stay on the fast tier. The plan evicts activation i after
// its forward op (i < 3) and prefetches it two ops before its backward op.
struct Workload {
  static constexpr int kLayers = 4;
  static constexpr std::size_t kAct = 256u << 10, kParam = 128u << 10, kTemp = 32u << 10;

  static Plan plan(const Topology& topo, std::uint64_t budget) {
    Plan p;
    p.topology = topo;
    p.fast_tier = 0;
    p.slow_tier = 1;
    p.fast_budget_bytes = budget;
    for (GroupId g = 0; g < kLayers; ++g) {  // group i: activation i
      PageGroup pg;
      pg.id = g;
      pg.cls = TensorClass::activation;
      pg.home = 0;
      p.groups.push_back(pg);
    }
    PageGroup tmp;
    tmp.id = kLayers;
    tmp.cls = TensorClass::temporary;
    tmp.home = 0;
    p.groups.push_back(tmp);
    // Allocation order inside an iteration: per forward op i: activation i, temporary.
    for (int i = 0; i < kLayers; ++i) {
      for (auto [bytes, cls, group] : {std::tuple{kAct, TensorClass::activation, static_cast<GroupId>(i)},
                                       std::tuple{kTemp, TensorClass::temporary, static_cast<GroupId>(kLayers)}}) {
        TensorPlacement t;
        t.tensor = static_cast<TensorId>(p.placements.size());
        t.seq = static_cast<std::int64_t>(p.placements.size());
        t.bytes = bytes;
        t.cls = cls;
        t.group = group;
        p.placements.push_back(t);
      }
    }
    for (int i = 0; i < kLayers - 1; ++i) {
      const OpIndex backward = 2 * kLayers - 1 - i;
      p.schedule.push_back(Move{.group = static_cast<GroupId>(i), .kind = MoveKind::evict, .from = 0, .to = 1,
                                .issue_after = i});
      p.schedule.push_back(Move{.group = static_cast<GroupId>(i), .kind = MoveKind::prefetch, .from = 1, .to = 0,
                                .issue_after = backward - 2, .needed_by = backward});
    }
    return p;
  }
};

/// Bytes of live blocks whose pages the kernel reports on `node` (whole pages, each counted once).
std::uint64_t bytes_on_node(HostArenaAllocator& alloc, int node) {
  std::map<std::uintptr_t, bool> pages;
  const std::uintptr_t page = system_os().page_size();
  alloc.for_each([&](const AllocationInfo& a) {
    const auto b = reinterpret_cast<std::uintptr_t>(a.base);
    for (std::uintptr_t x = b & ~(page - 1); x < b + a.usable; x += page) pages[x] = true;
  });
  std::vector<void*> addrs;
  for (const auto& [a, _] : pages) addrs.push_back(reinterpret_cast<void*>(a));
  std::vector<int> status(addrs.size());
  if (system_os().move_pages(addrs, {}, status) != 0) return ~0ull;
  std::uint64_t n = 0;
  for (int s : status) n += s == node ? page : 0;
  return n;
}

/// Runs `iterations` steps; returns the highest node-0 bytes seen at any op boundary.
std::uint64_t run_steps(HostRuntime& rt, int iterations, std::vector<void*>& persistent, bool check_data) {
  std::uint64_t peak = 0;
  for (int it = 0; it < iterations; ++it) {
    rt.begin_iteration();
    std::vector<unsigned char*> acts(Workload::kLayers);
    OpIndex op = 0;
    auto boundary = [&](OpIndex o, bool begin) {
      if (begin) {
        rt.on_op_begin(o);
      } else {
        rt.on_op_end(o);
      }
      rt.mover().wait_idle();  // measure the plan, not the worker's timing
      peak = std::max(peak, bytes_on_node(rt.allocator(), 0));
    };
    for (int i = 0; i < Workload::kLayers; ++i, ++op) {
      boundary(op, true);
      acts[i] = static_cast<unsigned char*>(rt.allocate(Workload::kAct));
      std::memset(acts[i], 10 + i + it, Workload::kAct);
      void* t = rt.allocate(Workload::kTemp);
      std::memset(t, 1, Workload::kTemp);
      rt.deallocate(t);
      boundary(op, false);
    }
    for (int i = Workload::kLayers - 1; i >= 0; --i, ++op) {
      boundary(op, true);
      if (check_data) {
        for (std::size_t b = 0; b < Workload::kAct; b += 997) EXPECT_EQ(acts[i][b], 10 + i + it);
      }
      rt.deallocate(acts[i]);
      boundary(op, false);
    }
    boundary(op, true);  // optimizer step touches the persistent blocks
    for (void* p : persistent) std::memset(p, 5, Workload::kParam);
    boundary(op, false);
    rt.end_iteration();
  }
  return peak;
}

TEST(NumaGuest, APlanKeepsNodeZeroWithinItsBudget) {
  REQUIRE_TWO_NODES();
  const Topology topo = testing::fast_and_far();
  const std::uint64_t persistent_bytes = 2 * Workload::kLayers * Workload::kParam;  // params + grads
  const std::uint64_t budget = persistent_bytes + 2 * Workload::kAct + Workload::kTemp + (64u << 10);

  auto make_persistent = [](HostRuntime& rt) {
    std::vector<void*> v;
    for (int i = 0; i < 2 * Workload::kLayers; ++i) {
      v.push_back(rt.allocate(Workload::kParam));
      std::memset(v.back(), 5, Workload::kParam);
    }
    return v;
  };

  // Without a plan (and no budget) the step needs all activations at once on node 0.
  std::uint64_t natural = 0;
  {
    HostRuntimeOptions o;
    o.mover.worker = false;
    HostRuntime rt(Config{}, topo, o);
    auto persistent = make_persistent(rt);
    natural = run_steps(rt, 2, persistent, true);
    for (void* p : persistent) rt.deallocate(p);
  }
  EXPECT_GT(natural, budget) << "the workload must not fit the budget without a plan";

  // With the plan, on the worker thread as in a real run.
  HostRuntime rt(Config{}, topo);
  auto persistent = make_persistent(rt);
  rt.set_plan(Workload::plan(topo, budget));
  const std::uint64_t planned = run_steps(rt, 3, persistent, true);
  const IterationStats s = rt.last_iteration();
  std::printf("plan: node-0 peak %llu B with the plan vs %llu B without; budget %llu B; %s; %s\n",
              static_cast<unsigned long long>(planned), static_cast<unsigned long long>(natural),
              static_cast<unsigned long long>(budget), rt.plan_summary().c_str(), s.moves.summary().c_str());
  EXPECT_LE(planned, budget);
  EXPECT_TRUE(s.divergence.empty()) << s.divergence;
  EXPECT_EQ(s.moves.moves_complete, 6u) << s.moves.summary();
  EXPECT_EQ(s.fallbacks, 0u);
  EXPECT_GT(s.moves.bytes_to_slow, 0u);
  EXPECT_GT(s.moves.bytes_to_fast, 0u);
  for (void* p : persistent) rt.deallocate(p);
}

}  // namespace
}  // namespace tierpack::host

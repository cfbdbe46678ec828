// The host runtime under budget exhaustion, refused memory and shutdown (issue 9, guarantees 3, 4
// and 8): what HostArenaAllocator and HostMover guarantee on their own (tests/alloc/host,
// tests/migrate/host) must still hold when the runtime routes allocations and issues a plan's moves.
// Under the ASan stage of scripts/test.sh LeakSanitizer checks that nothing leaks on these paths.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "platform/fault_injecting_os.hpp"
#include "runtime/host/host_runtime.hpp"
#include "tests/migrate/host/host_test_util.hpp"

namespace tierpack::host {
namespace {

TEST(HostRuntimeFaults, BothTiersFullIsAClearOutOfMemoryAndTheRunContinuesAfterFrees) {
  Config cfg;
  cfg.fast_budget.bytes = 1u << 20;
  HostRuntime rt(cfg, testing::fast_and_far());
  ASSERT_TRUE(rt.slow_tier());
  rt.allocator().set_budget(*rt.slow_tier(), 1u << 20);
  for (int cycle = 0; cycle < 10; ++cycle) {
    rt.begin_iteration();
    std::vector<void*> held;
    std::string message;
    try {
      for (int i = 0; i < 64; ++i) held.push_back(rt.allocate(256u << 10));
      FAIL() << "two tiers of 1 MiB held 64 blocks of 256 KiB";
    } catch (const out_of_memory& e) {
      message = e.what();
    }
    // 1 MiB on each tier: four blocks each (the allocator charges usable sizes).
    EXPECT_EQ(held.size(), 8u);
    EXPECT_NE(message.find("cxl1"), std::string::npos) << "names the tier it last tried: " << message;
    EXPECT_NE(message.find("256.00 KiB"), std::string::npos) << "names the request: " << message;
    EXPECT_NE(message.find("budget 1.00 MiB"), std::string::npos) << message;
    EXPECT_NE(message.find("resident 1.00 MiB"), std::string::npos) << message;
    for (void* p : held) rt.deallocate(p);
    rt.end_iteration();
    EXPECT_EQ(rt.last_iteration().fallbacks, 4u) << "blocks placed on the slow tier because the fast one was full";
  }
  for (TierId t : rt.allocator().tiers()) EXPECT_EQ(rt.allocator().usage(t).resident, 0u);
  void* p = rt.allocate(1u << 20);  // a whole budget at once after all that
  EXPECT_NE(p, nullptr);
  rt.deallocate(p);
}

TEST(HostRuntimeFaults, RefusedMmapIsAClearOutOfMemoryAndNothingIsLost) {
  FaultInjectingOs os(system_os());
  HostRuntimeOptions o;
  o.alloc.os = &os;
  o.alloc.thread_caches = false;
  HostRuntime rt(Config{}, testing::fast_and_far(), o);
  rt.begin_iteration();
  auto* keep = static_cast<unsigned char*>(rt.allocate(3u << 20));
  for (std::size_t i = 0; i < (3u << 20); ++i) keep[i] = static_cast<unsigned char>(i * 13);
  // Both tiers' next extents are refused: a large block needs a new extent on each.
  os.fail_next(OsCall::map, ENOMEM, 1000);
  try {
    rt.allocate(40u << 20);
    FAIL() << "expected out_of_memory";
  } catch (const out_of_memory& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("40.00 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("the OS refused memory"), std::string::npos) << m;
    EXPECT_NE(m.find("errno " + std::to_string(ENOMEM)), std::string::npos) << m;
  }
  EXPECT_GT(os.injected(), 0u);
  os.clear();
  for (std::size_t i = 0; i < (3u << 20); ++i) ASSERT_EQ(keep[i], static_cast<unsigned char>(i * 13)) << i;
  void* big = rt.allocate(40u << 20);
  EXPECT_NE(big, nullptr);
  rt.deallocate(big);
  rt.deallocate(keep);
  rt.end_iteration();
}

// A plan that evicts and prefetches one group every iteration (as in tests/migrate/host).
Plan evicting_plan(const Topology& topo) {
  Plan p;
  p.topology = topo;
  p.fast_tier = 0;
  p.slow_tier = 1;
  PageGroup g;
  g.id = 0;
  g.cls = TensorClass::activation;
  g.home = 0;
  p.groups.push_back(g);
  for (std::int64_t seq = 0; seq < 4; ++seq) {
    TensorPlacement t;
    t.tensor = static_cast<TensorId>(seq);
    t.seq = seq;
    t.bytes = 1u << 20;
    t.cls = TensorClass::activation;
    t.group = 0;
    p.placements.push_back(t);
  }
  p.schedule.push_back(Move{.group = 0, .kind = MoveKind::evict, .from = 0, .to = 1, .issue_after = 1});
  p.schedule.push_back(Move{.group = 0, .kind = MoveKind::prefetch, .from = 1, .to = 0, .issue_after = 2, .needed_by = 3});
  return p;
}

TEST(HostRuntimeFaults, DestroyingTheRuntimeWithMovesInFlightIsClean) {
  // The mover is held inside move_pages while the runtime is destroyed: its destructor must drop the
  // queue, let the running move finish and join, before the allocator (and the blocks) go away.
  for (int round = 0; round < 3; ++round) {
    FaultInjectingOs os(system_os());
    std::atomic<int> entered{0};
    os.on_move_pages([&] {
      entered.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    });
    HostRuntimeOptions o;
    o.alloc.os = &os;
    const Topology topo = testing::fast_and_far();
    std::chrono::steady_clock::time_point teardown_started;
    {
      HostRuntime rt(Config{}, topo, o);
      rt.set_plan(evicting_plan(topo));
      rt.begin_iteration();
      std::vector<void*> blocks;
      for (int i = 0; i < 4; ++i) {
        blocks.push_back(rt.allocate(1u << 20));
        std::memset(blocks.back(), i + 1, 1u << 20);
      }
      for (OpIndex op = 0; op < 3; ++op) {
        rt.on_op_begin(op);
        rt.on_op_end(op);
      }
      // Rounds 1 and 2 wait (a bounded while) until the mover is inside move_pages; round 0 may
      // tear down before the worker even starts.
      for (int i = 0; round > 0 && i < 2000 && entered.load() == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      // Issue 26: this test asserted nothing. What it promises, checked: in rounds 1 and 2 a move is
      // really in flight at teardown, and the teardown neither hangs nor lets the mover run on.
      if (round > 0) {
        ASSERT_GE(entered.load(), 1) << "round " << round << ": no move in flight at teardown";
      }
      if (round == 2) {
        for (void* p : blocks) rt.deallocate(p);  // frees racing the mover, then teardown
        blocks.clear();
      }
      teardown_started = std::chrono::steady_clock::now();
      // Destroyed here with the eviction (and the prefetch) queued or running; blocks of rounds 0
      // and 1 are still allocated and go away with the arenas.
    }
    const auto teardown = std::chrono::steady_clock::now() - teardown_started;
    // The running move_pages call sleeps 20 ms per batch; a queue that is not dropped, or a worker not
    // joined, shows as a teardown of seconds or as calls after it.
    EXPECT_LT(teardown, std::chrono::seconds(2)) << "round " << round;
    const int after = entered.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    EXPECT_EQ(entered.load(), after) << "round " << round << ": the mover moved pages after the runtime was destroyed";
  }
}

}  // namespace
}  // namespace tierpack::host

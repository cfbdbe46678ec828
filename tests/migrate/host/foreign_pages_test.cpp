// Tensors from before the plan (ForeignPages): their charges, the mover carrying their whole pages
// with per-page status handling and counters, frees that keep later moves off their pages, and the
// runtime's fast budget counting them. Runs on one node here and on two real nodes in the guest
// (numa_guest_tests), where the pages are checked with move_pages status after each move.
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <vector>

#include "core/error.hpp"
#include "migrate/host/foreign_pages.hpp"
#include "migrate/host/host_mover.hpp"
#include "platform/fault_injecting_os.hpp"
#include "runtime/host/host_runtime.hpp"
#include "tests/migrate/host/host_test_util.hpp"

namespace tierpack::host {
namespace {

using testing::checksum;
using testing::fast_and_far;

/// Memory of another allocator (what the profiling arena is to the runtime): an anonymous mapping.
struct OtherMemory {
  std::size_t bytes;
  char* p = nullptr;
  explicit OtherMemory(std::size_t n, unsigned char fill = 0x3c) : bytes(n) {
    void* out = nullptr;
    if (system_os().map(n, &out) != 0) throw std::runtime_error("mmap failed");
    p = static_cast<char*>(out);
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<char>(fill + i * 7);
  }
  ~OtherMemory() { system_os().unmap(p, bytes); }
  std::uintptr_t at(std::size_t off) const { return reinterpret_cast<std::uintptr_t>(p) + off; }
};

struct Fixture {
  FaultInjectingOs os{system_os()};
  std::unique_ptr<HostArenaAllocator> alloc;
  std::unique_ptr<ForeignPages> foreign;
  std::size_t page = system_os().page_size();
  Fixture() {
    HostAllocatorOptions o;
    o.os = &os;
    alloc = std::make_unique<HostArenaAllocator>(fast_and_far(), o);
    foreign = std::make_unique<ForeignPages>(*alloc);
  }
};

TEST(ForeignPages, ChargesWholePagesWhereTheyAreAndTheSharedRestForGood) {
  Fixture f;
  OtherMemory m(16 * f.page);
  // 10 pages starting 100 bytes into a page: 9 whole pages, the rest in two shared pages.
  const auto e = f.foreign->add(m.at(100), 10 * f.page, 7, 0);
  EXPECT_EQ(e.pages.begin, m.at(f.page));
  EXPECT_EQ(e.pages.bytes(), 9 * f.page);
  EXPECT_EQ(e.pinned_bytes(), f.page);
  EXPECT_EQ(f.alloc->usage(0).resident, 10 * f.page);
  EXPECT_EQ(f.foreign->bytes_on(0), 10 * f.page);
  EXPECT_EQ(f.foreign->movable_bytes(7, 1), 9 * f.page);
  EXPECT_EQ(f.foreign->movable_bytes(7, 0), 0u) << "already there";
  EXPECT_THROW(f.foreign->add(m.at(200), 64, 7, 0), logic_error) << "overlaps";
  EXPECT_THROW(f.foreign->add(m.at(0), 200, 7, 0), logic_error) << "overlaps";
  // Smaller than a page: charged, never moved.
  f.foreign->add(m.at(12 * f.page + 8), 64, 7, 0);
  EXPECT_EQ(f.foreign->movable(7, 1).size(), 1u);
  EXPECT_EQ(f.alloc->usage(0).resident, 10 * f.page + 64);

  // The charge follows a move; a reservation is used first.
  ASSERT_TRUE(f.alloc->reserve(1, 4 * f.page));
  EXPECT_EQ(f.foreign->set_tier({e}, 1, 4 * f.page), 0u);
  EXPECT_EQ(f.alloc->usage(1).resident, 9 * f.page);
  EXPECT_EQ(f.alloc->usage(0).resident, f.page + 64);
  EXPECT_EQ(f.foreign->bytes_on(1), 9 * f.page);
  EXPECT_TRUE(f.foreign->remove(m.at(100)));
  EXPECT_FALSE(f.foreign->remove(m.at(100)));
  EXPECT_EQ(f.alloc->usage(1).resident, 0u);
  EXPECT_EQ(f.alloc->usage(0).resident, 64u);
  EXPECT_TRUE(f.foreign->remove(m.at(12 * f.page + 8)));
  EXPECT_EQ(f.alloc->usage(0).resident, 0u);
}

TEST(ForeignPages, MovesCarryThemBothWaysWithBytesPerDirectionAndDataIntact) {
  Fixture f;
  OtherMemory m(32 * f.page);
  const auto sum = checksum(m.p, m.bytes);
  f.foreign->add(m.at(0), 32 * f.page, 3, 0);
  HostMover mover(*f.alloc, {.worker = false}, f.foreign.get());
  MoveResult r = mover.move_now(3, 1, MoveKind::evict);
  EXPECT_TRUE(r.complete) << r.counters.summary();
  EXPECT_EQ(r.counters.moves_empty, 0u);
  EXPECT_EQ(r.counters.pages_moved, 32u);
  EXPECT_EQ(r.counters.bytes_to_slow, 32 * f.page);
  EXPECT_EQ(r.counters.bytes_to_fast, 0u);
  EXPECT_EQ(f.foreign->find(m.at(0))->tier, 1);
  EXPECT_EQ(f.alloc->usage(0).resident, 0u);
  EXPECT_EQ(f.alloc->usage(1).resident, 32 * f.page);
  for (int s : testing::page_nodes(m.p, m.bytes)) EXPECT_EQ(s, f.alloc->node_of(1));
  EXPECT_EQ(checksum(m.p, m.bytes), sum);
  // Foreign memory is never re-bound: its allocator's policy stays.
  int mode = 0, node = -2;
  ASSERT_EQ(system_os().policy_of(m.p, &mode, &node), 0);
  EXPECT_EQ(node, -1);

  r = mover.move_now(3, 0, MoveKind::prefetch);
  EXPECT_TRUE(r.complete) << r.counters.summary();
  EXPECT_EQ(r.counters.bytes_to_fast, 32 * f.page);
  EXPECT_EQ(r.counters.bytes_to_slow, 0u);
  EXPECT_EQ(f.foreign->find(m.at(0))->tier, 0);
  EXPECT_EQ(f.alloc->usage(0).resident, 32 * f.page);
  EXPECT_EQ(f.alloc->usage(1).resident, 0u);
  for (int s : testing::page_nodes(m.p, m.bytes)) EXPECT_EQ(s, f.alloc->node_of(0));
  EXPECT_EQ(checksum(m.p, m.bytes), sum);
  // A move of a group with neither blocks nor foreign pages is still empty.
  EXPECT_EQ(mover.move_now(9, 1, MoveKind::evict).counters.moves_empty, 1u);
}

TEST(ForeignPages, PerPageStatusesAreHandledAsForTheRuntimesBlocks) {
  Fixture f;
  OtherMemory m(16 * f.page);
  f.foreign->add(m.at(0), 16 * f.page, 4, 0);
  f.os.fail_page(m.p + 2 * f.page, -EBUSY, 2);  // busy twice, then fine
  f.os.fail_page(m.p + 5 * f.page, -ENOENT);
  f.os.fail_page(m.p + 6 * f.page, -EFAULT);
  HostMover mover(*f.alloc, {.max_retries = 5, .worker = false}, f.foreign.get());
  MoveResult r = mover.move_now(4, 1, MoveKind::evict);
  EXPECT_TRUE(r.complete) << r.counters.summary();
  EXPECT_GE(r.counters.pages_retried, 2u);
  EXPECT_EQ(r.counters.pages_absent, 1u);
  EXPECT_EQ(r.counters.pages_zero, 1u);
  EXPECT_EQ(r.counters.pages_moved, 14u);
  EXPECT_EQ(r.counters.bytes_to_slow, 14 * f.page);
  EXPECT_EQ(r.counters.pages_failed, 0u);
  EXPECT_EQ(f.foreign->find(m.at(0))->tier, 1);

  // Errors by errno; a partial move leaves the charge where it was.
  f.os.fail_page(m.p + f.page, -EACCES);
  f.os.fail_page(m.p + 3 * f.page, -EBUSY, 100);  // busy for good
  r = mover.move_now(4, 0, MoveKind::prefetch);
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(r.counters.moves_partial, 1u);
  EXPECT_EQ(r.counters.failures_by_errno.at(EACCES), 1u);
  EXPECT_EQ(r.counters.failures_by_errno.at(EBUSY), 1u);
  EXPECT_EQ(r.counters.pages_failed, 2u);
  EXPECT_EQ(r.counters.pages_moved, 14u);
  EXPECT_EQ(r.counters.bytes_to_fast, 14 * f.page);
  EXPECT_EQ(f.foreign->find(m.at(0))->tier, 1);
  EXPECT_EQ(f.alloc->usage(1).resident, 16 * f.page);
  // A whole call that fails is counted by errno too.
  f.os.fail_next(OsCall::move_pages, ENOMEM, 1, /*moving_only=*/true);
  r = mover.move_now(4, 0, MoveKind::prefetch);
  EXPECT_EQ(r.counters.failures_by_errno.at(ENOMEM), 16u);
}

TEST(ForeignPages, AFreedTensorIsNotMoved) {
  Fixture f;
  OtherMemory m(8 * f.page);
  f.foreign->add(m.at(0), 8 * f.page, 5, 0);
  EXPECT_TRUE(f.foreign->remove(m.at(0)));
  const auto calls = f.os.calls(OsCall::move_pages);
  HostMover mover(*f.alloc, {.worker = false}, f.foreign.get());
  MoveResult r = mover.move_now(5, 1, MoveKind::evict);
  EXPECT_EQ(r.counters.moves_empty, 1u);
  EXPECT_EQ(f.os.calls(OsCall::move_pages), calls);
  EXPECT_EQ(f.alloc->usage(0).resident, 0u);
}

TEST(ForeignPages, AFreedThenReusedAddressIsNotMovedAsTheOldTensor) {
  // Tensor A's page answers EBUSY once, so its move leaves a retry queued behind a move of group 9
  // (a runtime block). While the worker is held inside that move, A is freed and its address is
  // registered again as tensor C, of the same group. The retry must not touch C's page (an
  // injected EACCES on it would fire), and C's charge stays where it was registered.
  Fixture f;
  OtherMemory m(4 * f.page);
  const auto a = f.foreign->add(m.at(0), 4 * f.page, 5, 0);
  char* block = static_cast<char*>(f.alloc->allocate(4 * f.page, TensorClass::activation, 0, {0, 9}));
  std::memset(block, 1, 4 * f.page);
  f.os.fail_page(m.p + f.page, -EBUSY, 1);
  std::promise<void> in1, in2, go1, go2;
  std::shared_future<void> g1 = go1.get_future().share(), g2 = go2.get_future().share();
  std::atomic<int> n{0};
  f.os.on_move_pages([&] {
    const int k = ++n;
    if (k == 1) {
      in1.set_value();
      g1.wait();
    } else if (k == 2) {
      in2.set_value();
      g2.wait();
    }
  });
  {
    HostMover mover(*f.alloc, {.max_retries = 5}, f.foreign.get());
    mover.submit(Move{.group = 5, .kind = MoveKind::evict, .from = 0, .to = 1});
    // Waits fail instead of hanging when a move never reaches move_pages (generous: not a timing claim).
    auto reached = [](std::promise<void>& p) { return p.get_future().wait_for(std::chrono::seconds(30)) == std::future_status::ready; };
    if (!reached(in1)) {
      go1.set_value();
      go2.set_value();
      FAIL() << "no move_pages for A's pages";
    }  // the worker is in A's batch
    mover.submit(Move{.group = 9, .kind = MoveKind::evict, .from = 0, .to = 1});
    go1.set_value();          // A's move ends with one busy page: its retry goes behind group 9's move
    if (!reached(in2)) {  // the worker is in group 9's move
      go2.set_value();
      FAIL() << "group 9's move did not reach move_pages";
    }
    EXPECT_TRUE(f.foreign->remove(a.address));
    const auto c = f.foreign->add(m.at(0), 4 * f.page, 5, 0);
    EXPECT_NE(c.id, a.id);
    f.os.fail_page(m.p + f.page, -EACCES, 1);  // fires only if a move touches C's page
    const auto injected = f.os.injected();
    go2.set_value();
    mover.wait_idle();
    EXPECT_EQ(f.os.injected(), injected) << "the retry of A touched C's page";
    EXPECT_EQ(f.foreign->find(m.at(0))->id, c.id);
    EXPECT_EQ(f.foreign->find(m.at(0))->tier, 0) << "C was not moved";
    const MoveCounters mc = mover.counters();
    EXPECT_EQ(mc.failures_by_errno.count(EACCES), 0u) << mc.summary();
    EXPECT_GE(mc.pages_retried, 1u);
  }
  f.os.clear();
  EXPECT_EQ(f.alloc->usage(0).resident, 4 * f.page) << "C's charge";
  EXPECT_EQ(f.alloc->usage(1).resident, 4 * f.page) << "group 9's block moved";
  f.alloc->deallocate(block);
}

/// One group (0, persistent, home fast) evicted after op 1 and prefetched after op 3 for op 5; it
/// has no runtime block, only what adopt() gives it.
Plan evict_and_prefetch_plan(const Topology& topo, std::uint64_t budget) {
  Plan p;
  p.topology = topo;
  p.fast_tier = 0;
  p.slow_tier = 1;
  p.fast_budget_bytes = budget;
  PageGroup g;
  g.id = 0;
  g.cls = TensorClass::persistent;
  g.home = 0;
  p.groups.push_back(g);
  p.schedule.push_back(Move{.group = 0, .kind = MoveKind::evict, .from = 0, .to = 1, .issue_after = 1});
  p.schedule.push_back(Move{.group = 0, .kind = MoveKind::prefetch, .from = 1, .to = 0, .issue_after = 3, .needed_by = 5});
  return p;
}

HostRuntimeOptions sync_mover() {
  HostRuntimeOptions o;
  o.mover.worker = false;  // deterministic: moves run at submit
  return o;
}

TEST(ForeignPages, ThePlansMovesCarryAdoptedTensorsAndTheFastBudgetCountsThem) {
  const Topology topo = fast_and_far();
  const std::size_t page = system_os().page_size();
  const std::uint64_t tensor = 64 * page;
  HostRuntime rt(Config{}, topo, sync_mover());
  rt.set_plan(evict_and_prefetch_plan(topo, tensor + 16 * page));  // room for the tensor and 16 pages
  OtherMemory m(tensor);
  const auto sum = checksum(m.p, m.bytes);
  const ForeignTensor t{m.at(0), tensor, 0};
  ASSERT_EQ(rt.adopt({&t, 1}), 1u);
  HostArenaAllocator& alloc = rt.allocator();
  EXPECT_EQ(alloc.usage(0).resident, tensor);
  const int fast_node = alloc.node_of(0), slow_node = alloc.node_of(1);

  rt.begin_iteration();
  // 32 pages do not fit next to the tensor: the allocation goes to the slow tier.
  void* big = rt.allocate(32 * page);
  EXPECT_EQ(alloc.lookup(big)->tier, 1);
  rt.on_op_begin(0);
  rt.on_op_end(0);
  rt.on_op_begin(1);
  rt.on_op_end(1);  // eviction: the tensor's pages go to the slow node, its charge with them
  EXPECT_EQ(rt.foreign().find(m.at(0))->tier, 1);
  for (int s : testing::page_nodes(m.p, m.bytes)) EXPECT_EQ(s, slow_node) << "after the eviction";
  EXPECT_EQ(alloc.usage(0).resident, 0u) << "the tensor's charge left the fast tier";
  void* fits = rt.allocate(32 * page);  // now there is room on the fast tier
  EXPECT_EQ(alloc.lookup(fits)->tier, 0);
  rt.deallocate(fits);
  rt.on_op_begin(2);
  rt.on_op_end(2);
  rt.on_op_begin(3);
  rt.on_op_end(3);  // prefetch: back on the fast node
  EXPECT_EQ(rt.foreign().find(m.at(0))->tier, 0);
  for (int s : testing::page_nodes(m.p, m.bytes)) EXPECT_EQ(s, fast_node) << "after the prefetch";
  EXPECT_EQ(checksum(m.p, m.bytes), sum);
  rt.deallocate(big);
  rt.end_iteration();
  const IterationStats st = rt.last_iteration();
  EXPECT_EQ(st.fallbacks, 1u);
  EXPECT_EQ(st.moves.bytes_to_slow, tensor);
  EXPECT_EQ(st.moves.bytes_to_fast, tensor);
  EXPECT_EQ(st.moves.moves_complete, 2u);
  EXPECT_EQ(st.moves.moves_empty, 0u) << "the plan's moves of the group are no longer empty";
  EXPECT_LE(st.fast_peak, tensor + 16 * page);
  EXPECT_GE(st.fast_peak, tensor) << "the fast peak counts the tensor";

  // No room for the prefetch: the tensor stays on the slow tier, the budget holds.
  rt.begin_iteration();
  rt.on_op_begin(0);
  rt.on_op_end(0);
  rt.on_op_begin(1);
  rt.on_op_end(1);
  void* filler = rt.allocate(32 * page);
  ASSERT_EQ(alloc.lookup(filler)->tier, 0);
  rt.on_op_begin(2);
  rt.on_op_end(2);
  rt.on_op_begin(3);
  rt.on_op_end(3);
  EXPECT_EQ(rt.foreign().find(m.at(0))->tier, 1);
  EXPECT_LE(alloc.usage(0).resident, tensor + 16 * page);
  rt.deallocate(filler);
  rt.end_iteration();
  EXPECT_EQ(rt.last_iteration().moves.moves_over_budget, 1u);
  EXPECT_EQ(checksum(m.p, m.bytes), sum);

  // Freed: forgotten, uncharged, and the next moves of its group are empty again.
  EXPECT_TRUE(rt.forget(m.p));
  EXPECT_EQ(alloc.usage(1).resident, 0u);
  rt.begin_iteration();
  for (OpIndex op = 0; op < 4; ++op) {
    rt.on_op_begin(op);
    rt.on_op_end(op);
  }
  rt.end_iteration();
  EXPECT_EQ(rt.last_iteration().moves.moves_empty, 2u);
}

TEST(ForeignPages, AdoptSendsGroupsHomedOnTheSlowTierThere) {
  const Topology topo = fast_and_far();
  const std::size_t page = system_os().page_size();
  HostRuntime rt(Config{}, topo, sync_mover());
  Plan p = evict_and_prefetch_plan(topo, 0);
  p.groups[0].home = 1;
  p.schedule.clear();
  rt.set_plan(p);
  OtherMemory m(8 * page);
  const ForeignTensor ts[] = {{m.at(0), 8 * page, 0}, {m.at(0), 8 * page, 0} /* seen twice: skipped */};
  EXPECT_EQ(rt.adopt(ts), 1u);
  EXPECT_EQ(rt.foreign().find(m.at(0))->tier, 1);
  for (int s : testing::page_nodes(m.p, m.bytes)) EXPECT_EQ(s, rt.allocator().node_of(1));
  EXPECT_EQ(rt.allocator().usage(0).resident, 0u);
  EXPECT_EQ(rt.allocator().usage(1).resident, 8 * page);
  EXPECT_EQ(rt.mover().counters().bytes_to_slow, 8 * page);
}

}  // namespace
}  // namespace tierpack::host

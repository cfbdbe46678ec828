// GroupMover conformance: evictions and prefetches keep data and addresses, are ordered after the
// last use, respect the budget, and a late or impossible prefetch is a counted stall or miss.
#include <algorithm>
#include <future>
#include <thread>

#include "alloc/gpu/memfd_backend.hpp"
#include "core/error.hpp"
#include "tests/migrate/gpu/mover_fixture.hpp"

namespace tierpack::gpu::testing {
namespace {

using namespace std::chrono_literals;

/// The allocator the twin-only tests use: the twin's chunk and page sizes, 16 chunks of device budget.
GpuAllocatorOptions twin_allocator_options(const TwinDeviceOptions& o) {
  GpuAllocatorOptions ao;
  ao.chunk_bytes = o.chunk_bytes;
  ao.page_bytes = o.granularity;
  ao.small_threshold = o.granularity / 4;
  ao.device_budget = 16 * o.chunk_bytes;
  ao.host_limit = 64 * o.chunk_bytes;
  return ao;
}

template <class Kind>
using GroupMoverTest = MoverTest<Kind>;
TYPED_TEST_SUITE(GroupMoverTest, Kinds, KindNames);

TYPED_TEST(GroupMoverTest, RoundTripKeepsAddressesAndData) {
  this->make(16);
  const StreamHandle s = this->streams_[0];
  auto g = this->make_group(4, 77, s);
  const auto before = g.blocks;
  this->mover_->evict(g.arena, s);
  this->mover_->drain();
  ArenaResidency r = this->alloc_->residency(g.arena);
  EXPECT_EQ(r.host_bytes, 4 * this->chunk());
  EXPECT_EQ(r.device_bytes, 0u);
  this->check(g, s);  // read through the host mapping: same pointers, correct bytes
  this->sync_all();
  EXPECT_EQ(this->dev_->take_mismatches(), 0u);
  this->mover_->prefetch(g.arena, s);
  EXPECT_TRUE(this->mover_->ensure_resident(g.arena));
  r = this->alloc_->residency(g.arena);
  EXPECT_EQ(r.device_bytes, 4 * this->chunk());
  EXPECT_TRUE(r.open);
  this->check(g, s);
  this->sync_all();
  EXPECT_EQ(this->dev_->take_mismatches(), 0u);
  EXPECT_EQ(g.blocks, before);
  const MoverCounters c = this->mover_->counters();
  EXPECT_EQ(c.bytes_to_host, 4 * this->chunk());
  EXPECT_EQ(c.bytes_to_device, 4 * this->chunk());
  EXPECT_EQ(c.failures, 0u);
  EXPECT_EQ(c.verified_chunks, 8u) << "every chunk with live data is checked behind the gate";
  EXPECT_EQ(c.rewrites, 0u) << "nothing wrote the group while it moved";
  EXPECT_LE(this->alloc_->stats().peak_device_handles, 16 * this->chunk());
}

// A kernel the plan does not know about writes a group after the copy of its move has read it and
// before the remap (the gate waits for that kernel): Note [Verified remaps] finds the change behind
// the gate and copies the chunk again, so the write survives the remap, in both directions.
// The writer is queued on the compute stream behind a long busy kernel before the move is issued
// (the copy waits on another, idle stream), so the copy runs during the busy kernel, the write after
// it, and the gate, whenever it is closed, after the write.
TYPED_TEST(GroupMoverTest, AWriteBetweenCopyAndRemapIsNotLost) {
#if defined(__SANITIZE_THREAD__)
  // The hidden writer and the copy engine touch the same bytes on two twin streams with no ordering
  // between them: the race this test is about (50 ms apart in time, but unsynchronised), which
  // ThreadSanitizer rightly reports. The normal build runs it, and the CUDA variant on a GPU.
  GTEST_SKIP() << "an intended race between a hidden writer and the copy engine: not run under ThreadSanitizer";
#endif
  this->make(16);
  const StreamHandle compute = this->streams_[0], other = this->streams_[1];
  auto g = this->make_group(2, 5, compute);
  this->sync_all();
  for (int round = 0; round < 2; ++round) {
    const bool evicting = round == 0;
    this->mover_->take_counters();
    this->dev_->busy(compute, std::chrono::milliseconds(50));
    this->fill(g, 100 + round, compute);
    if (evicting) this->mover_->evict(g.arena, other);
    else this->mover_->prefetch(g.arena, other);
    this->mover_->drain();
    const ArenaResidency r = this->alloc_->residency(g.arena);
    EXPECT_EQ(evicting ? r.host_bytes : r.device_bytes, 2 * this->chunk());
    this->check(g, compute);
    this->sync_all();
    EXPECT_EQ(this->dev_->take_mismatches(), 0u) << (evicting ? "eviction" : "prefetch") << " lost a write";
    const MoverCounters c = this->mover_->take_counters();
    EXPECT_EQ(c.rewrites, 2u) << (evicting ? "eviction" : "prefetch") << ": both chunks were written after their copy";
    EXPECT_EQ(c.failures, 0u);
  }
}

TYPED_TEST(GroupMoverTest, EvictionCopiesOnlyAfterTheLastUse) {
  this->make(16);
  const StreamHandle s = this->streams_[0];
  auto g = this->make_group(2, 1, s);
  this->fill(g, 500, s);
  // The last use is slow and still running when the eviction is issued.
  for (std::size_t i = 0; i < g.blocks.size(); ++i)
    this->dev_->fill(reinterpret_cast<std::uintptr_t>(g.blocks[i]), this->chunk(), 900 + i, s, 30ms);
  g.seed = 900;
  this->mover_->evict(g.arena, s);
  this->mover_->drain();
  this->check(g, this->streams_[1]);
  this->sync_all();
  EXPECT_EQ(this->dev_->take_mismatches(), 0u) << "the eviction copied before the last write finished";
}

TYPED_TEST(GroupMoverTest, PrefetchIntoAFullBudgetWaitsForEvictions) {
  this->make(4);
  const StreamHandle s = this->streams_[0];
  auto a = this->make_group(4, 10, s);  // fills the budget
  this->mover_->evict(a.arena, s);
  this->mover_->drain();
  auto b = this->make_group(4, 20, s);  // fills it again
  // Bring `a` back while `b` leaves: the prefetch can only run as the eviction frees handles.
  EXPECT_EQ(this->mover_->evict(b.arena, s), 1u) << "requests are numbered per arena";
  EXPECT_EQ(this->mover_->prefetch(a.arena, s), 2u);
  EXPECT_TRUE(this->mover_->ensure_resident(a.arena));
  this->mover_->drain();
  EXPECT_TRUE(this->mover_->request_done(a.arena, 2));
  EXPECT_TRUE(this->mover_->request_done(b.arena, 1));
  EXPECT_EQ(this->alloc_->residency(b.arena).host_bytes, 4 * this->chunk());
  this->check(a, s);
  this->check(b, s);
  this->sync_all();
  EXPECT_EQ(this->dev_->take_mismatches(), 0u);
  EXPECT_LE(this->alloc_->stats().peak_device_handles, 4 * this->chunk()) << "budget exceeded";
}

TYPED_TEST(GroupMoverTest, PrefetchWithNoMemoryToComeIsACountedMissNotAFault) {
  this->make(4);
  const StreamHandle s = this->streams_[0];
  auto a = this->make_group(2, 10, s);
  this->mover_->evict(a.arena, s);
  this->mover_->drain();
  std::vector<void*> hog;
  for (int i = 0; i < 4; ++i) hog.push_back(this->alloc_->allocate(this->chunk(), s));
  this->mover_->prefetch(a.arena, s);
  EXPECT_FALSE(this->mover_->ensure_resident(a.arena));
  EXPECT_EQ(this->mover_->counters().misses, 1u);
  this->check(a, s);  // still correct, read from the host
  this->sync_all();
  EXPECT_EQ(this->dev_->take_mismatches(), 0u);
  for (void* p : hog) this->alloc_->deallocate(p);
}

// A prefetch parked for device memory, then an eviction of the same group (the GPU runtime resuming
// its plan after a diverged iteration did this): the eviction must not wait behind the parked
// prefetch, or a thread waiting for evictions (the allocator's pressure handler) waits for ever.
TYPED_TEST(GroupMoverTest, AParkedPrefetchDoesNotBlockAnEvictionOfItsGroup) {
  this->make(4);
  const StreamHandle s = this->streams_[0];
  auto a = this->make_group(2, 10, s);
  this->mover_->evict(a.arena, s);
  this->mover_->drain();
  auto b = this->make_group(4, 20, s);  // the budget is full
  this->mover_->prefetch(a.arena, s);   // parks: no device memory, no eviction to free any
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  this->mover_->evict(a.arena, s);
  auto waiter = std::async(std::launch::async, [&] { return this->mover_->wait_for_eviction(); });
  const bool returned = waiter.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  EXPECT_TRUE(returned) << "the eviction waited behind the parked prefetch of its group";
  if (!returned) this->mover_->evict(b.arena, s);  // unblocks the waiter so the test can end
  waiter.get();
  this->mover_->drain();
  EXPECT_EQ(this->alloc_->residency(a.arena).host_bytes, 2 * this->chunk());
  this->check(a, s);
  this->check(b, s);
  this->sync_all();
  EXPECT_EQ(this->dev_->take_mismatches(), 0u);
}

// Note [Parked evictions]: with host memory full an eviction parks, and a second eviction of its
// group queues behind it. Neither can free device memory, so a thread that needs some does not wait
// for them (an allocation fails with out_of_memory); once a prefetch gives host memory back, the
// parked eviction goes ahead.
TYPED_TEST(GroupMoverTest, NothingWaitsForEvictionsParkedForHostMemory) {
  this->make(4, false, {}, 2);  // 4 chunks of device memory, 2 of host memory
  const StreamHandle s = this->streams_[0];
  auto a = this->make_group(2, 10, s);
  this->mover_->evict(a.arena, s);
  this->mover_->drain();  // host memory full
  auto b = this->make_group(2, 20, s);
  auto c = this->make_group(2, 30, s);  // device memory full
  this->mover_->evict(b.arena, s);  // parks
  this->mover_->evict(b.arena, s);  // queued behind it
  auto waiter = std::async(std::launch::async, [&] { return this->mover_->wait_for_eviction(); });
  const bool returned = waiter.wait_for(10s) == std::future_status::ready;
  EXPECT_TRUE(returned) << "a thread waited for evictions parked for host memory";
  if (!returned) this->mover_->evict(this->alloc_->create_arena("empty"), s);  // finishes at once: wakes it
  EXPECT_FALSE(waiter.get()) << "nothing that could free device memory was moving";
  EXPECT_THROW(this->alloc_->allocate(this->chunk(), s), out_of_memory);
  for (void* p : c.blocks) this->alloc_->deallocate(p);
  this->sync_all();
  this->alloc_->empty_cache();
  this->mover_->prefetch(a.arena, s);  // gives host memory back
  this->mover_->drain();
  EXPECT_EQ(this->alloc_->residency(a.arena).device_bytes, 2 * this->chunk());
  EXPECT_EQ(this->alloc_->residency(b.arena).host_bytes, 2 * this->chunk()) << "the parked eviction never went ahead";
  this->check(a, s);
  this->check(b, s);
  this->sync_all();
  EXPECT_EQ(this->dev_->take_mismatches(), 0u);
}

// The same for a thread waiting in ensure_resident for another group: its prefetch is parked for
// device memory, and the only eviction pending waits behind the parked prefetch of its own group
// (a resumed plan after a diverged iteration, seen hanging GpuRuntime.ResumesThePlanAfterOne-
// DivergedIteration about once in 280 runs). The blocking prefetch is given up; the wait ends.
TYPED_TEST(GroupMoverTest, AParkedPrefetchDoesNotBlockAnEvictionAnotherGroupWaitsFor) {
  this->make(4);
  const StreamHandle s = this->streams_[0];
  auto a = this->make_group(2, 10, s);
  auto b = this->make_group(2, 20, s);
  this->mover_->evict(a.arena, s);
  this->mover_->evict(b.arena, s);
  this->mover_->drain();
  auto c = this->make_group(4, 30, s);  // the budget is full
  this->mover_->prefetch(b.arena, s);   // parks
  this->mover_->evict(b.arena, s);      // queued behind it
  this->mover_->prefetch(a.arena, s);   // parks
  auto waiter = std::async(std::launch::async, [&] { return this->mover_->ensure_resident(a.arena); });
  const bool returned = waiter.wait_for(10s) == std::future_status::ready;
  EXPECT_TRUE(returned) << "ensure_resident waited for an eviction blocked by a parked prefetch";
  if (!returned) this->mover_->evict(c.arena, s);  // frees device memory: unblocks the waiter
  waiter.get();
  this->mover_->drain();
  this->check(a, s);
  this->check(b, s);
  this->check(c, s);
  this->sync_all();
  EXPECT_EQ(this->dev_->take_mismatches(), 0u);
}

TYPED_TEST(GroupMoverTest, AllocationsMeantForAnEvictedGroupLandElsewhere) {
  this->make(16);
  const StreamHandle s = this->streams_[0];
  auto g = this->make_group(2, 3, s);
  this->alloc_->deallocate(g.blocks.back());
  g.blocks.pop_back();
  this->mover_->evict(g.arena, s);
  void* p = this->alloc_->allocate(this->chunk() / 2, s, g.arena);
  EXPECT_NE(this->alloc_->arena_of(p), g.arena);
  EXPECT_GE(this->alloc_->stats().closed_arena_fallbacks, 1u);
  this->alloc_->deallocate(p);
  this->mover_->drain();
}

TYPED_TEST(GroupMoverTest, RemapWhileOtherGroupsAreInUse) {
  this->make(32);
  const StreamHandle s0 = this->streams_[0], s1 = this->streams_[1];
  auto moving = this->make_group(4, 1000, s0);
  auto busy = this->make_group(4, 2000, s1);
  for (int round = 0; round < 20; ++round) {
    this->fill(busy, 3000 + round * 10, s1);  // keeps running on its stream during the remaps
    this->check(busy, s1);
    this->mover_->evict(moving.arena, s0);
    this->mover_->prefetch(moving.arena, s0);
    ASSERT_TRUE(this->mover_->ensure_resident(moving.arena));
    this->check(moving, s0);
  }
  this->sync_all();
  EXPECT_EQ(this->dev_->take_mismatches(), 0u);
}

// A kernel the runtime never hears about (no op event, no prediction) reads a group on the compute
// stream again and again while the group moves back and forth with copies ordered after another,
// idle stream: the remap gate (Note [Remap gate]) must keep every remap window out of its way.
// On CUDA a miss is CUDA_ERROR_ILLEGAL_ADDRESS; on the twin an illegal device_access.
TYPED_TEST(GroupMoverTest, HiddenKernelDuringMovesNeverFaults) {
  this->make(8);
  const StreamHandle compute = this->streams_[0], other = this->streams_[1];
  auto g = this->make_group(2, 77, compute);
  this->backend().synchronize_stream(compute);
  const int rounds = static_cast<int>(env_count("TIERPACK_STRESS_ROUNDS", 40));
  for (int i = 0; i < rounds; ++i) {
    for (int k = 0; k < 3; ++k) {
      this->dev_->busy(compute, std::chrono::microseconds(100));
      this->check(g, compute);  // the hidden reader: no ensure_resident, no op event
    }
    if (i % 2 == 0) this->mover_->evict(g.arena, other);
    else this->mover_->prefetch(g.arena, other);
    if (i % 8 == 7) this->mover_->drain();
  }
  this->mover_->drain();
  this->check(g, compute);
  this->sync_all();
  EXPECT_EQ(this->dev_->take_mismatches(), 0u);
  const MoverCounters c = this->mover_->counters();
  EXPECT_EQ(c.failures, 0u);
  EXPECT_GT(c.gates, 0u);
  EXPECT_GE(c.evictions + c.prefetches, static_cast<std::uint64_t>(rounds) / 2);
  if (MemfdBackend* twin = twin_backend(*this->dev_)) {
    EXPECT_EQ(twin->illegal_accesses(), 0u);
  }
}

// The same hidden reader without the gate: the twin sees the remap window (this is the fault GPT-2
// large hit at 60% and 45% budgets on the H200), which shows the test above can fail.
TEST(GroupMoverTwin, WithoutTheGateAHiddenKernelSeesTheRemap) {
#if defined(__SANITIZE_THREAD__)
  // A negative control that needs a race to happen within 400 round trips; ThreadSanitizer's
  // scheduling made it miss once (scripts/test.sh's TSan stage). The normal build runs it.
  GTEST_SKIP() << "timing-based negative control: not run under ThreadSanitizer";
#endif
  TwinDeviceOptions o;
  auto dev = make_twin_device(o);
  MemfdBackend* twin = twin_backend(*dev);
  const GpuAllocatorOptions ao = twin_allocator_options(o);
  const StreamHandle compute = twin->create_stream(), other = twin->create_stream();
  {
    GpuAllocator alloc(*twin, ao);
    MoverOptions mo;
    mo.gate = false;
    GroupMover mover(alloc, mo);
    const ArenaId a = alloc.create_arena("g");
    void* p = alloc.allocate(4 * o.chunk_bytes, compute, a);
    const auto va = reinterpret_cast<std::uintptr_t>(p);
    for (int i = 0; i < 400 && twin->illegal_accesses() == 0; ++i) {
      for (int k = 0; k < 4; ++k)
        twin->enqueue(compute, [&] {
          try {
            twin->device_access(va, 4 * o.chunk_bytes, [](void*) { std::this_thread::sleep_for(std::chrono::microseconds(20)); });
          } catch (const std::exception&) {
            // counted by the twin
          }
        });
      if (i % 2 == 0) mover.evict(a, other);
      else mover.prefetch(a, other);
      mover.drain();
    }
    EXPECT_GT(twin->illegal_accesses(), 0u) << "400 unguarded round trips never overlapped the hidden kernel";
    twin->synchronize_stream(compute);
    mover.drain();
    alloc.deallocate(p);
  }
  twin->destroy_stream(compute);
  twin->destroy_stream(other);
}

// The same write without verification is lost: the negative control of the test above.
TEST(GroupMoverTwin, WithoutVerificationAWriteBetweenCopyAndRemapIsLost) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the same intended race as AWriteBetweenCopyAndRemapIsNotLost: not run under ThreadSanitizer";
#endif
  TwinDeviceOptions o;
  auto dev = make_twin_device(o);
  VmmBackend& be = dev->backend();
  const GpuAllocatorOptions ao = twin_allocator_options(o);
  const StreamHandle compute = be.create_stream(), other = be.create_stream();
  {
    GpuAllocator alloc(be, ao);
    MoverOptions mo;
    mo.verify = Verify::off;
    GroupMover mover(alloc, mo);
    const ArenaId a = alloc.create_arena("g");
    void* p = alloc.allocate(o.chunk_bytes, compute, a);
    const auto va = reinterpret_cast<std::uintptr_t>(p);
    dev->fill(va, o.chunk_bytes, 1, compute);
    be.synchronize_stream(compute);
    dev->busy(compute, std::chrono::milliseconds(50));
    dev->fill(va, o.chunk_bytes, 2, compute);
    mover.evict(a, other);
    mover.drain();
    dev->check(va, o.chunk_bytes, 2, compute);
    be.synchronize_stream(compute);
    EXPECT_GT(dev->take_mismatches(), 0u) << "without verification the write after the copy should be lost";
    EXPECT_EQ(mover.counters().verified_chunks, 0u);
    alloc.deallocate(p);
  }
  be.destroy_stream(compute);
  be.destroy_stream(other);
}

TEST(GroupMoverTwin, LatePrefetchIsACountedStall) {
  TwinDeviceOptions o;
  o.copy_delay = std::chrono::milliseconds(20);
  auto dev = make_twin_device(o);
  const GpuAllocatorOptions ao = twin_allocator_options(o);
  GpuAllocator alloc(dev->backend(), ao);
  GroupMover mover(alloc);
  const ArenaId a = alloc.create_arena("g");
  void* p = alloc.allocate(o.chunk_bytes, 0, a);
  dev->fill(reinterpret_cast<std::uintptr_t>(p), o.chunk_bytes, 9, 0);
  mover.evict(a, 0);
  mover.drain();
  mover.take_counters();
  mover.prefetch(a, 0);
  EXPECT_TRUE(mover.ensure_resident(a));  // needed at once: waits for the slow copy
  const MoverCounters c = mover.take_counters();
  EXPECT_EQ(c.stalls, 1u);
  EXPECT_GT(c.stall_ns, 0.0);
  EXPECT_EQ(c.misses, 0u);
  dev->check(reinterpret_cast<std::uintptr_t>(p), o.chunk_bytes, 9, 0);
  dev->backend().synchronize_stream(0);
  EXPECT_EQ(dev->take_mismatches(), 0u);
  alloc.deallocate(p);
}

// Note [When to remap]: with RemapWhen::idle, groups nobody waits for are remapped once no copy is in
// flight, in one batch and never while copies run; eagerly, a gate follows each finished chunk copy,
// most of them while later copies still run (the costly case on a GPU).
TEST(GroupMoverTwin, IdleRemapsWaitForTheCopiesAndBatchThem) {
  TwinDeviceOptions o;
  o.copy_delay = std::chrono::milliseconds(5);
  auto dev = make_twin_device(o);
  const GpuAllocatorOptions ao = twin_allocator_options(o);
  MoverCounters c[2];
  for (int idle = 0; idle < 2; ++idle) {
    GpuAllocator alloc(dev->backend(), ao);
    MoverOptions mo;
    mo.remap_when = idle ? RemapWhen::idle : RemapWhen::eager;
    mo.remap_max_delay = std::chrono::seconds(10);
    GroupMover mover(alloc, mo);
    std::vector<ArenaId> arenas;
    std::vector<void*> blocks;
    for (int g = 0; g < 3; ++g) {
      arenas.push_back(alloc.create_arena("g"));
      blocks.push_back(alloc.allocate(4 * o.chunk_bytes, 0, arenas.back()));
      dev->fill(reinterpret_cast<std::uintptr_t>(blocks.back()), 4 * o.chunk_bytes, 40 + g, 0);
    }
    for (ArenaId a : arenas) mover.evict(a, 0);
    // Nobody waits (no ensure_resident, no drain): poll until every group has left.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline &&
           !std::all_of(arenas.begin(), arenas.end(), [&](ArenaId a) { return mover.idle(a); }))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    c[idle] = mover.counters();
    EXPECT_EQ(c[idle].bytes_to_host, 12 * o.chunk_bytes) << (idle ? "idle" : "eager");
    for (int g = 0; g < 3; ++g) dev->check(reinterpret_cast<std::uintptr_t>(blocks[g]), 4 * o.chunk_bytes, 40 + g, 0);
    dev->backend().synchronize_stream(0);
    EXPECT_EQ(dev->take_mismatches(), 0u) << (idle ? "idle" : "eager");
    for (void* p : blocks) alloc.deallocate(p);
  }
  EXPECT_EQ(c[1].busy_gates, 0u) << "an idle-mode remap ran while copies were in flight";
  EXPECT_LE(c[1].gates, 2u) << "idle mode should remap the three groups in one batch";
  EXPECT_GE(c[0].gates, 4u) << "eager mode: one gate per finished chunk copy (the negative control)";
}

// GroupMover::request_done: a prefetch into a half-full budget moves in parts (what fits now, the
// rest once the eviction beside it has given memory back); the request is over once, when its last
// part is, and not before (the schedule executor times moves with it: Note [GPU run statistics]).
TEST(GroupMoverTwin, ARequestMovedInPartsIsOverOnceWhenItsLastPartIs) {
  TwinDeviceOptions o;
  o.copy_delay = std::chrono::milliseconds(3);
  auto dev = make_twin_device(o);
  GpuAllocatorOptions ao = twin_allocator_options(o);
  ao.device_budget = 4 * o.chunk_bytes;
  GpuAllocator alloc(dev->backend(), ao);
  GroupMover mover(alloc, MoverOptions{});
  const ArenaId a = alloc.create_arena("a"), b = alloc.create_arena("b");
  void* pa = alloc.allocate(4 * o.chunk_bytes, 0, a);
  dev->fill(reinterpret_cast<std::uintptr_t>(pa), 4 * o.chunk_bytes, 5, 0);
  EXPECT_EQ(mover.evict(a, 0), 1u);
  mover.drain();
  void* pb = alloc.allocate(2 * o.chunk_bytes, 0, b);  // half the budget: `a` gets two chunks at once...
  EXPECT_EQ(mover.prefetch(a, 0), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(mover.evict(b, 0), 1u);  // ... and the other two once `b` has left
  // Poll while it moves: never done before every chunk of `a` is back on the device.
  while (!mover.request_done(a, 2)) std::this_thread::sleep_for(std::chrono::microseconds(200));
  const ArenaResidency r = alloc.residency(a);
  EXPECT_EQ(r.host_bytes + r.moving_bytes, 0u) << "request reported over while part of the group was still away";
  EXPECT_FALSE(mover.request_done(a, 3)) << "a request moved in parts was counted more than once";
  mover.drain();
  EXPECT_GE(mover.counters().prefetches, 1u);
  dev->check(reinterpret_cast<std::uintptr_t>(pa), 4 * o.chunk_bytes, 5, 0);
  dev->backend().synchronize_stream(0);
  EXPECT_EQ(dev->take_mismatches(), 0u);
  alloc.deallocate(pa);
  alloc.deallocate(pb);
}

// ... but a group a training thread waits for is remapped at once, even while other copies run.
TEST(GroupMoverTwin, IdleRemapsDoNotKeepAWaitingThreadWaiting) {
  TwinDeviceOptions o;
  o.copy_delay = std::chrono::milliseconds(5);
  auto dev = make_twin_device(o);
  const GpuAllocatorOptions ao = twin_allocator_options(o);
  GpuAllocator alloc(dev->backend(), ao);
  MoverOptions mo;
  mo.remap_when = RemapWhen::idle;
  mo.remap_max_delay = std::chrono::seconds(10);
  GroupMover mover(alloc, mo);
  const ArenaId a = alloc.create_arena("leaving"), b = alloc.create_arena("needed");
  void* pa = alloc.allocate(12 * o.chunk_bytes, 0, a);
  void* pb = alloc.allocate(o.chunk_bytes, 0, b);
  dev->fill(reinterpret_cast<std::uintptr_t>(pb), o.chunk_bytes, 7, 0);
  mover.evict(b, 0);
  mover.drain();
  mover.take_counters();
  mover.evict(a, 0);     // 12 chunk copies, 60 ms
  mover.prefetch(b, 0);  // one, 5 ms
  EXPECT_TRUE(mover.ensure_resident(b));
  const MoverCounters c = mover.counters();
  EXPECT_GE(c.busy_gates, 1u) << "the waited-for group's remap waited for the other group's copies";
  dev->check(reinterpret_cast<std::uintptr_t>(pb), o.chunk_bytes, 7, 0);
  mover.drain();
  dev->backend().synchronize_stream(0);
  EXPECT_EQ(dev->take_mismatches(), 0u);
  alloc.deallocate(pa);
  alloc.deallocate(pb);
}

}  // namespace
}  // namespace tierpack::gpu::testing

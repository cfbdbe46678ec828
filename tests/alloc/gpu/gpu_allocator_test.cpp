// Conformance suite of the GPU allocator, typed over devices: the memfd twin (always) and a real
// CUDA device (skipped with "no CUDA device" where there is none).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "alloc/gpu/gpu_allocator.hpp"
#include "alloc/gpu/memfd_backend.hpp"
#include "core/error.hpp"
#include "tests/alloc/gpu/test_device.hpp"

namespace tierpack::gpu::testing {
namespace {

using namespace std::chrono_literals;

template <class Kind>
class GpuAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    dev_ = Kind::make(&why);
    if (!dev_) GTEST_SKIP() << why;
    for (auto& s : streams_) s = backend().create_stream();
  }
  void TearDown() override {
    if (!dev_) return;
    for (auto s : streams_) backend().synchronize_stream(s);
    alloc_.reset();
    for (auto s : streams_) backend().destroy_stream(s);
  }
  VmmBackend& backend() { return dev_->backend(); }
  std::size_t chunk() const { return dev_->chunk_bytes(); }
  std::size_t page() const { return dev_->backend().info().granularity; }

  GpuAllocator& make(std::size_t budget_chunks, bool spill) {
    GpuAllocatorOptions o;
    o.chunk_bytes = chunk();
    o.page_bytes = page();
    o.small_threshold = page() / 4;
    o.device_budget = budget_chunks * chunk();
    o.host_limit = 64 * chunk();
    o.spill_to_host = spill;
    alloc_ = std::make_unique<GpuAllocator>(backend(), o);
    return *alloc_;
  }
  void sync_all() {
    for (auto s : streams_) backend().synchronize_stream(s);
  }
  std::uintptr_t u(void* p) { return reinterpret_cast<std::uintptr_t>(p); }

  std::unique_ptr<TestDevice> dev_;
  std::unique_ptr<GpuAllocator> alloc_;
  StreamHandle streams_[3] = {};
};

using Kinds = ::testing::Types<TwinKind, CudaKind>;
struct KindNames {
  template <class T>
  static std::string GetName(int) {
    return T::kName;
  }
};
TYPED_TEST_SUITE(GpuAllocatorTest, Kinds, KindNames);

TYPED_TEST(GpuAllocatorTest, FreedBlockIsReusedAtOnceBySameStream) {
  auto& a = this->make(8, false);
  const StreamHandle s = this->streams_[0];
  void* p = a.allocate(this->chunk() / 2, s);
  ASSERT_NE(p, nullptr);
  this->dev_->fill(this->u(p), this->chunk() / 2, 1, s);
  a.deallocate(p);  // no synchronisation: the stream orders the reuse
  void* q = a.allocate(this->chunk() / 2, s);
  EXPECT_EQ(p, q);
  this->dev_->fill(this->u(q), this->chunk() / 2, 2, s);
  this->dev_->check(this->u(q), this->chunk() / 2, 2, s);
  EXPECT_EQ(this->dev_->take_mismatches(), 0u);
  a.deallocate(q);
  EXPECT_EQ(a.allocate(0, s), nullptr);
}

TYPED_TEST(GpuAllocatorTest, CrossStreamReuseIsOrderedBehindTheFreeingStream) {
  // One chunk of budget and no spilling: the second stream can only get the first stream's memory,
  // and must not write it before the first stream's (slow) work on it is done.
  auto& a = this->make(1, false);
  const StreamHandle s1 = this->streams_[0], s2 = this->streams_[1];
  const std::size_t n = this->chunk();
  void* p = a.allocate(n, s1);
  this->dev_->fill(this->u(p), n, 11, s1, 30ms);
  a.deallocate(p);
  void* q = a.allocate(n, s2);
  EXPECT_EQ(p, q);
  this->dev_->fill(this->u(q), n, 22, s2);
  this->sync_all();
  this->dev_->check(this->u(q), n, 22, s2);
  EXPECT_EQ(this->dev_->take_mismatches(), 0u) << "the second stream wrote before the first stream's work finished";
  EXPECT_GE(a.stats().cross_stream_reuses, 1u);
  a.deallocate(q);
}

TYPED_TEST(GpuAllocatorTest, RecordStreamDelaysReuseUntilTheOtherStreamIsDone) {
  auto& a = this->make(8, false);
  const StreamHandle s1 = this->streams_[0], s2 = this->streams_[1];
  const std::size_t n = this->chunk() / 4;
  void* p = a.allocate(n, s1);
  this->dev_->fill(this->u(p), n, 5, s2, 30ms);  // used on another stream
  a.record_stream(p, s2);
  a.deallocate(p);
  void* q = a.allocate(n, s1);
  EXPECT_NE(p, q) << "a block recorded on a busy stream was handed out again";
  this->backend().synchronize_stream(s2);
  this->dev_->check(this->u(p), n, 5, s1);
  this->backend().synchronize_stream(s1);
  EXPECT_EQ(this->dev_->take_mismatches(), 0u);
  void* r = a.allocate(n, s1);  // s2 is done now: p's block is free again
  EXPECT_EQ(r, p);
  a.deallocate(q);
  a.deallocate(r);
}

TYPED_TEST(GpuAllocatorTest, SmallBlocksSharePagesAndNeverCrossThem) {
  auto& a = this->make(32, false);
  const StreamHandle s = this->streams_[0];
  std::mt19937_64 rng(7);
  std::vector<std::pair<void*, std::size_t>> blocks;
  std::set<std::uintptr_t> pages;
  for (int i = 0; i < 400; ++i) {
    const std::size_t n = 8 + rng() % (this->page() / 16);
    void* p = a.allocate(n, s);
    const std::uintptr_t first = this->u(p) / this->page(), last = (this->u(p) + n - 1) / this->page();
    EXPECT_EQ(first, last) << "small block of " << n << " bytes crosses a page";
    pages.insert(first);
    blocks.emplace_back(p, n);
  }
  EXPECT_LT(pages.size(), blocks.size() / 4) << "small blocks do not share pages";
  for (auto& [p, n] : blocks) a.deallocate(p);
  EXPECT_EQ(a.stats().allocated, 0u);
}

TYPED_TEST(GpuAllocatorTest, LargeBlocksSpanChunksAndHoldData) {
  auto& a = this->make(16, false);
  const StreamHandle s = this->streams_[0];
  const std::size_t n = this->chunk() * 7 / 2;
  void* p = a.allocate(n, s);
  void* q = a.allocate(n, s);
  this->dev_->fill(this->u(p), n, 3, s);
  this->dev_->fill(this->u(q), n, 4, s);
  this->dev_->check(this->u(p), n, 3, s);
  this->dev_->check(this->u(q), n, 4, s);
  this->sync_all();
  EXPECT_EQ(this->dev_->take_mismatches(), 0u);
  EXPECT_GE(a.block_size(p), n);
  a.deallocate(p);
  a.deallocate(q);
}

TYPED_TEST(GpuAllocatorTest, BudgetIsEnforcedAndOutOfMemoryNamesIt) {
  auto& a = this->make(4, false);
  const StreamHandle s = this->streams_[0];
  std::vector<void*> held;
  std::string message;
  try {
    for (int i = 0; i < 10; ++i) held.push_back(a.allocate(this->chunk(), s));
  } catch (const out_of_memory& e) {
    message = e.what();
  }
  EXPECT_EQ(held.size(), 4u);
  EXPECT_NE(message.find("gpu0"), std::string::npos) << message;
  EXPECT_NE(message.find("budget"), std::string::npos) << message;
  EXPECT_NE(message.find("requested"), std::string::npos) << message;
  EXPECT_NE(message.find("resident"), std::string::npos) << message;
  const AllocatorStats st = a.stats();
  EXPECT_LE(st.peak_device_handles, 4 * this->chunk());
  EXPECT_EQ(st.out_of_memory, 1u);
  // Recovery: after a free the same request succeeds.
  a.deallocate(held.back());
  held.pop_back();
  void* p = a.allocate(this->chunk(), s);
  EXPECT_NE(p, nullptr);
  held.push_back(p);
  for (void* q : held) a.deallocate(q);
}

TYPED_TEST(GpuAllocatorTest, OverBudgetChunksSpillToHostAndStayCorrect) {
  auto& a = this->make(2, true);
  const StreamHandle s = this->streams_[0];
  std::vector<void*> held;
  for (int i = 0; i < 6; ++i) {
    held.push_back(a.allocate(this->chunk(), s));
    this->dev_->fill(this->u(held.back()), this->chunk(), 100 + i, s);
  }
  for (int i = 0; i < 6; ++i) this->dev_->check(this->u(held[i]), this->chunk(), 100 + i, s);
  this->sync_all();
  EXPECT_EQ(this->dev_->take_mismatches(), 0u);
  const AllocatorStats st = a.stats();
  EXPECT_EQ(st.spilled_chunks, 4u);
  EXPECT_LE(st.peak_device_handles, 2 * this->chunk());
  EXPECT_EQ(st.segment_bytes[static_cast<int>(Residence::host)], 4 * this->chunk());
  for (void* q : held) a.deallocate(q);
}

// Note [Spill segments]: room in a spilled chunk serves only requests that would spill anyway.
TYPED_TEST(GpuAllocatorTest, SpilledChunksAreReleasedOnceFreeSoLaterTensorsGetDeviceMemory) {
  auto& a = this->make(2, true);
  const StreamHandle s = this->streams_[0];
  const std::size_t q = this->chunk() / 4 + 4096;  // above the small-block threshold (on CUDA a chunk is a page)
  void* d0 = a.allocate(this->chunk(), s);
  void* d1 = a.allocate(this->chunk(), s);
  void* spilled = a.allocate(this->chunk() / 2, s);  // over budget: host memory
  EXPECT_EQ(a.stats().segment_bytes[static_cast<int>(Residence::host)], this->chunk());
  void* shared = a.allocate(q, s);  // would spill too: takes the spilled chunk's free half
  EXPECT_TRUE(this->u(shared) >= this->u(spilled) && this->u(shared) < this->u(spilled) + this->chunk());
  EXPECT_EQ(a.stats().segment_bytes[static_cast<int>(Residence::host)], this->chunk());
  EXPECT_EQ(a.stats().spilled_chunks, 1u);
  void* tiny = a.allocate(4096, s);  // a page of small blocks, spilled to the host as well
  EXPECT_EQ(a.residence_of(tiny), Residence::host);
  a.deallocate(d1);
  this->sync_all();
  void* small = a.allocate(q, s);  // device memory is free again: not the spilled chunk's room
  EXPECT_EQ(a.residence_of(small), Residence::device);
  EXPECT_FALSE(this->u(small) >= this->u(spilled) && this->u(small) < this->u(spilled) + this->chunk());
  a.deallocate(spilled);
  a.deallocate(shared);
  a.deallocate(tiny);
  a.deallocate(small);
  this->sync_all();
  void* again = a.allocate(this->chunk() / 2, s);  // the spilled chunk is gone; device memory is free
  EXPECT_EQ(a.stats().segment_bytes[static_cast<int>(Residence::host)], 0u);
  EXPECT_EQ(a.residence_of(again), Residence::device);
  a.deallocate(again);
  a.deallocate(d0);
}

// Note [Spill segments]: over the budget, requests share spilled chunks instead of taking one each (with
// 256 MiB chunks GPT-2 large filled its 64 GiB host limit with 21 GiB of tensors that way). The shared
// chunk stays until its last block is freed, and another stream never gets its room without an event.
TYPED_TEST(GpuAllocatorTest, SpilledRequestsShareHostChunksAndStayCorrect) {
  auto& a = this->make(1, true);
  const StreamHandle s = this->streams_[0], t = this->streams_[1];
  const std::size_t q = this->chunk() / 4 + 4096;  // three to a chunk, above the small-block threshold
  void* d = a.allocate(this->chunk(), s);          // the whole budget
  std::vector<void*> held;
  for (int i = 0; i < 8; ++i) {
    held.push_back(a.allocate(q, s));
    this->dev_->fill(this->u(held.back()), q, 40 + i, s);
  }
  EXPECT_EQ(a.stats().segment_bytes[static_cast<int>(Residence::host)], 3 * this->chunk());
  EXPECT_EQ(a.stats().spilled_chunks, 3u);
  void* other = a.allocate(q, t);  // another stream: a chunk of its own
  EXPECT_EQ(a.stats().segment_bytes[static_cast<int>(Residence::host)], 4 * this->chunk());
  for (int i = 0; i < 8; i += 2) a.deallocate(held[i]);  // every chunk keeps live blocks
  void* refill = a.allocate(q, s);                       // into a freed block
  this->dev_->fill(this->u(refill), q, 99, s);
  EXPECT_EQ(a.stats().segment_bytes[static_cast<int>(Residence::host)], 4 * this->chunk());
  for (int i = 1; i < 8; i += 2) this->dev_->check(this->u(held[i]), q, 40 + i, s);
  this->dev_->check(this->u(refill), q, 99, s);
  this->sync_all();
  EXPECT_EQ(this->dev_->take_mismatches(), 0u);
  for (int i = 1; i < 8; i += 2) a.deallocate(held[i]);
  a.deallocate(refill);
  a.deallocate(other);
  a.deallocate(d);
  this->sync_all();
  void* next = a.allocate(q, s);  // releases run on the next call: the host chunks are gone
  EXPECT_EQ(a.stats().segment_bytes[static_cast<int>(Residence::host)], 0u);
  a.deallocate(next);
}

// Note [Split segments]: a group's segment left partly on the host (its eviction found a host handle
// for one chunk of two) is released once its tensors are gone, so the group's next tensors land in
// the group again, on the device, instead of falling back to the default arena for good.
TYPED_TEST(GpuAllocatorTest, AnEmptiedSegmentLeftPartlyOnTheHostIsReleasedAndItsGroupOpensAgain) {
  GpuAllocatorOptions o;
  o.chunk_bytes = this->chunk();
  o.page_bytes = this->page();
  o.small_threshold = this->page() / 4;
  o.device_budget = 8 * this->chunk();
  o.host_limit = this->chunk();  // one host handle: the eviction moves one chunk of two
  this->alloc_ = std::make_unique<GpuAllocator>(this->backend(), o);
  GpuAllocator& a = *this->alloc_;
  const StreamHandle s = this->streams_[0];
  const ArenaId g = a.create_arena("group", 2 * this->chunk());
  void* p = a.allocate(2 * this->chunk(), s, g);
  ASSERT_EQ(a.arena_of(p), g);
  this->sync_all();
  const MigrationTicket t = a.begin_migration(g, Residence::host);
  ASSERT_EQ(t.moves.size(), 1u);
  EXPECT_EQ(t.chunks_left, 1u);
  for (const ChunkMove& mv : t.moves) {  // the mover's remap (no copy: nothing here reads the bytes)
    this->backend().unmap(mv.va, mv.bytes);
    this->backend().map(mv.va, mv.to.phys);
  }
  a.finish_migration(t);
  EXPECT_FALSE(a.residency(g).open) << "one chunk on the host";
  a.deallocate(p);
  this->sync_all();
  void* q = a.allocate(this->chunk(), s, g);
  EXPECT_EQ(a.arena_of(q), g) << "the group's next tensor went to the default arena";
  EXPECT_EQ(a.residence_of(q), Residence::device);
  EXPECT_EQ(a.stats().closed_arena_fallbacks, 0u);
  EXPECT_EQ(a.stats().segment_bytes[static_cast<int>(Residence::host)], 0u) << "the split segment is gone";
  a.deallocate(q);
}

// Note [Closed arenas]: the mover closes and reopens arenas with its own lock held, while the training
// thread may hold the allocator's lock waiting for a stream the mover has gated; here it waits in
// `allocate` for a busy stream to pass a segment it reclaims. Closing an arena must not wait for it.
TYPED_TEST(GpuAllocatorTest, ClosingAnArenaNeverWaitsForAnAllocationWaitingForAStream) {
  auto& a = this->make(3, false);
  const StreamHandle s0 = this->streams_[0], s1 = this->streams_[1];
  const ArenaId g = a.create_arena("group", 0);
  void* p = a.allocate(this->chunk(), s1);
  void* q = a.allocate(this->chunk(), s0);
  this->dev_->busy(s1, 3s);
  a.deallocate(p);  // empty, but s1 passes its last use only after the busy work
  std::atomic<bool> allocated{false};
  std::thread waiter([&] {
    void* r = a.allocate(2 * this->chunk(), s0);  // one idle handle, then reclaims p's segment, waiting
    allocated = true;
    a.deallocate(r);
  });
  std::this_thread::sleep_for(300ms);  // the waiter is inside allocate, holding the lock, by now
  a.set_arena_closed(g, true);
  a.set_arena_closed(g, false);
  EXPECT_FALSE(allocated.load()) << "closing an arena waited for the allocation waiting for stream s1";
  waiter.join();
  EXPECT_EQ(a.stats().segments_reclaimed, 1u) << "the allocation did not reclaim the busy stream's segment";
  a.deallocate(q);
}

TYPED_TEST(GpuAllocatorTest, EmptyCacheGivesDeviceMemoryBack) {
  auto& a = this->make(8, false);
  const StreamHandle s = this->streams_[0];
  std::vector<void*> held;
  for (int i = 0; i < 4; ++i) held.push_back(a.allocate(this->chunk(), s));
  for (void* p : held) a.deallocate(p);
  EXPECT_EQ(a.stats().device_handles, 4 * this->chunk());  // cached
  a.empty_cache();
  EXPECT_EQ(a.stats().device_handles, 0u);
  EXPECT_EQ(a.stats().segment_bytes[0], 0u);
}

TYPED_TEST(GpuAllocatorTest, ManyThreadsWithCrossThreadFreesKeepPatterns) {
  auto& a = this->make(48, true);
  const std::uint64_t seed = test_seed();
  std::mutex m;
  std::vector<std::tuple<void*, std::size_t, std::uint64_t, StreamHandle>> shared;
  std::atomic<bool> failed{false};
  auto worker = [&](int t) {
    std::mt19937_64 rng(seed + t);
    const StreamHandle s = this->streams_[t % 3];
    for (int i = 0; i < 300 && !failed; ++i) {
      try {
        if (rng() % 2 == 0) {
          const std::size_t n = 8 * (1 + rng() % (rng() % 4 == 0 ? this->chunk() / 2 : 512));
          void* p = a.allocate(n, s);
          const std::uint64_t pat = rng();
          this->dev_->fill(this->u(p), n, pat, s);
          std::lock_guard lk(m);
          shared.emplace_back(p, n, pat, s);
        } else {
          std::tuple<void*, std::size_t, std::uint64_t, StreamHandle> victim;
          {
            std::lock_guard lk(m);
            if (shared.empty()) continue;
            const std::size_t k = rng() % shared.size();
            victim = shared[k];
            shared[k] = shared.back();
            shared.pop_back();
          }
          auto [p, n, pat, vs] = victim;
          this->dev_->check(this->u(p), n, pat, vs);  // on the allocating stream, then freed in its order
          a.deallocate(p);
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "seed " << seed << ": " << e.what();
        failed = true;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  for (auto& [p, n, pat, vs] : shared) {
    this->dev_->check(this->u(p), n, pat, vs);
    a.deallocate(p);
  }
  this->sync_all();
  EXPECT_EQ(this->dev_->take_mismatches(), 0u) << "seed " << seed;
  EXPECT_EQ(a.stats().allocated, 0u);
}

// ---- twin only: fault injection (reliability issue 9, item 4)

TEST(GpuAllocatorTwin, HandleCreationFailureIsOutOfMemoryAndRecoverable) {
  std::atomic<bool> fail{false};
  TwinOptions t;
  t.granularity = 64 << 10;
  t.device_bytes = 16 << 20;
  t.fail_create = [&](Residence, std::size_t) { return fail.load(); };
  MemfdBackend be(t);
  GpuAllocatorOptions o;
  o.chunk_bytes = 256 << 10;
  o.page_bytes = 64 << 10;
  o.small_threshold = 16 << 10;
  o.spill_to_host = true;
  o.host_limit = 4 << 20;
  {
    GpuAllocator a(be, o);
    fail = true;
    EXPECT_THROW(a.allocate(o.chunk_bytes, 0), out_of_memory);
    EXPECT_EQ(be.created_bytes(Residence::device), 0u);
    fail = false;
    void* p = a.allocate(o.chunk_bytes, 0);
    EXPECT_NE(p, nullptr);
    a.deallocate(p);
  }
  EXPECT_EQ(be.created_bytes(Residence::device), 0u) << "handles leaked";
  EXPECT_EQ(be.created_bytes(Residence::host), 0u) << "handles leaked";
}

TEST(GpuAllocatorTwin, UnknownPointerFreeIsIgnored) {
  MemfdBackend be(TwinOptions{64 << 10, 16 << 20, 16 << 20, {}, {}});
  GpuAllocatorOptions o;
  o.chunk_bytes = 256 << 10;
  o.page_bytes = 64 << 10;
  o.small_threshold = 16 << 10;
  GpuAllocator a(be, o);
  int x = 0;
  a.deallocate(&x);  // noexcept path: counted, not fatal
  EXPECT_EQ(a.stats().frees, 0u);
}

}  // namespace
}  // namespace tierpack::gpu::testing

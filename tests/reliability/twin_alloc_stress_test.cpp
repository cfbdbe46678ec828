// Allocator stress on the GPU tier's memfd twin (issue 9, guarantee 2), after mimalloc's test-stress:
// threads allocate random sizes from 1 B to 64 MiB on their own streams, write a pattern derived from
// the block's identity *on the stream* (stream-ordered, as a kernel would), hand some blocks to other
// threads, and every free first checks the pattern on a stream and only then frees in stream order.
// Half of the cross-thread frees use the freeing thread's stream (event wait + record_stream), so
// cross-stream reuse is exercised too. The budget is small enough that large blocks spill to host
// handles. Sized for seconds; TIERPACK_STRESS_SCALE=N multiplies the rounds, TIERPACK_TEST_SEED=N
// replays a seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "alloc/gpu/gpu_allocator.hpp"
#include "alloc/gpu/memfd_backend.hpp"
#include "core/error.hpp"
#include "tests/alloc/gpu/test_device.hpp"

namespace tierpack::gpu::testing {
namespace {

struct Block {
  std::uint8_t* p = nullptr;
  std::size_t n = 0;
  std::uint64_t key = 0;
  StreamHandle stream = 0;  // where it was allocated and written
};

std::uint8_t pattern(std::uint64_t key, std::size_t i) { return static_cast<std::uint8_t>((key * 131 + i * 7) >> 3); }

// Whole blocks up to 64 KiB; larger ones at every 4 KiB plus both ends.
template <class F>
void for_checked_bytes(std::size_t n, F&& f) {
  if (n <= (64u << 10)) {
    for (std::size_t i = 0; i < n; ++i) f(i);
    return;
  }
  for (std::size_t i = 0; i < 256; ++i) f(i);
  for (std::size_t i = 4096; i < n; i += 4096) f(i);
  for (std::size_t i = n - 256; i < n; ++i) f(i);
}

std::size_t random_size(std::mt19937_64& rng) {
  // As in mimalloc's stress: mostly small. 1 B..4 KiB 90%, ..1 MiB 9.5%, ..64 MiB 0.5%.
  const unsigned r = rng() % 200;
  const std::size_t cap = r < 180 ? 4096 : r < 199 ? (1u << 20) : (64u << 20);
  return 1 + rng() % cap;
}

TEST(TwinAllocStress, ThreadsRandomSizesCrossThreadAndCrossStreamFreesPatternChecked) {
  TwinOptions t;
  t.granularity = 64 << 10;
  t.device_bytes = 512 << 20;
  t.host_bytes = 2ull << 30;
  MemfdBackend be(t);
  GpuAllocatorOptions o;
  o.chunk_bytes = 2 << 20;
  o.page_bytes = 64 << 10;
  o.small_threshold = 16 << 10;
  o.device_budget = 96 << 20;  // a 64 MiB block plus the rest does not fit: chunks spill to the host
  o.host_limit = 1ull << 30;
  o.spill_to_host = true;

  const std::uint64_t seed = test_seed();
  const std::uint64_t scale = std::max<std::uint64_t>(1, env_count("TIERPACK_STRESS_SCALE", 1));
  SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with TIERPACK_TEST_SEED=" + std::to_string(seed) + ")");
  constexpr int kThreads = 4;
  const int rounds = static_cast<int>(600 * scale);

  std::atomic<std::uint64_t> bad{0}, allocated{0}, cross_frees{0}, cross_stream_frees{0}, oom{0};
  {
    GpuAllocator alloc(be, o);
    StreamHandle streams[kThreads];
    for (auto& s : streams) s = be.create_stream();
    std::mutex handoff_mu;
    std::vector<Block> handoff;

    // Checks the pattern on `s` (after the writes on b.stream), then frees in stream order.
    auto check_and_free = [&](const Block& b, StreamHandle s) {
      if (s != b.stream) {
        EventHandle e = be.create_event();
        be.record(e, b.stream);
        be.wait(s, e);
        be.destroy_event(e);  // the wait has captured it
        alloc.record_stream(b.p, s);
        cross_stream_frees.fetch_add(1);
      }
      be.enqueue(s, [&bad, b] {
        std::uint64_t wrong = 0;
        for_checked_bytes(b.n, [&](std::size_t i) { wrong += b.p[i] != pattern(b.key, i); });
        bad.fetch_add(wrong);
      });
      alloc.deallocate(b.p);
    };

    auto worker = [&](int id) {
      std::mt19937_64 rng(seed + static_cast<std::uint64_t>(id));
      const StreamHandle mine = streams[id];
      std::vector<Block> slots(32);
      for (int r = 0; r < rounds; ++r) {
        Block& s = slots[rng() % slots.size()];
        if (s.p != nullptr) {
          if (rng() % 4 == 0) {
            std::lock_guard lock(handoff_mu);
            handoff.push_back(s);
          } else {
            check_and_free(s, mine);
          }
          s = Block{};
          continue;
        }
        Block b;
        b.n = random_size(rng);
        b.key = (static_cast<std::uint64_t>(id) << 40) | static_cast<std::uint64_t>(r);
        b.stream = mine;
        try {
          b.p = static_cast<std::uint8_t*>(alloc.allocate(b.n, mine));
        } catch (const out_of_memory&) {
          oom.fetch_add(1);  // possible when all threads hold large blocks at once; never a crash
          continue;
        }
        be.enqueue(mine, [b] { for_checked_bytes(b.n, [&](std::size_t i) { b.p[i] = pattern(b.key, i); }); });
        allocated.fetch_add(1);
        s = b;
        if (r % 16 == 0) {  // free what other threads handed over, on this or the allocating stream
          std::vector<Block> theirs;
          {
            std::lock_guard lock(handoff_mu);
            theirs.swap(handoff);
          }
          for (const Block& h : theirs) {
            // Half of them on another stream than the one that wrote the block.
            StreamHandle on = h.stream;
            if (rng() % 2 == 0)
              for (StreamHandle c : streams)
                if (c != h.stream && (on == h.stream || rng() % 2 == 0)) on = c;
            check_and_free(h, on);
            cross_frees.fetch_add(1);
          }
        }
      }
      for (const Block& s : slots)
        if (s.p != nullptr) check_and_free(s, mine);
    };

    std::vector<std::thread> pool;
    for (int i = 0; i < kThreads; ++i) pool.emplace_back(worker, i);
    for (auto& th : pool) th.join();
    for (const Block& h : handoff) check_and_free(h, h.stream);
    for (auto s : streams) be.synchronize_stream(s);

    const AllocatorStats st = alloc.stats();
    EXPECT_EQ(st.allocated, 0u);
    EXPECT_EQ(st.allocations, st.frees);
    EXPECT_LE(st.peak_device_handles, o.device_budget) << "device memory held passed the budget";
    std::printf("twin stress: %llu blocks, %llu cross-thread frees (%llu cross-stream), %llu spilled chunks, "
                "%llu out-of-memory, peak device %llu MiB\n",
                static_cast<unsigned long long>(allocated.load()), static_cast<unsigned long long>(cross_frees.load()),
                static_cast<unsigned long long>(cross_stream_frees.load()),
                static_cast<unsigned long long>(st.spilled_chunks), static_cast<unsigned long long>(oom.load()),
                static_cast<unsigned long long>(st.peak_device_handles >> 20));
    alloc.empty_cache();
    for (auto s : streams) be.destroy_stream(s);
  }
  EXPECT_EQ(bad.load(), 0u) << "corrupted bytes";
  EXPECT_GT(cross_frees.load(), 0u);
  EXPECT_GT(cross_stream_frees.load(), 0u);
  EXPECT_GT(allocated.load(), static_cast<std::uint64_t>(kThreads * rounds / 3));
  EXPECT_EQ(be.created_bytes(Residence::device), 0u) << "device handles leaked";
  EXPECT_EQ(be.created_bytes(Residence::host), 0u) << "host handles leaked";
}

}  // namespace
}  // namespace tierpack::gpu::testing

// Data integrity under migration (reliability issue 9, item 1): thousands of random evictions and
// prefetches while other threads write and check other groups, on the twin and on CUDA. Seeded;
// the seed is printed on failure (rerun with TIERPACK_TEST_SEED=<seed>).
// TIERPACK_STRESS_MIGRATIONS sets the number of migrations (default 10000).
#include <atomic>
#include <random>
#include <thread>

#include "tests/migrate/gpu/mover_fixture.hpp"

namespace tierpack::gpu::testing {
namespace {

// The twin with one-granule chunks keeps 10^4 migrations within a second or two.
struct SmallTwinKind {
  static constexpr const char* kName = "twin";
  static std::unique_ptr<TestDevice> make(std::string*) {
    TwinDeviceOptions o;
    o.chunk_bytes = o.granularity;
    return make_twin_device(o);
  }
};

template <class Kind>
class IntegrityTest : public MoverTest<Kind> {
 protected:
  void random_migrations(const MoverOptions& mover_options, std::uint64_t target);
};
using IntegrityKinds = ::testing::Types<SmallTwinKind, CudaKind>;
TYPED_TEST_SUITE(IntegrityTest, IntegrityKinds, KindNames);

TYPED_TEST(IntegrityTest, RandomMigrationsWithConcurrentWritersKeepEveryByte) {
  this->random_migrations(MoverOptions{}, env_count("TIERPACK_STRESS_MIGRATIONS", 10000));
}

// The same with remaps deferred until no copy is in flight (Note [When to remap]).
TYPED_TEST(IntegrityTest, RandomMigrationsWithIdleRemapsKeepEveryByte) {
  MoverOptions mo;
  mo.remap_when = RemapWhen::idle;
  mo.remap_max_delay = std::chrono::milliseconds(2);  // the writers poll idle(): nobody waits in ensure_resident
  this->random_migrations(mo, env_count("TIERPACK_STRESS_MIGRATIONS", 10000) / 4);
}

template <class Kind>
void IntegrityTest<Kind>::random_migrations(const MoverOptions& mover_options, std::uint64_t target) {
  using TypeParam = Kind;
  const std::uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with TIERPACK_TEST_SEED=" + std::to_string(seed) + ")");
  constexpr int kThreads = 4, kGroupsPerThread = 2, kChunksPerGroup = 2;
  // 16 chunks of groups under a budget of 12: prefetches often wait for evictions.
  this->make(12, false, mover_options);
  std::vector<typename MoverTest<TypeParam>::Group> groups;
  for (int t = 0; t < kThreads; ++t)
    for (int k = 0; k < kGroupsPerThread; ++k) {
      const StreamHandle s = this->streams_[t];
      groups.push_back(this->make_group(kChunksPerGroup, seed ^ (t * 131 + k), s));
      this->mover_->evict(groups.back().arena, s);  // all start on the host
    }
  this->mover_->drain();
  std::atomic<std::uint64_t> migrations{0};
  std::atomic<bool> failed{false};
  auto writer = [&](int t) {
    std::mt19937_64 rng(seed + 7919 * t);
    const StreamHandle s = this->streams_[t];
    while (migrations.load() < target && !failed) {
      auto& g = groups[t * kGroupsPerThread + rng() % kGroupsPerThread];
      if (!this->mover_->idle(g.arena)) {  // nothing may touch a group while it moves
        std::this_thread::sleep_for(std::chrono::microseconds(300));
        continue;
      }
      try {
        switch (rng() % 5) {
          case 0:
            this->fill(g, rng(), s);
            break;
          case 1:
            this->check(g, s);
            break;
          case 2:
          case 3:
            this->mover_->evict(g.arena, s);
            ++migrations;
            break;
          default:
            this->mover_->prefetch(g.arena, s);
            this->mover_->ensure_resident(g.arena);  // a miss leaves it on the host: still correct
            ++migrations;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        failed = true;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(writer, t);
  for (auto& th : threads) th.join();
  this->mover_->drain();
  for (int t = 0; t < kThreads; ++t)
    for (int k = 0; k < kGroupsPerThread; ++k) this->check(groups[t * kGroupsPerThread + k], this->streams_[t]);
  this->sync_all();
  EXPECT_EQ(this->dev_->take_mismatches(), 0u);
  const MoverCounters c = this->mover_->counters();
  EXPECT_EQ(c.failures, 0u);
  EXPECT_GE(c.evictions + c.prefetches, target / 4) << "too few migrations actually moved data";
  EXPECT_LE(this->alloc_->stats().peak_device_handles, 12 * this->chunk()) << "budget exceeded";
  std::printf("[ info ] %s: %llu migration requests, %llu evictions, %llu prefetches, %llu misses, remap %.0f ms, seed %llu\n",
              TypeParam::kName, static_cast<unsigned long long>(migrations.load()),
              static_cast<unsigned long long>(c.evictions), static_cast<unsigned long long>(c.prefetches),
              static_cast<unsigned long long>(c.misses), c.remap_ns / 1e6, static_cast<unsigned long long>(seed));
}

}  // namespace
}  // namespace tierpack::gpu::testing

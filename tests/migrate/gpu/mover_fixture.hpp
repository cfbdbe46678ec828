// Shared fixture of the GPU mover suites: a device (twin or CUDA), an allocator with a small budget,
// a mover, and helpers to fill page groups with checkable data.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "alloc/gpu/gpu_allocator.hpp"
#include "migrate/gpu/group_mover.hpp"
#include "tests/alloc/gpu/test_device.hpp"

namespace tierpack::gpu::testing {

template <class Kind>
class MoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    dev_ = Kind::make(&why);
    if (!dev_) GTEST_SKIP() << why;
    for (auto& s : streams_) s = backend().create_stream();
  }
  void TearDown() override {
    if (!dev_) return;
    if (mover_) mover_->drain();
    for (auto s : streams_) backend().synchronize_stream(s);
    mover_.reset();
    alloc_.reset();
    for (auto s : streams_) backend().destroy_stream(s);
  }
  VmmBackend& backend() { return dev_->backend(); }
  std::size_t chunk() const { return dev_->chunk_bytes(); }

  void make(std::size_t budget_chunks, bool spill = false, MoverOptions mover_options = {},
            std::size_t host_chunks = 256) {
    GpuAllocatorOptions o;
    o.chunk_bytes = chunk();
    o.page_bytes = dev_->backend().info().granularity;
    o.small_threshold = o.page_bytes / 4;
    o.device_budget = budget_chunks * chunk();
    o.host_limit = host_chunks * chunk();
    o.spill_to_host = spill;
    alloc_ = std::make_unique<GpuAllocator>(backend(), o);
    mover_ = std::make_unique<GroupMover>(*alloc_, mover_options);
    alloc_->set_pressure_handler([m = mover_.get()] { return m->wait_for_eviction(); });
  }

  struct Group {
    ArenaId arena = 0;
    std::vector<void*> blocks;
    std::uint64_t seed = 0;
  };
  /// An arena of `chunks` one-chunk blocks, each filled with a pattern of `seed` on `s`.
  Group make_group(std::size_t chunks, std::uint64_t seed, StreamHandle s) {
    Group g;
    g.arena = alloc_->create_arena("test-group");
    g.seed = seed;
    for (std::size_t i = 0; i < chunks; ++i) {
      g.blocks.push_back(alloc_->allocate(chunk(), s, g.arena));
      dev_->fill(reinterpret_cast<std::uintptr_t>(g.blocks.back()), chunk(), seed + i, s);
    }
    return g;
  }
  void fill(Group& g, std::uint64_t seed, StreamHandle s) {
    g.seed = seed;
    for (std::size_t i = 0; i < g.blocks.size(); ++i)
      dev_->fill(reinterpret_cast<std::uintptr_t>(g.blocks[i]), chunk(), seed + i, s);
  }
  void check(const Group& g, StreamHandle s) {
    for (std::size_t i = 0; i < g.blocks.size(); ++i)
      dev_->check(reinterpret_cast<std::uintptr_t>(g.blocks[i]), chunk(), g.seed + i, s);
  }
  void sync_all() {
    for (auto s : streams_) backend().synchronize_stream(s);
  }

  std::unique_ptr<TestDevice> dev_;
  std::unique_ptr<GpuAllocator> alloc_;
  std::unique_ptr<GroupMover> mover_;
  StreamHandle streams_[4] = {};
};

using Kinds = ::testing::Types<TwinKind, CudaKind>;
struct KindNames {
  template <class T>
  static std::string GetName(int) {
    return T::kName;
  }
};

}  // namespace tierpack::gpu::testing

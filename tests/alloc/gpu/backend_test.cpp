// Conformance of the VmmBackend implementations: the memfd twin and CUDA behave alike for the
// operations the allocator and the mover rely on.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "alloc/gpu/chunk_checksum.hpp"
#include "alloc/gpu/vmm_backend.hpp"
#include "tests/alloc/gpu/test_device.hpp"

namespace tierpack::gpu::testing {
namespace {

using namespace std::chrono_literals;

template <class Kind>
class VmmBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    dev_ = Kind::make(&why);
    if (!dev_) GTEST_SKIP() << why;
  }
  std::unique_ptr<TestDevice> dev_;
};

using Kinds = ::testing::Types<TwinKind, CudaKind>;
struct KindNames {
  template <class T>
  static std::string GetName(int) {
    return T::kName;
  }
};
TYPED_TEST_SUITE(VmmBackendTest, Kinds, KindNames);

TYPED_TEST(VmmBackendTest, RemapKeepsTheAddressAndShowsTheNewHandlesBytes) {
  VmmBackend& be = this->dev_->backend();
  const std::size_t g = be.info().granularity;
  const std::uintptr_t va = be.reserve(4 * g);
  const std::uintptr_t shadow = be.reserve(4 * g);
  PhysHandle dev = be.create(Residence::device, 2 * g);
  PhysHandle host = be.create(Residence::host, 2 * g);
  be.map(va, dev);
  be.map(shadow, host);
  const StreamHandle s = be.create_stream();
  this->dev_->fill(va, 2 * g, 42, s);
  be.copy_async(shadow, va, 2 * g, s);  // device -> host handle through its shadow mapping
  be.synchronize_stream(s);
  be.unmap(va, 2 * g);
  be.map(va, host);  // same address, now host memory
  this->dev_->check(va, 2 * g, 42, s);
  be.synchronize_stream(s);
  EXPECT_EQ(this->dev_->take_mismatches(), 0u);
  // And back: the device handle still holds the bytes.
  be.unmap(va, 2 * g);
  be.map(va, dev);
  this->dev_->check(va, 2 * g, 42, s);
  be.synchronize_stream(s);
  EXPECT_EQ(this->dev_->take_mismatches(), 0u);
  be.unmap(va, 2 * g);
  be.unmap(shadow, 2 * g);
  be.release(dev);
  be.release(host);
  be.destroy_stream(s);
  be.unreserve(va, 4 * g);
  be.unreserve(shadow, 4 * g);
}

// The checksum kernel (Note [Verified remaps]) computes what the CPU computes, on device and on
// host-backed memory, and sees a changed word; a sampled checksum sees a change inside its samples
// and, by design, not one outside them.
TYPED_TEST(VmmBackendTest, ChecksumMatchesTheCpuAndSamplesSeeOnlyTheirBytes) {
  VmmBackend& be = this->dev_->backend();
  const std::size_t bytes = std::max<std::size_t>(be.info().granularity, std::size_t{4} << 20);
  const std::size_t stride = std::size_t{1} << 20;
  const StreamHandle s = be.create_stream();
  std::uint64_t* words = be.host_words(kChecksumWords);
  auto sum = [&](std::uintptr_t va, std::size_t str) {
    be.checksum_async(va, bytes, str, words, s);
    be.synchronize_stream(s);
    return checksum_total(words);
  };
  std::vector<std::uint64_t> data(bytes / 8);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = pattern_word(9, i);
  for (Residence where : {Residence::device, Residence::host}) {
    SCOPED_TRACE(where == Residence::device ? "device memory" : "host memory");
    const std::uintptr_t va = be.reserve(bytes);
    const PhysHandle h = be.create(where, bytes);
    be.map(va, h);
    be.write(va, data.data(), bytes);
    const std::uint64_t full = sum(va, 0), sampled = sum(va, stride);
    EXPECT_EQ(full, checksum_bytes(data.data(), bytes));
    EXPECT_EQ(sampled, checksum_bytes(data.data(), bytes, stride));
    EXPECT_NE(full, sampled);
    const std::uint64_t one = 0x5A5A5A5A5A5A5A5Aull;
    // Inside the second stride's sample: both see it.
    be.write(va + stride + 4096, &one, sizeof one);
    EXPECT_NE(sum(va, 0), full);
    EXPECT_NE(sum(va, stride), sampled);
    be.write(va + stride + 4096, &data[(stride + 4096) / 8], 8);
    EXPECT_EQ(sum(va, 0), full);
    // Outside every sample: only the full checksum sees it.
    be.write(va + stride + kSampleBytes + 8, &one, sizeof one);
    EXPECT_NE(sum(va, 0), full);
    EXPECT_EQ(sum(va, stride), sampled);
    be.unmap(va, bytes);
    be.release(h);
    be.unreserve(va, bytes);
  }
  be.destroy_stream(s);
}

TYPED_TEST(VmmBackendTest, EventsOrderWorkAcrossStreams) {
  VmmBackend& be = this->dev_->backend();
  const std::size_t g = be.info().granularity;
  const std::uintptr_t va = be.reserve(g);
  PhysHandle h = be.create(Residence::device, g);
  be.map(va, h);
  const StreamHandle s1 = be.create_stream(), s2 = be.create_stream();
  const EventHandle e = be.create_event();
  EXPECT_TRUE(be.query(e)) << "an event never recorded counts as complete";
  this->dev_->fill(va, g, 1, s1, 30ms);
  be.record(e, s1);
  be.wait(s2, e);
  this->dev_->fill(va, g, 2, s2);
  be.synchronize(e);
  EXPECT_TRUE(be.query(e));
  be.synchronize_stream(s2);
  this->dev_->check(va, g, 2, s2);
  be.synchronize_stream(s2);
  EXPECT_EQ(this->dev_->take_mismatches(), 0u);
  be.destroy_event(e);
  be.destroy_stream(s1);
  be.destroy_stream(s2);
  be.unmap(va, g);
  be.release(h);
  be.unreserve(va, g);
}

}  // namespace
}  // namespace tierpack::gpu::testing

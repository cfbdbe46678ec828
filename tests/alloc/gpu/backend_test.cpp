// Conformance of the VmmBackend implementations: the memfd twin and CUDA behave alike for the
// operations the allocator and the mover rely on.
#include <gtest/gtest.h>

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

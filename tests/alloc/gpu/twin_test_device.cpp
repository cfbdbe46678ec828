// The twin TestDevice: pattern work items on the memfd twin's streams (see test_device.hpp).
#include <atomic>
#include <cstdlib>
#include <random>
#include <thread>

#include "alloc/gpu/memfd_backend.hpp"
#include "tests/alloc/gpu/test_device.hpp"

namespace tierpack::gpu::testing {
namespace {

class TwinDevice final : public TestDevice {
 public:
  explicit TwinDevice(TwinDeviceOptions o) : options_(o), backend_(twin_options(o)) {}
  VmmBackend& backend() override { return backend_; }
  MemfdBackend& twin() { return backend_; }

  void fill(std::uintptr_t p, std::size_t bytes, std::uint64_t seed, StreamHandle s,
            std::chrono::microseconds delay) override {
    // Through device_access: a "kernel" touching an unmapped chunk fails its stream (like
    // CUDA_ERROR_ILLEGAL_ADDRESS) instead of racing a remap unnoticed.
    backend_.enqueue(s, [this, p, bytes, seed, delay] {
      if (delay.count() > 0) std::this_thread::sleep_for(delay);
      backend_.device_access(p, bytes, [&](void* at) {
        auto* w = static_cast<std::uint64_t*>(at);
        for (std::size_t i = 0; i < bytes / 8; ++i) w[i] = pattern_word(seed, i);
      });
    });
  }
  void check(std::uintptr_t p, std::size_t bytes, std::uint64_t seed, StreamHandle s) override {
    backend_.enqueue(s, [this, p, bytes, seed] {
      std::uint64_t bad = 0;
      backend_.device_access(p, bytes, [&](void* at) {
        const auto* w = static_cast<const std::uint64_t*>(at);
        for (std::size_t i = 0; i < bytes / 8; ++i) bad += w[i] != pattern_word(seed, i);
      });
      mismatches_ += bad;
    });
  }
  std::uint64_t take_mismatches() override {
    // Streams are owned by the tests; they synchronise them before asking.
    return mismatches_.exchange(0);
  }
  void busy(StreamHandle s, std::chrono::microseconds us) override {
    backend_.enqueue(s, [us] { std::this_thread::sleep_for(us); });
  }
  std::size_t chunk_bytes() const override { return options_.chunk_bytes; }
  std::uint64_t device_bytes() const override { return options_.device_bytes; }

 private:
  static TwinOptions twin_options(const TwinDeviceOptions& o) {
    TwinOptions t;
    t.granularity = o.granularity;
    t.device_bytes = o.device_bytes;
    t.host_bytes = o.host_bytes;
    t.copy_delay = o.copy_delay;
    return t;
  }
  TwinDeviceOptions options_;
  MemfdBackend backend_;
  std::atomic<std::uint64_t> mismatches_{0};
};

}  // namespace

std::unique_ptr<TestDevice> make_twin_device(TwinDeviceOptions options) { return std::make_unique<TwinDevice>(options); }

MemfdBackend* twin_backend(TestDevice& d) {
  auto* t = dynamic_cast<TwinDevice*>(&d);
  return t ? &t->twin() : nullptr;
}

std::uint64_t test_seed() {
  if (const char* s = std::getenv("TIERPACK_TEST_SEED")) return std::strtoull(s, nullptr, 0);
  return std::random_device{}();
}

std::uint64_t env_count(const char* name, std::uint64_t fallback) {
  if (const char* s = std::getenv(name)) return std::strtoull(s, nullptr, 0);
  return fallback;
}

}  // namespace tierpack::gpu::testing

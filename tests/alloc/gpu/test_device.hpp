// TestDevice: what the GPU-tier conformance suites need from "a device" beyond the VmmBackend:
// kernels that write and check a pattern, and a kernel that keeps a stream busy. The twin runs them
// as work items on its stream threads; the CUDA device as kernels (cuda_test_device.cu). The same
// typed suites run on both; the CUDA one skips with "no CUDA device" where there is none.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "alloc/gpu/vmm_backend.hpp"

namespace tierpack::gpu::testing {

class TestDevice {
 public:
  virtual ~TestDevice() = default;
  virtual VmmBackend& backend() = 0;
  /// Fills [p, p+bytes) with the pattern of `seed` on stream `s` (bytes: a multiple of 8). With a
  /// delay the work first keeps the stream busy for that long (to widen race windows).
  virtual void fill(std::uintptr_t p, std::size_t bytes, std::uint64_t seed, StreamHandle s,
                    std::chrono::microseconds delay = {}) = 0;
  /// Counts (on stream `s`) the 8-byte words of [p, p+bytes) that differ from the pattern of `seed`.
  virtual void check(std::uintptr_t p, std::size_t bytes, std::uint64_t seed, StreamHandle s) = 0;
  /// Waits for every stream and returns the mismatches counted so far, then resets the count.
  virtual std::uint64_t take_mismatches() = 0;
  /// Keeps stream `s` busy for about `us`.
  virtual void busy(StreamHandle s, std::chrono::microseconds us) = 0;
  /// Test sizes: the chunk size a suite should use on this device.
  virtual std::size_t chunk_bytes() const = 0;
  /// Device memory to pretend the device has (the twin's capacity; on CUDA the real size).
  virtual std::uint64_t device_bytes() const = 0;
};

/// The pattern word `i` of `seed` (splitmix64), identical on host and device.
inline std::uint64_t pattern_word(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct TwinDeviceOptions {
  std::size_t granularity = 64 << 10;
  std::size_t chunk_bytes = 256 << 10;
  std::uint64_t device_bytes = std::uint64_t{64} << 20;
  std::uint64_t host_bytes = std::uint64_t{256} << 20;
  std::chrono::microseconds copy_delay{0};
};
std::unique_ptr<TestDevice> make_twin_device(TwinDeviceOptions options = {});
/// The twin's backend, for twin-only tests (fault injection).
class MemfdBackend* twin_backend(TestDevice& d);

/// nullptr (and `why`) when no CUDA device can be used or CUDA support was not built.
std::unique_ptr<TestDevice> make_cuda_device(std::string* why);

// Typed-suite parameters.
struct TwinKind {
  static constexpr const char* kName = "twin";
  static std::unique_ptr<TestDevice> make(std::string*) { return make_twin_device(); }
};
struct CudaKind {
  static constexpr const char* kName = "cuda";
  static std::unique_ptr<TestDevice> make(std::string* why) { return make_cuda_device(why); }
};

/// A seed for randomised tests: $TIERPACK_TEST_SEED or a fresh one. Print it on failure.
std::uint64_t test_seed();
/// $name as an integer, or `fallback`.
std::uint64_t env_count(const char* name, std::uint64_t fallback);

}  // namespace tierpack::gpu::testing

// The CUDA TestDevice: pattern kernels (cuda_test_kernels.cu) on the real VMM backend, launched on
// the driver streams the backend creates (see test_device.hpp).
#include <cuda_runtime_api.h>

#include <string>

#include "alloc/gpu/cuda_backend.hpp"
#include "core/error.hpp"
#include "tests/alloc/gpu/cuda_test_kernels.hpp"
#include "tests/alloc/gpu/test_device.hpp"

namespace tierpack::gpu::testing {
namespace {

void cuda_check(int e, const char* what) {
  if (e != 0) throw cuda_error(what, e, cudaGetErrorName(static_cast<cudaError_t>(e)));
}

class CudaDevice final : public TestDevice {
 public:
  CudaDevice() : backend_(CudaBackendOptions{}) {
    backend_.bind();
    cuda_check(cudaSetDevice(0), "cudaSetDevice");
    cuda_check(cudaMalloc(reinterpret_cast<void**>(&bad_), sizeof(unsigned long long)), "cudaMalloc");
    cuda_check(cudaMemset(bad_, 0, sizeof(unsigned long long)), "cudaMemset");
    int rate_khz = 0;
    cudaDeviceGetAttribute(&rate_khz, cudaDevAttrClockRate, 0);
    cycles_per_us_ = rate_khz > 0 ? rate_khz / 1000 : 1500;
  }
  ~CudaDevice() override { cudaFree(bad_); }
  VmmBackend& backend() override { return backend_; }

  void fill(std::uintptr_t p, std::size_t bytes, std::uint64_t seed, StreamHandle s,
            std::chrono::microseconds delay) override {
    if (delay.count() > 0) busy(s, delay);
    cuda_check(kernels::fill(reinterpret_cast<void*>(s), reinterpret_cast<std::uint64_t*>(p), bytes / 8, seed),
               "fill kernel");
  }
  void check(std::uintptr_t p, std::size_t bytes, std::uint64_t seed, StreamHandle s) override {
    cuda_check(kernels::check(reinterpret_cast<void*>(s), reinterpret_cast<const std::uint64_t*>(p), bytes / 8, seed, bad_),
               "check kernel");
  }
  std::uint64_t take_mismatches() override {
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    unsigned long long v = 0;
    cuda_check(cudaMemcpy(&v, bad_, sizeof v, cudaMemcpyDeviceToHost), "cudaMemcpy");
    cuda_check(cudaMemset(bad_, 0, sizeof v), "cudaMemset");
    return v;
  }
  void busy(StreamHandle s, std::chrono::microseconds us) override {
    cuda_check(kernels::spin(reinterpret_cast<void*>(s), static_cast<long long>(us.count()) * cycles_per_us_),
               "spin kernel");
  }
  std::size_t chunk_bytes() const override { return backend_.info().granularity; }
  std::uint64_t device_bytes() const override { return backend_.info().device_bytes; }

 private:
  CudaVmmBackend backend_;
  unsigned long long* bad_ = nullptr;
  long long cycles_per_us_ = 1500;
};

}  // namespace

std::unique_ptr<TestDevice> make_cuda_device(std::string* why) {
  try {
    return std::make_unique<CudaDevice>();
  } catch (const error& e) {
    if (why) *why = e.what();
    return nullptr;
  }
}

}  // namespace tierpack::gpu::testing

// CUDA side of the GPU benchmarks (see bench_device.hpp).
#include "alloc/gpu/cuda_backend.hpp"
#include "bench/gpu/bench_device.hpp"
#include "core/error.hpp"

namespace tierpack::gpu::bench {

std::unique_ptr<VmmBackend> make_cuda_backend(std::string* why) {
  try {
    return std::make_unique<CudaVmmBackend>(CudaBackendOptions{});
  } catch (const error& e) {
    if (why) *why = e.what();
    return nullptr;
  }
}

PinnedBuffer pinned_alloc(VmmBackend& be, std::size_t bytes) {
  auto& cuda = dynamic_cast<CudaVmmBackend&>(be);
  cuda.bind();
  void* p = nullptr;
  cuda.api().check(cuda.api().mem_host_alloc(&p, bytes, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc");
  return {p, bytes};
}

void pinned_free(VmmBackend& be, PinnedBuffer b) {
  auto& cuda = dynamic_cast<CudaVmmBackend&>(be);
  if (b.ptr) cuda.api().mem_free_host(b.ptr);
}

}  // namespace tierpack::gpu::bench

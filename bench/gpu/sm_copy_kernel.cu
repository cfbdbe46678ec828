// A copy done by the GPU's SMs rather than its copy engines (bench only): whether the driver's remap
// calls, which wait for copies on the copy engines, also wait for loads and stores of kernels
// (BM_RemapBehindCopies/<MiB>/<where>/1), and what bandwidth a few SMs reach over PCIe (BM_SmCopy).
#include <cuda_runtime.h>

#include "bench/gpu/sm_copy_kernel.hpp"

namespace tierpack::gpu::bench::kernels {
namespace {

constexpr int kThreads = 512;

__global__ void sm_copy_kernel(uint4* dst, const uint4* src, std::size_t units) {
  const std::size_t step = std::size_t{gridDim.x} * blockDim.x;
  std::size_t u = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  for (; u + 3 * step < units; u += 4 * step) {  // four loads in flight per thread
    const uint4 a = src[u], b = src[u + step], c = src[u + 2 * step], d = src[u + 3 * step];
    dst[u] = a;
    dst[u + step] = b;
    dst[u + 2 * step] = c;
    dst[u + 3 * step] = d;
  }
  for (; u < units; u += step) dst[u] = src[u];
}

}  // namespace

int launch_sm_copy(void* dst, const void* src, std::size_t bytes, int blocks, void* stream) {
  sm_copy_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<uint4*>(dst), static_cast<const uint4*>(src), bytes / 16);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace tierpack::gpu::bench::kernels

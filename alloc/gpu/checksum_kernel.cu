// The chunk checksum kernel (see chunk_checksum.hpp): one block per partial sum, 16-byte loads.
#include <cuda_runtime.h>

#include <algorithm>

#include "alloc/gpu/checksum_kernel.hpp"
#include "alloc/gpu/chunk_checksum.hpp"

namespace tierpack::gpu::kernels {
namespace {

constexpr int kThreads = 256;

// units: 16-byte units to read; take/period: read `take` units of every `period` (take == period:
// all). The mix uses each unit's position in the range, as the CPU version does.
__global__ void checksum_kernel(const uint4* p, std::size_t units, std::size_t take, std::size_t period,
                                std::uint64_t* out) {
  std::uint64_t sum = 0;
  for (std::size_t u = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; u < units;
       u += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t i = u / take * period + u % take;
    const uint4 v = p[i];
    const std::uint64_t lo = (std::uint64_t{v.y} << 32) | v.x, hi = (std::uint64_t{v.w} << 32) | v.z;
    sum += checksum_mix(lo, 2 * i) + checksum_mix(hi, 2 * i + 1);
  }
  for (int off = 16; off > 0; off /= 2) sum += __shfl_down_sync(0xffffffffu, sum, off);
  __shared__ std::uint64_t warp_sums[kThreads / 32];
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    std::uint64_t total = 0;
    for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
    out[blockIdx.x] = total;
  }
}

}  // namespace

int launch_checksum(const void* p, std::size_t bytes, std::size_t stride, std::uint64_t* out, void* stream) {
  const std::size_t all = bytes / 16;
  std::size_t take = all, period = all, units = all;
  if (stride != 0 && stride < bytes) {
    period = stride / 16;
    take = kSampleBytes / 16;
    units = bytes / stride * take + std::min(bytes % stride, kSampleBytes) / 16;
  }
  checksum_kernel<<<static_cast<unsigned>(kChecksumWords), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const uint4*>(p), units, take, period, out);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace tierpack::gpu::kernels

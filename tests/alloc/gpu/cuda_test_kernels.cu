// Test kernels for the CUDA TestDevice: write and check the pattern of test_device.hpp, spin.
#include <cuda_runtime.h>

#include "tests/alloc/gpu/cuda_test_kernels.hpp"

namespace tierpack::gpu::testing::kernels {
namespace {

__device__ std::uint64_t pattern_word(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

__global__ void fill_kernel(std::uint64_t* p, std::size_t words, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < words;
       i += std::size_t{gridDim.x} * blockDim.x)
    p[i] = pattern_word(seed, i);
}

__global__ void check_kernel(const std::uint64_t* p, std::size_t words, std::uint64_t seed, unsigned long long* bad) {
  unsigned long long mine = 0;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < words;
       i += std::size_t{gridDim.x} * blockDim.x)
    mine += p[i] != pattern_word(seed, i);
  if (mine) atomicAdd(bad, mine);
}

constexpr int kBlocks = 264;
constexpr int kThreads = 256;

}  // namespace

int fill(void* stream, std::uint64_t* p, std::size_t words, std::uint64_t seed) {
  fill_kernel<<<kBlocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(p, words, seed);
  return static_cast<int>(cudaGetLastError());
}

int check(void* stream, const std::uint64_t* p, std::size_t words, std::uint64_t seed, unsigned long long* bad) {
  check_kernel<<<kBlocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(p, words, seed, bad);
  return static_cast<int>(cudaGetLastError());
}

int spin(void* stream, long long cycles) {
  spin_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(cycles);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace tierpack::gpu::testing::kernels

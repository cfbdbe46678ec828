// Launchers of the CUDA test kernels (cuda_test_kernels.cu). Plain signatures so the kernels build
// apart from the C++20 code (nvcc only needs C++17 here).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tierpack::gpu::testing::kernels {

/// Each returns the cudaError_t of the launch (0 on success).
int fill(void* stream, std::uint64_t* p, std::size_t words, std::uint64_t seed);
int check(void* stream, const std::uint64_t* p, std::size_t words, std::uint64_t seed, unsigned long long* bad);
int spin(void* stream, long long cycles);

}  // namespace tierpack::gpu::testing::kernels

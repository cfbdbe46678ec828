// A copy kernel for the GPU benchmarks (see sm_copy_kernel.cu); CUDA builds only.
#pragma once

#include <cstddef>

namespace tierpack::gpu::bench::kernels {

/// Enqueues on `stream` (a cudaStream_t) a copy of `bytes` (a multiple of 16) from `src` to `dst`,
/// both device-visible, by `blocks` blocks of loads and stores. Returns the launch's cudaError_t.
int launch_sm_copy(void* dst, const void* src, std::size_t bytes, int blocks, void* stream);

}  // namespace tierpack::gpu::bench::kernels

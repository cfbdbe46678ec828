// The chunk checksum as a CUDA kernel (see chunk_checksum.hpp); used by the CUDA backend only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tierpack::gpu::kernels {

/// Enqueues on `stream` (a cudaStream_t) the checksum of [p, p+bytes) (device-visible, bytes a
/// multiple of 16; of its samples when `stride` is not 0) as kChecksumWords partial sums into `out`
/// (pinned host memory the device maps). Returns the launch's cudaError_t (0: success).
int launch_checksum(const void* p, std::size_t bytes, std::size_t stride, std::uint64_t* out, void* stream);

}  // namespace tierpack::gpu::kernels

// Chunk checksums: the fingerprint the GPU mover takes of a chunk's bytes to find a write that landed
// between a migration's copy and its remap (Note [Verified remaps] in migrate/gpu/group_mover.hpp).
//
// The checksum of a range is the wrapping sum over its 16-byte units i of mix(lo_i, 2i) + mix(hi_i,
// 2i+1), mix being splitmix64's finaliser: order-independent, so a GPU computes it as per-block partial
// sums (kChecksumWords of them, in pinned host memory) that the host adds up, and the twin computes
// the same value on a CPU. A sampled checksum covers only the first 64 KiB of every `stride` bytes:
// it sees for sure any write that covers a whole aligned stride, and cheaper. It is a fingerprint, not a cryptographic hash: a changed word changes it
// except with probability ~2^-64.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define TIERPACK_HOST_DEVICE __host__ __device__
#else
#define TIERPACK_HOST_DEVICE
#endif

namespace tierpack::gpu {

/// Words of partial sums one checksum writes (the GPU kernel's block count).
inline constexpr std::size_t kChecksumWords = 128;
/// A sampled checksum reads the first kSampleBytes of every `stride` bytes (stride 0: everything).
inline constexpr std::size_t kSampleBytes = std::size_t{64} << 10;

TIERPACK_HOST_DEVICE inline std::uint64_t checksum_mix(std::uint64_t word, std::uint64_t index) {
  std::uint64_t z = word + (index + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The checksum of [p, p+bytes) computed on the CPU (bytes: a multiple of 16), of the samples only
/// when `stride` is not 0 (a multiple of kSampleBytes).
std::uint64_t checksum_bytes(const void* p, std::size_t bytes, std::size_t stride = 0);
/// The checksum from the kChecksumWords partial sums a checksum_async wrote.
std::uint64_t checksum_total(const std::uint64_t* words);

}  // namespace tierpack::gpu

// CPU side of the chunk checksum (see chunk_checksum.hpp).
#include "alloc/gpu/chunk_checksum.hpp"

#include <cstring>

namespace tierpack::gpu {

std::uint64_t checksum_bytes(const void* p, std::size_t bytes, std::size_t stride) {
  const auto* b = static_cast<const unsigned char*>(p);
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i + 16 <= bytes; i += 16) {
    if (stride != 0 && i % stride >= kSampleBytes) {
      i += stride - i % stride - 16;  // to the next sample
      continue;
    }
    std::uint64_t lo, hi;
    std::memcpy(&lo, b + i, 8);
    std::memcpy(&hi, b + i + 8, 8);
    const std::uint64_t unit = i / 16;
    sum += checksum_mix(lo, 2 * unit) + checksum_mix(hi, 2 * unit + 1);
  }
  return sum;
}

std::uint64_t checksum_total(const std::uint64_t* words) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < kChecksumWords; ++i) sum += words[i];
  return sum;
}

}  // namespace tierpack::gpu

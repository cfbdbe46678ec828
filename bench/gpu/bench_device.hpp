// The backend the GPU benchmarks run on: the memfd twin always, CUDA when built and present.
#pragma once

#include <memory>
#include <string>

#include "alloc/gpu/vmm_backend.hpp"

namespace tierpack::gpu::bench {

/// nullptr (and `why`) without CUDA.
std::unique_ptr<VmmBackend> make_cuda_backend(std::string* why);

/// A pinned host buffer for reference copies (CUDA only): cuMemHostAlloc. Empty without CUDA.
struct PinnedBuffer {
  void* ptr = nullptr;
  std::size_t bytes = 0;
};
PinnedBuffer pinned_alloc(VmmBackend& be, std::size_t bytes);
void pinned_free(VmmBackend& be, PinnedBuffer b);

}  // namespace tierpack::gpu::bench

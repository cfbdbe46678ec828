// The backend the GPU benchmarks run on: the memfd twin always, CUDA when built and present.
#pragma once

#include <memory>
#include <string>
#include <vector>

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

/// Wall time of each driver phase of one remap pass over handles mapped back to back from `va`.
struct RemapParts {
  double unmap_s = 0;
  double map_s = 0;
  double access_s = 0;
};
/// Unmaps every handle, maps each again and grants access (CUDA only; zeros without CUDA). `batched`:
/// one cuMemUnmap and one cuMemSetAccess over each thread's run of chunks instead of one per chunk;
/// `threads` split the chunks into contiguous runs, one per thread, phase by phase.
RemapParts remap_pass(VmmBackend& be, std::uintptr_t va, const std::vector<PhysHandle>& handles, bool batched,
                      int threads);

/// Copies `bytes` from `src` to `dst` (device-visible addresses) with a kernel of `blocks` blocks on
/// `s`, leaving the copy engines alone (CUDA only; throws without CUDA).
void sm_copy_async(VmmBackend& be, std::uintptr_t dst, std::uintptr_t src, std::size_t bytes, int blocks,
                   StreamHandle s);

}  // namespace tierpack::gpu::bench

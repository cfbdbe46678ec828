// Built without CUDA: the CUDA benchmarks report "no CUDA device" (see bench_device.hpp).
#include "bench/gpu/bench_device.hpp"
#include "core/error.hpp"

namespace tierpack::gpu::bench {

std::unique_ptr<VmmBackend> make_cuda_backend(std::string* why) {
  if (why) *why = "no CUDA device (built without CUDA support)";
  return nullptr;
}
PinnedBuffer pinned_alloc(VmmBackend&, std::size_t) { return {}; }
void pinned_free(VmmBackend&, PinnedBuffer) {}
RemapParts remap_pass(VmmBackend&, std::uintptr_t, const std::vector<PhysHandle>&, bool, int) { return {}; }
void sm_copy_async(VmmBackend&, std::uintptr_t, std::uintptr_t, std::size_t, int, StreamHandle) {
  throw logic_error("copy kernel: built without CUDA support");
}

}  // namespace tierpack::gpu::bench

// Builds without CUDA: the CUDA typed suites skip (see test_device.hpp).
#include "tests/alloc/gpu/test_device.hpp"

namespace tierpack::gpu::testing {

std::unique_ptr<TestDevice> make_cuda_device(std::string* why) {
  if (why) *why = "no CUDA device (built without CUDA support)";
  return nullptr;
}

}  // namespace tierpack::gpu::testing

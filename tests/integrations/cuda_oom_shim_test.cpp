// libtierpack_cuda_torch.so (integrations/torch/cuda_oom_shim.cpp) end to end on the memfd twin: an
// exhausted GPU budget is PyTorch's c10::OutOfMemoryError (torch.OutOfMemoryError in Python) with
// tierpack's message, the process can free and allocate again, and any other failure is a plain
// c10::Error. The same entry points PyTorch's CUDAPluggableAllocator calls; on a GPU,
// tests/integrations/scripts/cuda_oom.py checks the Python side.
#include <gtest/gtest.h>
#include <sys/types.h>

#include <c10/util/Exception.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tierpack.h"

TEST(CudaOomShim, AnExhaustedBudgetIsTorchsOutOfMemoryErrorAndTheProcessRecovers) {
  ::setenv("TIERPACK_GPU_TEST_BACKEND", "twin", 1);
  ASSERT_EQ(tierpack_gpu_configure("gpu_budget:8M,log:quiet", "chunk:2M,spill:off,migrate:off"), 0);
  constexpr ssize_t kBlock = ssize_t{1} << 20;
  std::vector<void*> blocks;
  std::string message;
  for (int i = 0; i < 64 && message.empty(); ++i) {
    try {
      blocks.push_back(tierpack_cuda_torch_malloc(kBlock, 0, nullptr));
      ASSERT_NE(blocks.back(), nullptr);
    } catch (const c10::OutOfMemoryError& e) {
      message = e.what();
    }
  }
  ASSERT_FALSE(message.empty()) << "64 MiB allocated under an 8 MiB budget";
  EXPECT_LE(blocks.size(), 8u);
  EXPECT_GE(blocks.size(), 4u);
  EXPECT_NE(message.find("budget"), std::string::npos) << message;
  EXPECT_NE(message.find("resident"), std::string::npos) << message;
  for (void* p : blocks) tierpack_cuda_torch_free(p, kBlock, 0, nullptr);
  void* again = tierpack_cuda_torch_malloc(kBlock, 0, nullptr);
  EXPECT_NE(again, nullptr) << "memory freed after the error is usable again";
  tierpack_cuda_torch_free(again, kBlock, 0, nullptr);

  // Not out of memory: a device number the runtime rejects is a c10::Error of another kind.
  bool other = false;
  try {
    tierpack_cuda_torch_malloc(kBlock, 99, nullptr);
  } catch (const c10::OutOfMemoryError& e) {
    ADD_FAILURE() << "reported as out of memory: " << e.what();
  } catch (const c10::Error& e) {
    other = std::string(e.what()).find("out of range") != std::string::npos;
  }
  EXPECT_TRUE(other);
  EXPECT_EQ(tierpack_cuda_torch_malloc(0, 0, nullptr), nullptr) << "size 0";
}

// libtierpack_cuda_torch.so: PyTorch's pluggable-allocator entry points (include/tierpack.h) over libtierpack_cuda.so
// that raise PyTorch's own out-of-memory error. libtierpack_cuda.so has no torch headers, so when the GPU
// budget is exhausted and nothing can be evicted it can only throw a std::exception, which PyTorch
// turns into a RuntimeError (Note [Out of memory through the pluggable allocator] in
// integrations/cuda/cuda_c_api.cpp). This shim throws c10::OutOfMemoryError instead, which
// PyTorch raises as torch.OutOfMemoryError (torch.cuda.OutOfMemoryError), the class training scripts
// catch to lower their batch size; its message is tierpack's: what was requested, the budget, the
// tier and what is resident where. Any other failure is a c10::Error (RuntimeError).
//
// It must be built against the torch that runs (C++ ABI): the torch build here makes it for the
// local torch; on another machine build it there (docs/run.md, "Out of memory"). python/tierpack/cuda.py
// uses it when it finds and can load it next to libtierpack_cuda.so, and says when it cannot.
#include <sys/types.h>

#include <c10/util/Exception.h>

#include "tierpack.h"

extern "C" void* tierpack_cuda_torch_malloc(ssize_t size, int device, void* stream) {
  int status = 0;
  void* p = tierpack_cuda_malloc_status(size, device, stream, &status);
  TORCH_CHECK_WITH(OutOfMemoryError, status != 1, tierpack_gpu_last_error());
  TORCH_CHECK(status == 0, tierpack_gpu_last_error());
  return p;
}

extern "C" void tierpack_cuda_torch_free(void* ptr, ssize_t size, int device, void* stream) {
  tierpack_cuda_free(ptr, size, device, stream);
}

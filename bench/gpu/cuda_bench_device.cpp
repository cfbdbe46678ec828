// CUDA side of the GPU benchmarks (see bench_device.hpp).
#include <algorithm>
#include <chrono>
#include <thread>

#include "alloc/gpu/cuda_backend.hpp"
#include "bench/gpu/bench_device.hpp"
#include "bench/gpu/sm_copy_kernel.hpp"
#include "core/error.hpp"

namespace tierpack::gpu::bench {

std::unique_ptr<VmmBackend> make_cuda_backend(std::string* why) {
  try {
    return std::make_unique<CudaVmmBackend>(CudaBackendOptions{});
  } catch (const error& e) {
    if (why) *why = e.what();
    return nullptr;
  }
}

PinnedBuffer pinned_alloc(VmmBackend& be, std::size_t bytes) {
  auto& cuda = dynamic_cast<CudaVmmBackend&>(be);
  cuda.bind();
  void* p = nullptr;
  cuda.api().check(cuda.api().mem_host_alloc(&p, bytes, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc");
  return {p, bytes};
}

void sm_copy_async(VmmBackend& be, std::uintptr_t dst, std::uintptr_t src, std::size_t bytes, int blocks,
                   StreamHandle s) {
  auto& cuda = dynamic_cast<CudaVmmBackend&>(be);
  cuda.bind();
  const int e = kernels::launch_sm_copy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes, blocks,
                                        reinterpret_cast<void*>(s));
  if (e != 0) throw cuda_error("copy kernel launch (cudaLaunchKernel)", e, "cudaError_t " + std::to_string(e));
}

void pinned_free(VmmBackend& be, PinnedBuffer b) {
  auto& cuda = dynamic_cast<CudaVmmBackend&>(be);
  if (b.ptr) cuda.api().mem_free_host(b.ptr);
}

namespace {

// Runs `f(first, last)` on `threads` contiguous runs of [0, n) at once; returns the wall time.
template <class F>
double phase(std::size_t n, int threads, F f) {
  const auto t0 = std::chrono::steady_clock::now();
  if (threads <= 1) {
    f(std::size_t{0}, n);
  } else {
    std::vector<std::thread> ts;
    const std::size_t per = (n + static_cast<std::size_t>(threads) - 1) / static_cast<std::size_t>(threads);
    for (std::size_t b = 0; b < n; b += per) ts.emplace_back(f, b, std::min(n, b + per));
    for (auto& t : ts) t.join();
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

RemapParts remap_pass(VmmBackend& be, std::uintptr_t va, const std::vector<PhysHandle>& handles, bool batched,
                      int threads) {
  auto& cuda = dynamic_cast<CudaVmmBackend&>(be);
  const CudaDriverApi& api = cuda.api();
  std::vector<std::uintptr_t> at(handles.size() + 1, va);
  for (std::size_t i = 0; i < handles.size(); ++i) at[i + 1] = at[i] + handles[i].bytes;
  CUmemAccessDesc desc{};
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.location.id = be.info().device;
  desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  RemapParts r;
  r.unmap_s = phase(handles.size(), threads, [&](std::size_t b, std::size_t e) {
    cuda.bind();
    if (batched) {
      api.check(api.mem_unmap(at[b], at[e] - at[b]), "cuMemUnmap");
    } else {
      for (std::size_t i = b; i < e; ++i) api.check(api.mem_unmap(at[i], handles[i].bytes), "cuMemUnmap");
    }
  });
  r.map_s = phase(handles.size(), threads, [&](std::size_t b, std::size_t e) {
    cuda.bind();
    for (std::size_t i = b; i < e; ++i)
      api.check(api.mem_map(at[i], handles[i].bytes, 0, static_cast<CUmemGenericAllocationHandle>(handles[i].value), 0),
                "cuMemMap");
  });
  r.access_s = phase(handles.size(), threads, [&](std::size_t b, std::size_t e) {
    cuda.bind();
    if (batched) {
      api.check(api.mem_set_access(at[b], at[e] - at[b], &desc, 1), "cuMemSetAccess");
    } else {
      for (std::size_t i = b; i < e; ++i) api.check(api.mem_set_access(at[i], handles[i].bytes, &desc, 1), "cuMemSetAccess");
    }
  });
  return r;
}

}  // namespace tierpack::gpu::bench

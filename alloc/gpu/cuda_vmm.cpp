// Loading the CUDA driver entry points through the CUDA runtime (see cuda_vmm.hpp).
#include "alloc/gpu/cuda_vmm.hpp"

#include <cuda_runtime_api.h>

#include "core/error.hpp"

namespace tierpack::gpu {
namespace {

// The ABI version we ask the driver for: every entry point used here exists with this signature
// since CUDA 12.0 (HOST_NUMA locations are a 12.2 driver feature, not a new ABI).
constexpr unsigned kDriverAbiVersion = 12000;

template <class F>
void load_entry(F& fn, const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, kDriverAbiVersion, cudaEnableDefault, &status);
  if (e != cudaSuccess) {
    throw cuda_error(std::string("no CUDA device: cudaGetDriverEntryPointByVersion(") + name + ")", e,
                     cudaGetErrorName(e));
  }
  if (status != cudaDriverEntryPointSuccess || p == nullptr)
    throw cuda_error(std::string("no CUDA device: driver lacks ") + name, static_cast<int>(status),
                     "cudaDriverEntryPointSymbolNotFound");
  fn = reinterpret_cast<F>(p);
}

}  // namespace

CudaDriverApi CudaDriverApi::load() {
  CudaDriverApi api;
  load_entry(api.init, "cuInit");
  load_entry(api.get_error_name, "cuGetErrorName");
  load_entry(api.device_get_count, "cuDeviceGetCount");
  load_entry(api.device_get, "cuDeviceGet");
  load_entry(api.device_get_name, "cuDeviceGetName");
  load_entry(api.device_get_attribute, "cuDeviceGetAttribute");
  load_entry(api.device_total_mem, "cuDeviceTotalMem");
  load_entry(api.primary_ctx_retain, "cuDevicePrimaryCtxRetain");
  load_entry(api.primary_ctx_release, "cuDevicePrimaryCtxRelease");
  load_entry(api.ctx_get_current, "cuCtxGetCurrent");
  load_entry(api.ctx_set_current, "cuCtxSetCurrent");
  load_entry(api.mem_get_info, "cuMemGetInfo");
  load_entry(api.mem_get_allocation_granularity, "cuMemGetAllocationGranularity");
  load_entry(api.mem_address_reserve, "cuMemAddressReserve");
  load_entry(api.mem_address_free, "cuMemAddressFree");
  load_entry(api.mem_create, "cuMemCreate");
  load_entry(api.mem_release, "cuMemRelease");
  load_entry(api.mem_map, "cuMemMap");
  load_entry(api.mem_unmap, "cuMemUnmap");
  load_entry(api.mem_set_access, "cuMemSetAccess");
  load_entry(api.stream_create, "cuStreamCreate");
  load_entry(api.stream_destroy, "cuStreamDestroy");
  load_entry(api.stream_synchronize, "cuStreamSynchronize");
  load_entry(api.stream_wait_event, "cuStreamWaitEvent");
  load_entry(api.event_create, "cuEventCreate");
  load_entry(api.event_destroy, "cuEventDestroy");
  load_entry(api.event_record, "cuEventRecord");
  load_entry(api.event_query, "cuEventQuery");
  load_entry(api.event_synchronize, "cuEventSynchronize");
  load_entry(api.event_elapsed_time, "cuEventElapsedTime");
  load_entry(api.memcpy, "cuMemcpy");
  load_entry(api.memcpy_async, "cuMemcpyAsync");
  load_entry(api.mem_host_alloc, "cuMemHostAlloc");
  load_entry(api.mem_free_host, "cuMemFreeHost");
  load_entry(api.memset_d8_async, "cuMemsetD8Async");
  load_entry(api.stream_batch_mem_op, "cuStreamBatchMemOp");
  load_entry(api.mem_host_get_device_pointer, "cuMemHostGetDevicePointer");
  if (CUresult r = api.init(0); r != CUDA_SUCCESS)
    throw cuda_error("no CUDA device: cuInit", static_cast<int>(r), api.error_name(r));
  int count = 0;
  if (CUresult r = api.device_get_count(&count); r != CUDA_SUCCESS || count == 0)
    throw cuda_error("no CUDA device: cuDeviceGetCount", static_cast<int>(r), count == 0 ? "0 devices" : api.error_name(r));
  return api;
}

std::string CudaDriverApi::error_name(CUresult r) const {
  const char* name = nullptr;
  if (get_error_name && get_error_name(r, &name) == CUDA_SUCCESS && name) return name;
  return "CUresult " + std::to_string(static_cast<int>(r));
}

void CudaDriverApi::check(CUresult r, const char* call) const {
  if (r == CUDA_SUCCESS) return;
  if (r == CUDA_ERROR_OUT_OF_MEMORY) throw out_of_memory(0, "cuda", 0, std::string(call) + " returned CUDA_ERROR_OUT_OF_MEMORY");
  throw cuda_error(call, static_cast<int>(r), error_name(r));
}

bool cuda_device_available(std::string* why) {
  try {
    (void)CudaDriverApi::load();
    return true;
  } catch (const error& e) {
    if (why) *why = e.what();
    return false;
  }
}

}  // namespace tierpack::gpu

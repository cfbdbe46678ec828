// CudaDriverApi: the CUDA driver entry points tierpack uses, obtained from the statically linked CUDA
// runtime (cudaGetDriverEntryPointByVersion) instead of linking libcuda. Binaries built with CUDA
// therefore start on machines without a driver and report "no CUDA device" from load().
// This header and cuda_vmm.cpp are, with the test kernels, the only places that talk to CUDA.
#pragma once

#include <cuda.h>  // types and prototypes only: libcuda.so is never linked

#include <string>

namespace tierpack::gpu {

struct CudaDriverApi {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuDeviceGetCount) device_get_count = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetName) device_get_name = nullptr;
  decltype(&::cuDeviceGetAttribute) device_get_attribute = nullptr;
  decltype(&::cuDeviceTotalMem) device_total_mem = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) primary_ctx_release = nullptr;
  decltype(&::cuCtxGetCurrent) ctx_get_current = nullptr;
  decltype(&::cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&::cuMemGetInfo) mem_get_info = nullptr;
  decltype(&::cuMemGetAllocationGranularity) mem_get_allocation_granularity = nullptr;
  decltype(&::cuMemAddressReserve) mem_address_reserve = nullptr;
  decltype(&::cuMemAddressFree) mem_address_free = nullptr;
  decltype(&::cuMemCreate) mem_create = nullptr;
  decltype(&::cuMemRelease) mem_release = nullptr;
  decltype(&::cuMemMap) mem_map = nullptr;
  decltype(&::cuMemUnmap) mem_unmap = nullptr;
  decltype(&::cuMemSetAccess) mem_set_access = nullptr;
  decltype(&::cuStreamCreate) stream_create = nullptr;
  decltype(&::cuStreamDestroy) stream_destroy = nullptr;
  decltype(&::cuStreamSynchronize) stream_synchronize = nullptr;
  decltype(&::cuStreamWaitEvent) stream_wait_event = nullptr;
  decltype(&::cuEventCreate) event_create = nullptr;
  decltype(&::cuEventDestroy) event_destroy = nullptr;
  decltype(&::cuEventRecord) event_record = nullptr;
  decltype(&::cuEventQuery) event_query = nullptr;
  decltype(&::cuEventSynchronize) event_synchronize = nullptr;
  decltype(&::cuEventElapsedTime) event_elapsed_time = nullptr;
  decltype(&::cuMemcpy) memcpy = nullptr;
  decltype(&::cuMemcpyAsync) memcpy_async = nullptr;
  decltype(&::cuMemHostAlloc) mem_host_alloc = nullptr;
  decltype(&::cuMemFreeHost) mem_free_host = nullptr;
  decltype(&::cuMemsetD8Async) memset_d8_async = nullptr;
  decltype(&::cuStreamBatchMemOp) stream_batch_mem_op = nullptr;
  decltype(&::cuMemHostGetDevicePointer) mem_host_get_device_pointer = nullptr;

  /// Loads every entry point and initialises the driver. Throws cuda_error whose message starts
  /// with "no CUDA device" when there is no driver or no device.
  static CudaDriverApi load();

  /// Throws cuda_error naming `call` when `r` is not CUDA_SUCCESS (out_of_memory for
  /// CUDA_ERROR_OUT_OF_MEMORY, with `what` as the tier name).
  void check(CUresult r, const char* call) const;
  std::string error_name(CUresult r) const;
};

/// True when a CUDA device can be used; otherwise `why` says why not ("no CUDA device ...").
bool cuda_device_available(std::string* why = nullptr);

}  // namespace tierpack::gpu

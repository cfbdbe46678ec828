// VmmBackend on the CUDA VMM driver API (see cuda_backend.hpp).
#include "alloc/gpu/cuda_backend.hpp"

#include <atomic>
#include <cstring>

#include "alloc/gpu/checksum_kernel.hpp"
#include "core/error.hpp"

namespace tierpack::gpu {

CudaVmmBackend::CudaVmmBackend(CudaBackendOptions options) : api_(CudaDriverApi::load()) {
  const std::uintptr_t caller = current_context();  // given back at the end (the thread's device stays the caller's)
  api_.check(api_.device_get(&device_, options.device), "cuDeviceGet");
  api_.check(api_.primary_ctx_retain(&ctx_, device_), "cuDevicePrimaryCtxRetain");
  bind();
  info_.name = "cuda";
  info_.device = options.device;
  char name[256] = {};
  api_.check(api_.device_get_name(name, sizeof name, device_), "cuDeviceGetName");
  info_.device_name = name;
  std::size_t total = 0;
  api_.check(api_.device_total_mem(&total, device_), "cuDeviceTotalMem");
  info_.device_bytes = total;
  int numa = options.host_numa_node;
  if (numa < 0) {
    if (api_.device_get_attribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, device_) != CUDA_SUCCESS || numa < 0) numa = 0;
  }
  info_.host_numa_node = numa;
  int supported = 0;
  if (api_.device_get_attribute(&supported, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                device_) != CUDA_SUCCESS)
    supported = 0;
  host_numa_ = supported != 0;
  std::size_t g_dev = 0, g_host = 0;
  CUmemAllocationProp pd = prop(Residence::device), ph = prop(Residence::host);
  api_.check(api_.mem_get_allocation_granularity(&g_dev, &pd, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
             "cuMemGetAllocationGranularity(device)");
  if (api_.mem_get_allocation_granularity(&g_host, &ph, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS)
    g_host = g_dev;
  info_.granularity = std::max(g_dev, g_host);
  if (caller != 0 && caller != reinterpret_cast<std::uintptr_t>(ctx_)) set_current_context(caller);
}

CudaVmmBackend::~CudaVmmBackend() {
  for (CUevent e : gate_event_)
    if (e) api_.event_destroy(e);
  if (gate_words_) api_.mem_free_host(const_cast<std::uint32_t*>(gate_words_));
  for (void* p : host_words_) api_.mem_free_host(p);
  if (ctx_) api_.primary_ctx_release(device_);
}

void CudaVmmBackend::bind() const {
  CUcontext cur = nullptr;
  if (api_.ctx_get_current(&cur) != CUDA_SUCCESS || cur != ctx_) api_.check(api_.ctx_set_current(ctx_), "cuCtxSetCurrent");
}

std::uintptr_t CudaVmmBackend::current_context() {
  CUcontext cur = nullptr;
  return api_.ctx_get_current(&cur) == CUDA_SUCCESS ? reinterpret_cast<std::uintptr_t>(cur) : 0;
}

void CudaVmmBackend::set_current_context(std::uintptr_t ctx) {
  api_.check(api_.ctx_set_current(reinterpret_cast<CUcontext>(ctx)), "cuCtxSetCurrent");
}

CUmemAllocationProp CudaVmmBackend::prop(Residence where) const {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
  if (where == Residence::device) {
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = device_;
  } else if (host_numa_) {
    p.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    p.location.id = info_.host_numa_node;
  } else {
    p.location.type = CU_MEM_LOCATION_TYPE_HOST;
    p.location.id = 0;
  }
  return p;
}

std::uintptr_t CudaVmmBackend::reserve(std::size_t bytes) {
  bind();
  CUdeviceptr p = 0;
  api_.check(api_.mem_address_reserve(&p, bytes, info_.granularity, 0, 0), "cuMemAddressReserve");
  return static_cast<std::uintptr_t>(p);
}

void CudaVmmBackend::unreserve(std::uintptr_t va, std::size_t bytes) noexcept {
  try {
    bind();
  } catch (...) {
    return;
  }
  api_.mem_address_free(static_cast<CUdeviceptr>(va), bytes);
}

PhysHandle CudaVmmBackend::create(Residence where, std::size_t bytes) {
  bind();
  const CUmemAllocationProp p = prop(where);
  CUmemGenericAllocationHandle h = 0;
  const CUresult r = api_.mem_create(&h, bytes, &p, 0);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    std::size_t free_bytes = 0, total = 0;
    if (where == Residence::device) api_.mem_get_info(&free_bytes, &total);
    throw out_of_memory(bytes, where == Residence::device ? "gpu" + std::to_string(info_.device)
                                                          : "host node " + std::to_string(info_.host_numa_node),
                        free_bytes, "cuMemCreate");
  }
  api_.check(r, where == Residence::device ? "cuMemCreate(device)" : "cuMemCreate(host NUMA)");
  return PhysHandle{static_cast<std::uint64_t>(h), bytes, where};
}

void CudaVmmBackend::release(PhysHandle h) noexcept {
  if (!h) return;
  try {
    bind();
  } catch (...) {
    return;
  }
  api_.mem_release(static_cast<CUmemGenericAllocationHandle>(h.value));
}

void CudaVmmBackend::map(std::uintptr_t va, PhysHandle h) {
  bind();
  api_.check(api_.mem_map(static_cast<CUdeviceptr>(va), h.bytes, 0, static_cast<CUmemGenericAllocationHandle>(h.value), 0),
             "cuMemMap");
  CUmemAccessDesc desc{};
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.location.id = device_;
  desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  const CUresult r = api_.mem_set_access(static_cast<CUdeviceptr>(va), h.bytes, &desc, 1);
  if (r != CUDA_SUCCESS) {
    api_.mem_unmap(static_cast<CUdeviceptr>(va), h.bytes);
    api_.check(r, "cuMemSetAccess");
  }
}

void CudaVmmBackend::unmap(std::uintptr_t va, std::size_t bytes) {
  bind();
  api_.check(api_.mem_unmap(static_cast<CUdeviceptr>(va), bytes), "cuMemUnmap");
}

StreamHandle CudaVmmBackend::create_stream() {
  bind();
  CUstream s = nullptr;
  api_.check(api_.stream_create(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  return reinterpret_cast<StreamHandle>(s);
}

void CudaVmmBackend::destroy_stream(StreamHandle s) noexcept {
  if (s) api_.stream_destroy(reinterpret_cast<CUstream>(s));
}

EventHandle CudaVmmBackend::create_event() {
  bind();
  CUevent e = nullptr;
  api_.check(api_.event_create(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  return reinterpret_cast<EventHandle>(e);
}

void CudaVmmBackend::destroy_event(EventHandle e) noexcept {
  if (e) api_.event_destroy(reinterpret_cast<CUevent>(e));
}

void CudaVmmBackend::record(EventHandle e, StreamHandle s) {
  bind();
  api_.check(api_.event_record(reinterpret_cast<CUevent>(e), reinterpret_cast<CUstream>(s)), "cuEventRecord");
}

bool CudaVmmBackend::query(EventHandle e) {
  bind();
  const CUresult r = api_.event_query(reinterpret_cast<CUevent>(e));
  if (r == CUDA_ERROR_NOT_READY) return false;
  api_.check(r, "cuEventQuery");
  return true;
}

void CudaVmmBackend::synchronize(EventHandle e) {
  bind();
  api_.check(api_.event_synchronize(reinterpret_cast<CUevent>(e)), "cuEventSynchronize");
}

void CudaVmmBackend::wait(StreamHandle s, EventHandle e) {
  bind();
  api_.check(api_.stream_wait_event(reinterpret_cast<CUstream>(s), reinterpret_cast<CUevent>(e), 0), "cuStreamWaitEvent");
}

void CudaVmmBackend::synchronize_stream(StreamHandle s) {
  bind();
  api_.check(api_.stream_synchronize(reinterpret_cast<CUstream>(s)), "cuStreamSynchronize");
}

void CudaVmmBackend::copy_async(std::uintptr_t dst, std::uintptr_t src, std::size_t bytes, StreamHandle s) {
  bind();
  api_.check(api_.memcpy_async(static_cast<CUdeviceptr>(dst), static_cast<CUdeviceptr>(src), bytes,
                               reinterpret_cast<CUstream>(s)),
             "cuMemcpyAsync");
}

void CudaVmmBackend::checksum_async(std::uintptr_t va, std::size_t bytes, std::size_t stride, std::uint64_t* out,
                                    StreamHandle s) {
  bind();
  const int e = kernels::launch_checksum(reinterpret_cast<const void*>(va), bytes, stride, out, reinterpret_cast<void*>(s));
  if (e != 0) throw cuda_error("checksum kernel launch (cudaLaunchKernel)", e, "cudaError_t " + std::to_string(e));
}

// Pinned and mapped; under unified addressing (every 64-bit Linux system CUDA 13 supports) the
// device sees it at the same address, which is checked here rather than assumed.
std::uint64_t* CudaVmmBackend::host_words(std::size_t n) {
  bind();
  void* p = nullptr;
  api_.check(api_.mem_host_alloc(&p, n * sizeof(std::uint64_t), CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
             "cuMemHostAlloc(checksum words)");
  CUdeviceptr d = 0;
  const CUresult r = api_.mem_host_get_device_pointer(&d, p, 0);
  if (r != CUDA_SUCCESS || d != reinterpret_cast<CUdeviceptr>(p)) {
    api_.mem_free_host(p);
    api_.check(r != CUDA_SUCCESS ? r : CUDA_ERROR_NOT_SUPPORTED, "cuMemHostGetDevicePointer(checksum words)");
  }
  std::memset(p, 0, n * sizeof(std::uint64_t));
  std::lock_guard lk(gate_mutex_);
  host_words_.push_back(p);
  return static_cast<std::uint64_t*>(p);
}

// Note [CUDA remap gate]
// A gate is one cuStreamBatchMemOp of two operations: write `n` to the slot's `reached` word, then
// wait until its `release` word is >= n. One call, so no kernel another thread enqueues can slip
// between the two; a stream operation starts after the work before it has completed, so `reached`
// == n means the stream is drained up to the gate and held there. Both words live in pinned host
// memory the device maps (cuMemHostAlloc DEVICEMAP): the host polls one and writes the other.
GateHandle CudaVmmBackend::close_gate(StreamHandle s) {
  bind();
  std::uint32_t slot = 0, n = 0;
  {
    std::lock_guard lk(gate_mutex_);
    if (!gate_words_) {
      void* p = nullptr;
      api_.check(api_.mem_host_alloc(&p, 2 * kGateSlots * sizeof(std::uint32_t),
                                     CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
                 "cuMemHostAlloc(gate words)");
      std::memset(p, 0, 2 * kGateSlots * sizeof(std::uint32_t));
      CUdeviceptr d = 0;
      if (CUresult r = api_.mem_host_get_device_pointer(&d, p, 0); r != CUDA_SUCCESS) {
        api_.mem_free_host(p);
        api_.check(r, "cuMemHostGetDevicePointer(gate words)");
      }
      gate_words_ = static_cast<volatile std::uint32_t*>(p);
      gate_words_dev_ = d;
      gate_value_.assign(kGateSlots, 0);
      gate_event_.assign(kGateSlots, nullptr);
      for (std::uint32_t i = kGateSlots; i-- > 0;) gate_free_.push_back(i);
    }
    if (gate_free_.empty()) throw cuda_error("remap gate: all slots in use", 0, "tierpack");
    slot = gate_free_.back();
    gate_free_.pop_back();
    n = ++gate_value_[slot];
    if (n == 0) n = gate_value_[slot] = 1;  // never wraps in practice; keep GEQ meaningful
    if (!gate_event_[slot]) {
      CUevent e = nullptr;
      if (CUresult r = api_.event_create(&e, CU_EVENT_DISABLE_TIMING); r != CUDA_SUCCESS) {
        gate_free_.push_back(slot);
        api_.check(r, "cuEventCreate(gate)");
      }
      gate_event_[slot] = e;
    }
  }
  // Belt and braces: an event just before the gate. gate_reached() also asks that it completed, so
  // the gate does not rest on the stream-ordering of memory operations alone for the work this
  // thread's caller saw enqueued (work other threads slip in between is covered by the gate's write).
  if (CUresult r = api_.event_record(gate_event_[slot], reinterpret_cast<CUstream>(s)); r != CUDA_SUCCESS) {
    std::lock_guard lk(gate_mutex_);
    gate_free_.push_back(slot);
    api_.check(r, "cuEventRecord(gate)");
  }
  CUstreamBatchMemOpParams ops[2];
  std::memset(ops, 0, sizeof ops);
  ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  ops[0].writeValue.address = gate_words_dev_ + 2 * slot * sizeof(std::uint32_t);
  ops[0].writeValue.value = n;
  ops[0].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
  ops[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
  ops[1].waitValue.address = gate_words_dev_ + (2 * slot + 1) * sizeof(std::uint32_t);
  ops[1].waitValue.value = n;
  ops[1].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
  const CUresult r = api_.stream_batch_mem_op(reinterpret_cast<CUstream>(s), 2, ops, 0);
  if (r != CUDA_SUCCESS) {
    std::lock_guard lk(gate_mutex_);
    gate_free_.push_back(slot);
    api_.check(r, "cuStreamBatchMemOp(remap gate)");
  }
  return GateHandle{slot} + 1;
}

bool CudaVmmBackend::gate_reached(GateHandle g) {
  const auto slot = static_cast<std::uint32_t>(g - 1);
  std::uint32_t n = 0;
  CUevent e = nullptr;
  {
    std::lock_guard lk(gate_mutex_);
    n = gate_value_[slot];
    e = gate_event_[slot];
  }
  if (gate_words_[2 * slot] != n) return false;
  bind();
  const CUresult r = api_.event_query(e);
  if (r == CUDA_ERROR_NOT_READY) return false;
  api_.check(r, "cuEventQuery(gate)");
  return true;
}

void CudaVmmBackend::open_gate(GateHandle g) noexcept {
  const auto slot = static_cast<std::uint32_t>(g - 1);
  std::lock_guard lk(gate_mutex_);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  gate_words_[2 * slot + 1] = gate_value_[slot];
  std::atomic_thread_fence(std::memory_order_seq_cst);
  gate_free_.push_back(slot);
}

void CudaVmmBackend::read(void* dst, std::uintptr_t src, std::size_t bytes) {
  bind();
  api_.check(api_.memcpy(reinterpret_cast<CUdeviceptr>(dst), static_cast<CUdeviceptr>(src), bytes), "cuMemcpy(DtoH)");
}

void CudaVmmBackend::write(std::uintptr_t dst, const void* src, std::size_t bytes) {
  bind();
  api_.check(api_.memcpy(static_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes), "cuMemcpy(HtoD)");
}

}  // namespace tierpack::gpu

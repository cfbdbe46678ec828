// CudaVmmBackend: VmmBackend on the CUDA virtual memory management API (cuMemAddressReserve,
// cuMemCreate on the device or on a host NUMA node, cuMemMap, cuMemSetAccess, cuMemUnmap), with
// non-blocking streams and timing-free events for the copy engine. All calls run in the device's
// primary context (the one PyTorch uses), made current on whichever thread calls.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "alloc/gpu/cuda_vmm.hpp"
#include "alloc/gpu/vmm_backend.hpp"

namespace tierpack::gpu {

struct CudaBackendOptions {
  int device = 0;
  int host_numa_node = -1;  ///< -1: the node nearest the GPU (CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, else 0)
};

class CudaVmmBackend final : public VmmBackend {
 public:
  /// Throws cuda_error ("no CUDA device ...") when CUDA cannot be used.
  explicit CudaVmmBackend(CudaBackendOptions options = {});
  ~CudaVmmBackend() override;
  CudaVmmBackend(const CudaVmmBackend&) = delete;
  CudaVmmBackend& operator=(const CudaVmmBackend&) = delete;

  const BackendInfo& info() const noexcept override { return info_; }
  std::uintptr_t reserve(std::size_t bytes) override;
  void unreserve(std::uintptr_t va, std::size_t bytes) noexcept override;
  PhysHandle create(Residence where, std::size_t bytes) override;
  void release(PhysHandle h) noexcept override;
  void map(std::uintptr_t va, PhysHandle h) override;
  void unmap(std::uintptr_t va, std::size_t bytes) override;
  StreamHandle create_stream() override;
  void destroy_stream(StreamHandle s) noexcept override;
  EventHandle create_event() override;
  void destroy_event(EventHandle e) noexcept override;
  void record(EventHandle e, StreamHandle s) override;
  bool query(EventHandle e) override;
  void synchronize(EventHandle e) override;
  void wait(StreamHandle s, EventHandle e) override;
  void synchronize_stream(StreamHandle s) override;
  void copy_async(std::uintptr_t dst, std::uintptr_t src, std::size_t bytes, StreamHandle s) override;
  void checksum_async(std::uintptr_t va, std::size_t bytes, std::size_t stride, std::uint64_t* out, StreamHandle s) override;
  std::uint64_t* host_words(std::size_t n) override;
  GateHandle close_gate(StreamHandle s) override;
  bool gate_reached(GateHandle g) override;
  void open_gate(GateHandle g) noexcept override;
  void read(void* dst, std::uintptr_t src, std::size_t bytes) override;
  void write(std::uintptr_t dst, const void* src, std::size_t bytes) override;
  std::uintptr_t current_context() override;
  void set_current_context(std::uintptr_t ctx) override;

  const CudaDriverApi& api() const { return api_; }
  /// Makes the device's primary context current on the calling thread.
  void bind() const;

 private:
  CUmemAllocationProp prop(Residence where) const;

  CudaDriverApi api_;
  BackendInfo info_;
  CUdevice device_ = 0;
  CUcontext ctx_ = nullptr;
  bool host_numa_ = true;  // false: fall back to CU_MEM_LOCATION_TYPE_HOST
  // Gate slots: a pinned, device-mapped array of (reached, release) counter pairs, one pair per
  // gate in use; counters only grow, so a slot is reused without ever being reset.
  static constexpr std::uint32_t kGateSlots = 512;
  std::mutex gate_mutex_;
  volatile std::uint32_t* gate_words_ = nullptr;  // 2 * kGateSlots
  CUdeviceptr gate_words_dev_ = 0;
  std::vector<std::uint32_t> gate_value_;  // value of the slot's current gate
  std::vector<CUevent> gate_event_;        // recorded on the stream just before the slot's gate
  std::vector<std::uint32_t> gate_free_;
  std::vector<void*> host_words_;  // cuMemHostAlloc'ed (host_words), freed with the backend
};

}  // namespace tierpack::gpu

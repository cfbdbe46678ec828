// MemfdBackend: the test twin of the CUDA VMM backend (see vmm_backend.hpp). It runs on any Linux
// host: a reservation is an mmap(PROT_NONE) range, a physical handle is a memfd, map is
// mmap(MAP_FIXED | MAP_SHARED) of the memfd, unmap puts PROT_NONE back (so a stray access faults
// like an unmapped GPU address), streams are worker threads that run their work in order, events
// capture a stream's progress, and the copy engine is memcpy on a stream's thread.
//
// The twin checks the VMM API's preconditions that the real driver only reports as errors (mapping
// over a mapped range, unmapping what is not mapped) and throws logic_error on them, so protocol bugs
// surface in CI.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <atomic>
#include <unordered_map>
#include <vector>

#include "alloc/gpu/vmm_backend.hpp"

namespace tierpack::gpu {

struct TwinOptions {
  std::size_t granularity = std::size_t{2} << 20;
  std::uint64_t device_bytes = std::uint64_t{1} << 30;  ///< capacity of the emulated device memory
  std::uint64_t host_bytes = std::uint64_t{4} << 30;    ///< capacity of the emulated host node
  /// Fault injection: return true to make create() fail as if the location were full.
  std::function<bool(Residence, std::size_t)> fail_create;
  /// Extra latency of every async copy, to widen race windows in tests.
  std::chrono::microseconds copy_delay{0};
};

class MemfdBackend final : public VmmBackend {
 public:
  explicit MemfdBackend(TwinOptions options = {});
  ~MemfdBackend() override;
  MemfdBackend(const MemfdBackend&) = delete;
  MemfdBackend& operator=(const MemfdBackend&) = delete;

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

  /// Twin only: runs `work` on stream `s` in order with its other work (what a kernel is on a GPU).
  void enqueue(StreamHandle s, std::function<void()> work);
  /// Twin only: what a kernel's memory access is on a GPU. Runs `access` on [va, va+bytes) while no
  /// map/unmap can run; throws logic_error ("illegal address", what CUDA reports as
  /// CUDA_ERROR_ILLEGAL_ADDRESS) when any byte of the range is unmapped. Call it from stream work.
  void device_access(std::uintptr_t va, std::size_t bytes, const std::function<void(void*)>& access);
  /// Twin only: device accesses that found an unmapped byte.
  std::uint64_t illegal_accesses() const;
  /// Bytes of physical memory currently created at `where`.
  std::uint64_t created_bytes(Residence where) const;

 private:
  struct Stream;
  struct Event;
  struct Gate;
  Stream& stream(StreamHandle s);
  void check_in_reservation(std::uintptr_t va, std::size_t bytes) const;

  TwinOptions options_;
  BackendInfo info_;
  mutable std::shared_mutex mapping_;  // exclusive: map/unmap; shared: device_access
  std::atomic<std::uint64_t> illegal_{0};
  mutable std::mutex mutex_;  // guards the maps below
  std::map<std::uintptr_t, std::size_t> reservations_;
  std::map<std::uintptr_t, std::size_t> mapped_;
  std::uint64_t created_[kResidenceCount] = {0, 0};
  std::unique_ptr<Stream> default_stream_;
  std::unordered_map<StreamHandle, std::unique_ptr<Stream>> streams_;
  std::unordered_map<GateHandle, std::shared_ptr<Gate>> gates_;
  std::vector<std::unique_ptr<std::uint64_t[]>> words_;  // host_words
};

}  // namespace tierpack::gpu

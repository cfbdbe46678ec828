// VmmBackend: the virtual-memory and copy-engine operations the GPU tier is built on, as one small
// interface with two implementations: the CUDA VMM driver API (cuda_backend.hpp) and a memfd twin
// that runs on any Linux host (memfd_backend.hpp). The allocator and the migration protocol only
// speak to this interface, so CI runs the same state machine the H200 runs.
//
// Note [Always-mapped page groups]
// The GPU tier reserves one large virtual range per device. Every chunk of it that holds tensors is
// mapped to a physical handle that lives either in device memory or in host memory
// (CU_MEM_LOCATION_TYPE_HOST_NUMA). Migration copies the chunk's bytes into a handle on the other side
// and then remaps the same virtual range to that handle: pointers never change, and a kernel the
// runtime did not see still reads correct data (over PCIe when the chunk lives on the host). The only
// moment a chunk is unreadable is between unmap and map of a remap; the migration protocol
// (migrate/gpu/group_mover.hpp) makes sure nothing enqueued can touch it then.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tierpack::gpu {

/// Where a physical handle lives.
enum class Residence : std::uint8_t { device, host };
inline constexpr int kResidenceCount = 2;
std::string_view to_string(Residence r);
inline Residence other(Residence r) { return r == Residence::device ? Residence::host : Residence::device; }

/// A physical memory allocation (CUmemGenericAllocationHandle / a memfd). Owned by whoever created it.
struct PhysHandle {
  std::uint64_t value = 0;  ///< backend-specific
  std::size_t bytes = 0;
  Residence where = Residence::device;
  explicit operator bool() const { return bytes != 0; }
};

/// A stream: cudaStream_t / CUstream as an integer (0 is the legacy default stream), or a twin stream.
using StreamHandle = std::uintptr_t;
/// An event: CUevent as an integer, or a twin event.
using EventHandle = std::uintptr_t;
/// A remap gate on one stream (see close_gate); 0 is none.
using GateHandle = std::uintptr_t;

struct BackendInfo {
  std::string name;                ///< "cuda" or "memfd-twin"
  std::string device_name;         ///< "NVIDIA H200", "twin"
  int device = 0;                  ///< CUDA ordinal
  int host_numa_node = 0;          ///< node host handles are created on
  std::size_t granularity = 0;     ///< mapping granularity (2 MiB on current GPUs)
  std::uint64_t device_bytes = 0;  ///< total device memory
};

/// The operations of the CUDA VMM API the GPU tier needs. Every call may throw from the
/// tierpack::error family (cuda_error, os_error; out_of_memory when a location is full), except the
/// noexcept release paths.
class VmmBackend {
 public:
  virtual ~VmmBackend() = default;
  virtual const BackendInfo& info() const noexcept = 0;

  // ---- virtual address space
  /// Reserves `bytes` (a multiple of the granularity) of device-visible virtual addresses.
  virtual std::uintptr_t reserve(std::size_t bytes) = 0;
  virtual void unreserve(std::uintptr_t va, std::size_t bytes) noexcept = 0;

  // ---- physical memory
  /// Creates a physical allocation on the device or on the host NUMA node. Throws out_of_memory
  /// when that location has no room.
  virtual PhysHandle create(Residence where, std::size_t bytes) = 0;
  virtual void release(PhysHandle h) noexcept = 0;
  /// Maps all of `h` at `va` (inside a reservation, currently unmapped) and grants the device
  /// read/write access (cuMemMap + cuMemSetAccess).
  virtual void map(std::uintptr_t va, PhysHandle h) = 0;
  /// Unmaps [va, va+bytes). The caller guarantees nothing enqueued can still touch the range.
  virtual void unmap(std::uintptr_t va, std::size_t bytes) = 0;

  // ---- streams and events (CUDA semantics: work on one stream runs in order)
  /// A non-blocking stream (does not synchronise with the legacy default stream).
  virtual StreamHandle create_stream() = 0;
  virtual void destroy_stream(StreamHandle s) noexcept = 0;
  virtual EventHandle create_event() = 0;
  virtual void destroy_event(EventHandle e) noexcept = 0;
  /// Captures the work enqueued on `s` so far.
  virtual void record(EventHandle e, StreamHandle s) = 0;
  /// True once the captured work has completed (true for an event never recorded).
  virtual bool query(EventHandle e) = 0;
  virtual void synchronize(EventHandle e) = 0;
  /// Work enqueued on `s` after this call waits for the work `e` captured (no host wait).
  virtual void wait(StreamHandle s, EventHandle e) = 0;
  virtual void synchronize_stream(StreamHandle s) = 0;
  /// Stream-ordered copy between two device-visible addresses (device or host-backed).
  virtual void copy_async(std::uintptr_t dst, std::uintptr_t src, std::size_t bytes, StreamHandle s) = 0;
  /// Stream-ordered checksum of [va, va+bytes) (device-visible, bytes a multiple of 16; with a
  /// `stride`, of the first kSampleBytes of every stride bytes only) written as
  /// kChecksumWords partial sums to `out` (from host_words; read it with checksum_total once an event
  /// recorded after this call has completed). See alloc/gpu/chunk_checksum.hpp.
  virtual void checksum_async(std::uintptr_t va, std::size_t bytes, std::size_t stride, std::uint64_t* out, StreamHandle s) = 0;
  /// `n` words of host memory the device can write (pinned and mapped on CUDA), owned by the
  /// backend and valid until it is destroyed.
  virtual std::uint64_t* host_words(std::size_t n) = 0;

  // ---- remap gates (Note [Remap gate] in migrate/gpu/group_mover.hpp)
  /// Enqueues a gate on `s` in ONE stream operation: work enqueued on `s` before it runs to
  /// completion first; work enqueued after it does not start before open_gate(). Callable from any
  /// thread while other threads enqueue on `s`.
  virtual GateHandle close_gate(StreamHandle s) = 0;
  /// True once the stream has reached the gate: everything enqueued on `s` before it has completed,
  /// and nothing enqueued after it has started.
  virtual bool gate_reached(GateHandle g) = 0;
  /// Lets the stream go on and forgets the gate. Exactly once per gate, reached or not.
  virtual void open_gate(GateHandle g) noexcept = 0;

  // ---- the calling thread's context (CUDA: the calls above make the device's primary context current)
  /// The calling thread's current context; 0 when it has none, or for a backend without contexts (the twin).
  virtual std::uintptr_t current_context() { return 0; }
  /// Makes `ctx` (from current_context, not 0) current again on the calling thread.
  virtual void set_current_context(std::uintptr_t /*ctx*/) {}

  // ---- host access, for tests and tools: synchronous copies; callers synchronise the streams that
  // wrote the range first
  virtual void read(void* dst, std::uintptr_t src, std::size_t bytes) = 0;
  virtual void write(std::uintptr_t dst, const void* src, std::size_t bytes) = 0;
};

}  // namespace tierpack::gpu

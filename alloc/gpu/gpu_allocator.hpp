// GpuAllocator: a stream-ordered caching allocator for one GPU on always-mapped page groups (see
// Note [Always-mapped page groups] in vmm_backend.hpp).
//
// Note [GPU allocator layout]
// One reservation per device is cut into chunks of `chunk_bytes` (32 MiB by default): the unit of
// mapping, of residency and of migration. A chunk that holds tensors is always mapped to a physical
// handle from the device pool or the host pool (handle_pool.hpp). Chunks belong to segments (one
// chunk, or a run of chunks for tensors larger than a chunk); segments belong to arenas; blocks live
// inside segments. An arena is a page group as the plan sees it: its chunks migrate together.
// Before a plan exists there are two arenas: kDefaultArena for tensors above `small_threshold` and
// kSmallArena whose chunks are cut into 2 MiB pages that small blocks never cross.
//
// Caching semantics are PyTorch's: a segment belongs to the stream that allocated it; a block freed
// on that stream is reusable by it at once; `record_stream` makes a free wait (without blocking) for
// events on the other streams; empty segments move to another stream only behind an event
// (the new stream waits on it, or the host waits when memory is unmapped). Nothing synchronises the
// device on free.
//
// Budget: the device pool's limit is budget / chunk_bytes handles, so device memory held by this
// allocator (mapped, idle, or in flight in a migration) never exceeds the budget. When a new chunk
// finds no device handle, the allocator reclaims empty segments, then asks the pressure handler (the
// mover: wait for an in-flight eviction), then spills the chunk to host memory (still mapped, so
// still correct) when allowed, and only then throws out_of_memory naming the request, the tier, the
// budget and what is resident where.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "alloc/gpu/handle_pool.hpp"
#include "alloc/gpu/vmm_backend.hpp"

namespace tierpack::gpu {

using ArenaId = std::uint32_t;
inline constexpr ArenaId kDefaultArena = 0;
inline constexpr ArenaId kSmallArena = 1;

struct GpuAllocatorOptions {
  std::size_t chunk_bytes = std::size_t{32} << 20;  ///< mapping and migration unit (multiple of the granularity)
  std::size_t page_bytes = std::size_t{2} << 20;    ///< small blocks never cross a page
  std::size_t small_threshold = std::size_t{1} << 20;
  std::uint64_t device_budget = 0;                  ///< 0: the device's total memory
  std::uint64_t host_limit = std::uint64_t{64} << 30;  ///< most host memory to back chunks with
  bool spill_to_host = true;                        ///< over budget, back new chunks with host memory
  std::string tier_name = "gpu0";
};

/// Counters and gauges (bytes unless named otherwise).
struct AllocatorStats {
  std::uint64_t allocated = 0;       ///< live blocks (rounded sizes)
  std::uint64_t peak_allocated = 0;
  std::uint64_t requested = 0;       ///< live blocks (requested sizes)
  std::uint64_t segment_bytes[kResidenceCount] = {0, 0};  ///< chunks held by segments, by residence
  std::uint64_t device_handles = 0;  ///< all device memory held (segments, pool, migrations): what the budget limits
  std::uint64_t peak_device_handles = 0;
  std::uint64_t host_handles = 0;
  std::uint64_t device_budget = 0;
  std::uint64_t allocations = 0;
  std::uint64_t frees = 0;
  std::uint64_t segments_created = 0;
  std::uint64_t segments_reclaimed = 0;
  std::uint64_t cross_stream_reuses = 0;
  std::uint64_t spilled_chunks = 0;   ///< chunks backed by host memory because the budget was full
  std::uint64_t pressure_waits = 0;   ///< allocations that waited for an eviction to finish
  double pressure_wait_ns = 0;        ///< time those allocations spent waiting (the caller's thread)
  std::uint64_t closed_arena_fallbacks = 0;  ///< allocations meant for an arena being migrated
  std::uint64_t out_of_memory = 0;
};

struct ArenaResidency {
  std::uint64_t device_bytes = 0;
  std::uint64_t host_bytes = 0;
  std::uint64_t moving_bytes = 0;
  std::uint64_t live_bytes = 0;  ///< allocated blocks
  bool open = true;              ///< accepts allocations (not closed, all chunks on the device, none moving)
};

struct LiveBlock {
  std::uintptr_t addr = 0;
  std::size_t size = 0;
  std::uintptr_t segment = 0;  ///< base of its segment
  std::size_t segment_bytes = 0;
  ArenaId arena = 0;
};

/// One chunk of an arena changing handles: copy `from` -> `to` (unless the chunk holds no live
/// block), then remap `va` from `from` to `to`.
struct ChunkMove {
  std::uintptr_t va = 0;
  std::size_t bytes = 0;
  PooledHandle from;
  PooledHandle to;
  bool copy = true;
};

struct MigrationTicket {
  ArenaId arena = 0;
  Residence to = Residence::host;
  std::vector<ChunkMove> moves;
  std::size_t chunks_left = 0;  ///< chunks that should move but found no destination handle yet
  std::uint64_t copy_bytes() const;
  bool empty() const { return moves.empty(); }
};

class GpuAllocator {
 public:
  GpuAllocator(VmmBackend& backend, GpuAllocatorOptions options);
  ~GpuAllocator();
  GpuAllocator(const GpuAllocator&) = delete;
  GpuAllocator& operator=(const GpuAllocator&) = delete;

  /// Allocates `bytes` for work on `stream` in `arena` (or the default arenas when that arena is
  /// being migrated or lives on the host). Returns nullptr for 0 bytes. Throws out_of_memory.
  void* allocate(std::size_t bytes, StreamHandle stream, ArenaId arena = kDefaultArena);
  /// Frees a block; stream-ordered (see the Note). Unknown pointers are ignored (and counted).
  void deallocate(void* p) noexcept;
  /// The block is also used on `stream`: its free waits for the work enqueued there until then.
  void record_stream(void* p, StreamHandle stream);
  /// Every stream seen in allocate() or record_stream() (or added): the streams whose kernels may
  /// touch this allocator's memory, which the mover gates around remaps.
  std::vector<StreamHandle> streams() const;
  /// Adds a stream that may touch this allocator's memory without allocating on it.
  void add_stream(StreamHandle s);
  /// Size of the block starting at `p` (0 when unknown).
  std::size_t block_size(const void* p) const;
  /// The arena of the chunk holding `p` (any address inside a live block); kDefaultArena if unknown.
  ArenaId arena_of(const void* p) const;

  /// Where the chunk holding `p` lives now (nullopt when no segment holds it).
  std::optional<Residence> residence_of(const void* p) const;
  /// A new, empty arena (a page group). Its first segment is made at least `segment_hint` bytes,
  /// so a group whose size the plan knows packs into one run of chunks.
  ArenaId create_arena(std::string name, std::size_t segment_hint = 0);
  /// Moves the segment holding `p` into `arena`; returns the segment's bytes (0 when `p` is unknown,
  /// the segment is already there, or it is migrating).
  std::uint64_t adopt(ArenaId arena, const void* p);
  ArenaResidency residency(ArenaId arena) const;
  /// The live block containing `p` (any interior address), if any.
  std::optional<LiveBlock> find_block(const void* p) const;
  /// Every live block, by address.
  std::vector<LiveBlock> live_blocks() const;
  std::size_t arena_count() const;

  // ---- migration (used by migrate/gpu/group_mover.hpp)
  /// Marks the arena's chunks that are not at `to` (and not already moving) as moving and acquires a
  /// destination handle for each while handles are available. May return fewer moves than needed
  /// (chunks_left > 0) when the destination pool is full.
  MigrationTicket begin_migration(ArenaId arena, Residence to);
  /// The moves of `t` have been copied and remapped: their chunks now map `to`; `from` handles go
  /// back to their pools.
  void finish_migration(const MigrationTicket& t) noexcept;
  /// The moves of `t` were not performed: the chunks keep `from`; `to` handles go back.
  void abort_migration(const MigrationTicket& t) noexcept;
  /// Closes an arena to new blocks (allocations meant for it go to the default arenas) from the
  /// moment an eviction is scheduled until a prefetch reopens it; the default arenas never close.
  /// Never waits for the allocator's lock (safe to call with a lock the training thread may need).
  void set_arena_closed(ArenaId arena, bool closed);
  /// Unmaps empty device segments until about `bytes` of device handles are idle in the pool
  /// (`wait`: also segments whose stream has not yet passed their last use, waiting for it).
  /// Returns the bytes made idle.
  std::uint64_t reclaim_device(std::uint64_t bytes, bool wait);
  /// Called without the lock when a device handle is needed and none is free. Returns true when it
  /// waited for something that may have freed one (an eviction), false when nothing can come.
  void set_pressure_handler(std::function<bool()> handler);

  // ---- budget and housekeeping
  void set_device_budget(std::uint64_t bytes);
  std::uint64_t device_budget() const;
  /// Unmaps every empty segment (waiting for its stream) and trims the idle pools.
  void empty_cache();
  /// Creates host handles ahead of need (they are slow to create).
  std::size_t prewarm_host(std::uint64_t bytes);
  AllocatorStats stats() const;
  /// Device memory held (what the budget limits); cheaper than stats().
  std::uint64_t device_bytes() const;
  /// Bytes of chunks held by segments (holding blocks or cached for them) on `where`.
  std::uint64_t segment_bytes(Residence where) const;
  void reset_peaks();
  /// "resident: 14.2 GiB on gpu0 (budget 16.0 GiB; 12.1 GiB allocated), 3.0 GiB on host".
  std::string describe() const;

  VmmBackend& backend() { return backend_; }
  const GpuAllocatorOptions& options() const { return options_; }
  std::uintptr_t base() const { return base_; }
  std::size_t reservation_bytes() const { return va_bytes_; }

 private:
  struct Impl;
  std::uint64_t device_budget_locked() const;
  void deallocate_locked(void* p);
  VmmBackend& backend_;
  GpuAllocatorOptions options_;
  std::uintptr_t base_ = 0;
  std::size_t va_bytes_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tierpack::gpu

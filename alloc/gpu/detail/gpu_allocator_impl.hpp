// GpuAllocator::Impl, the allocator's private state, and the records of its layers (Note [GPU
// allocator layout] in gpu_allocator.hpp), shared by the files that implement them:
//   gpu_allocator_chunks.cpp    chunks: the reservation's slots and the handle behind each chunk
//   gpu_allocator_segments.cpp  segments: made, cached empty, reclaimed, released
//   gpu_allocator_blocks.cpp    blocks inside segments: allocate, free, split, merge
//   gpu_allocator_arenas.cpp    arenas (page groups): open or closed, adoption, migration
//   gpu_allocator.cpp           construction, streams, budget and statistics
// Private to alloc/gpu.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "alloc/gpu/gpu_allocator.hpp"

namespace tierpack::gpu::detail {

inline constexpr std::size_t kMinBlock = 512;

struct Segment;

struct Block {
  std::uintptr_t addr = 0;
  std::size_t size = 0;
  std::size_t requested = 0;
  StreamHandle stream = 0;  // the segment's stream (kept here for the free-set order)
  Segment* seg = nullptr;
  Block* prev = nullptr;
  Block* next = nullptr;
  bool allocated = false;
  std::vector<StreamHandle> uses;  // record_stream: other streams that used the block
};

struct FreeOrder {
  bool operator()(const Block* a, const Block* b) const {
    return std::tie(a->stream, a->size, a->addr) < std::tie(b->stream, b->size, b->addr);
  }
};

struct Arena;

struct Segment {
  std::uintptr_t base = 0;
  std::size_t bytes = 0;
  std::uint32_t first = 0;  // first chunk slot
  std::uint32_t count = 0;  // chunks
  Arena* arena = nullptr;
  StreamHandle stream = 0;
  bool paged = false;
  std::size_t allocated = 0;  // bytes of allocated (or pending) blocks
  Block* head = nullptr;
  EventHandle empty_event = 0;  // recorded on `stream` when the segment last became empty
  bool spill = false;           // made over budget with host chunks: Note [Spill segments] in gpu_allocator_blocks.cpp
  bool empty_known = false;     // empty_event was recorded (else wait for the whole stream)
  bool in_empty = false;
  bool in_release = false;      // queued in Impl::host_release
  std::list<Segment*>::iterator empty_it;
};

struct Chunk {
  PooledHandle handle;
  Residence where = Residence::device;
  bool moving = false;
  Segment* seg = nullptr;
};

struct Arena {
  ArenaId id = 0;
  std::string name;
  bool paged = false;
  std::size_t segment_hint = 0;
  std::set<Block*, FreeOrder> free;
  std::set<Block*, FreeOrder> spill_free;  // free blocks of spill segments (Note [Spill segments])
  std::unordered_set<Segment*> segments;
  std::uint64_t live = 0;
};

struct Pending {
  Block* block;
  std::vector<EventHandle> events;
};

inline std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

}  // namespace tierpack::gpu::detail

namespace tierpack::gpu {

struct GpuAllocator::Impl {
  using Block = detail::Block;
  using FreeOrder = detail::FreeOrder;
  using Segment = detail::Segment;
  using Chunk = detail::Chunk;
  using Arena = detail::Arena;
  using Pending = detail::Pending;

  GpuAllocator& self;
  std::mutex m;
  std::vector<Chunk> chunks;
  std::map<std::uint32_t, std::uint32_t> free_runs;  // first slot -> length
  std::vector<std::unique_ptr<Arena>> arenas;
  std::unordered_map<std::uintptr_t, Block*> live;
  std::list<Segment*> empty;
  // Emptied segments in host memory (spill segments, and any other segment whose chunks all live on
  // the host), released once their stream passed their last use (Note [Spill segments]).
  std::vector<Segment*> host_release;
  std::vector<Pending> pending;
  std::vector<EventHandle> events;  // idle events
  std::unique_ptr<HandlePool> pools[kResidenceCount];
  std::function<bool()> pressure;
  // Note [Closed arenas] in gpu_allocator_arenas.cpp: guarded by `closed_m`, never by `m`.
  std::mutex closed_m;
  std::unordered_set<ArenaId> closed;
  std::atomic<std::size_t> arena_count{0};
  std::vector<StreamHandle> seen_streams;  // every stream work was allocated for or recorded on
  void saw_stream(StreamHandle s) {
    if (std::find(seen_streams.begin(), seen_streams.end(), s) == seen_streams.end()) seen_streams.push_back(s);
  }
  AllocatorStats st;
  std::uint64_t unknown_frees = 0;

  explicit Impl(GpuAllocator& s) : self(s) {}
  VmmBackend& be() { return self.backend_; }
  std::size_t chunk() const { return self.options_.chunk_bytes; }
  HandlePool& pool(Residence r) { return *pools[static_cast<int>(r)]; }
  std::uintptr_t slot_va(std::uint32_t slot) const { return self.base_ + std::uintptr_t{slot} * chunk(); }

  EventHandle take_event() {
    if (!events.empty()) {
      EventHandle e = events.back();
      events.pop_back();
      return e;
    }
    return be().create_event();
  }

  // ---- chunks (gpu_allocator_chunks.cpp)
  // Virtual address runs: `n` free slots in a row, and giving them back.
  std::optional<std::uint32_t> alloc_run(std::uint32_t n);
  void free_run(std::uint32_t first, std::uint32_t n);
  PooledHandle acquire_device(std::unique_lock<std::mutex>& lk);
  Segment* segment_of(std::uintptr_t p) const {
    if (p < self.base_ || p >= self.base_ + self.va_bytes_) return nullptr;
    return chunks[(p - self.base_) / chunk()].seg;
  }

  // ---- segments (gpu_allocator_segments.cpp)
  void record_empty(Segment* s) noexcept;
  bool empty_passed(Segment* s);
  void wait_empty(Segment* s);
  void mark_empty(Segment* s);
  void unmark_empty(Segment* s);
  bool segment_on_device_idle(const Segment* s) const;
  void queue_host_release(Segment* s);
  bool segment_holds_host_idle(const Segment* s) const;
  void release_if_emptied(std::uintptr_t va);
  void process_events();
  void release_segment(Segment* s);
  bool reclaim_one(bool allow_wait);
  Segment* transfer_empty(Arena* a, StreamHandle stream);
  struct Acquired {
    PooledHandle h;
    Residence where = Residence::device;
  };
  [[noreturn]] void throw_oom(std::size_t requested, const std::string& why);
  Segment* new_segment(std::unique_lock<std::mutex>& lk, Arena* a, StreamHandle stream, std::size_t size);

  // ---- blocks (gpu_allocator_blocks.cpp)
  static std::set<Block*, FreeOrder>& free_set(const Segment* s);
  void build_blocks(Segment* s);
  void drop_blocks(Segment* s);
  bool can_merge(const Block* first, const Block* second) const;
  void free_block(Block* b);
  static Block* find_in(const std::set<Block*, FreeOrder>& set, StreamHandle stream, std::size_t size);

  // ---- arenas (gpu_allocator_arenas.cpp)
  bool arena_open(const Arena* a);

  // ---- statistics (gpu_allocator.cpp)
  void update_peaks() {
    st.peak_allocated = std::max(st.peak_allocated, st.allocated);
    const std::uint64_t dev = pool(Residence::device).owned_bytes();
    st.peak_device_handles = std::max(st.peak_device_handles, dev);
  }
  std::string describe_locked() const;
};

}  // namespace tierpack::gpu

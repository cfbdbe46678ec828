// The GPU allocator's block layer (Note [GPU allocator layout] in gpu_allocator.hpp): blocks inside
// segments, kept in free sets ordered by (stream, size, address). Allocation takes the smallest free
// block of its stream that fits (a new segment when none does) and splits it; a free merges with free
// neighbours (never across a page of a paged segment), or waits for events on the streams
// record_stream named; the queries that find a live block.
#include "alloc/gpu/detail/gpu_allocator_impl.hpp"

#include "core/error.hpp"

namespace tierpack::gpu {
using namespace detail;

// Note [Spill segments]: a segment made with host chunks because the budget was full keeps its free
// blocks apart, for requests that would otherwise spill a chunk of their own: a request that can get
// device memory never lands in one, and once empty the segment is released, so later tensors get
// device memory again instead of settling in host memory for good. Without the sharing every spilled
// request took whole chunks for itself: with 256 MiB chunks, GPT-2 large at 45% of its peak filled the
// 64 GiB host limit (256 handles) with 21 GiB of tensors in its first iteration and ran out of memory
// (bench/results/gpu-h200-2026-11-30-5, section 3; bench/gpu/gpu_trace_twin reproduces it).
std::set<Block*, FreeOrder>& GpuAllocator::Impl::free_set(const Segment* s) {
  return s->spill ? s->arena->spill_free : s->arena->free;
}

void GpuAllocator::Impl::build_blocks(Segment* s) {
  const std::size_t piece = s->paged ? self.options_.page_bytes : s->bytes;
  Block* prev = nullptr;
  for (std::size_t off = 0; off < s->bytes; off += piece) {
    auto* b = new Block;
    b->addr = s->base + off;
    b->size = std::min(piece, s->bytes - off);
    b->stream = s->stream;
    b->seg = s;
    b->prev = prev;
    if (prev) prev->next = b;
    else s->head = b;
    prev = b;
    free_set(s).insert(b);
  }
}
void GpuAllocator::Impl::drop_blocks(Segment* s) {  // all blocks are free
  for (Block* b = s->head; b;) {
    Block* n = b->next;
    free_set(s).erase(b);
    delete b;
    b = n;
  }
  s->head = nullptr;
}

bool GpuAllocator::Impl::can_merge(const Block* first, const Block* second) const {
  return !first->seg->paged || second->addr % self.options_.page_bytes != 0;
}

void GpuAllocator::Impl::free_block(Block* b) {
  Segment* s = b->seg;
  auto& free = free_set(s);
  b->allocated = false;
  b->uses.clear();
  s->allocated -= b->size;
  if (b->prev && !b->prev->allocated && can_merge(b->prev, b)) {
    Block* p = b->prev;
    free.erase(p);
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    delete b;
    b = p;
  }
  if (b->next && !b->next->allocated && can_merge(b, b->next)) {
    Block* n = b->next;
    free.erase(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    delete n;
  }
  free.insert(b);
  if (s->spill) {
    // Note [Spill segments]. The same release holds for any other segment found empty with all its
    // chunks on the host (a spilled page of small blocks, a group's segment emptied while evicted):
    // cached, it would put the next tensors in host memory.
    if (s->allocated == 0) queue_host_release(s);
    return;
  }
  if (s->allocated == 0) {
    if (segment_holds_host_idle(s)) queue_host_release(s);
    else mark_empty(s);
  }
}

// The smallest free block of `set` on `stream` that holds `size`.
Block* GpuAllocator::Impl::find_in(const std::set<Block*, FreeOrder>& set, StreamHandle stream, std::size_t size) {
  Block probe;
  probe.stream = stream;
  probe.size = size;
  auto it = set.lower_bound(&probe);
  if (it == set.end() || (*it)->stream != stream) return nullptr;
  return *it;
}

void* GpuAllocator::allocate(std::size_t bytes, StreamHandle stream, ArenaId arena_id) {
  if (bytes == 0) return nullptr;
  auto& I = *impl_;
  std::unique_lock lk(I.m);
  I.saw_stream(stream);
  I.process_events();
  const std::size_t size = round_up(std::max(bytes, kMinBlock), kMinBlock);
  const bool small = size <= options_.small_threshold;
  Arena* a = nullptr;
  if (arena_id != kDefaultArena && arena_id != kSmallArena && arena_id < I.arenas.size()) {
    a = I.arenas[arena_id].get();
    if (!I.arena_open(a)) {
      ++I.st.closed_arena_fallbacks;
      a = nullptr;
    }
  }
  if (!a) a = I.arenas[small ? kSmallArena : kDefaultArena].get();
  if (a->paged && size > options_.page_bytes) a = I.arenas[kDefaultArena].get();
  Block* b = I.find_in(a->free, stream, size);
  if (!b) {
    Segment* seg = I.new_segment(lk, a, stream, size);
    b = I.find_in(I.free_set(seg), stream, size);
    TIERPACK_EXPECTS(b != nullptr, "a new segment must hold the request");
  }
  Segment* s = b->seg;
  I.free_set(s).erase(b);
  const std::size_t rest = b->size - size;
  const std::size_t min_split = s->paged ? kMinBlock : options_.small_threshold;
  if (rest >= min_split) {
    auto* r = new Block;
    r->addr = b->addr + size;
    r->size = rest;
    r->stream = b->stream;
    r->seg = s;
    r->prev = b;
    r->next = b->next;
    if (b->next) b->next->prev = r;
    b->next = r;
    b->size = size;
    I.free_set(s).insert(r);
  }
  if (s->allocated == 0) I.unmark_empty(s);
  b->allocated = true;
  b->requested = bytes;
  s->allocated += b->size;
  a->live += b->size;
  I.live[b->addr] = b;
  I.st.allocated += b->size;
  I.st.requested += bytes;
  ++I.st.allocations;
  I.update_peaks();
  return reinterpret_cast<void*>(b->addr);
}

void GpuAllocator::deallocate(void* p) noexcept {
  if (!p) return;
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  try {
    deallocate_locked(p);
  } catch (...) {
    // Only a failing driver gets here (event calls); the block stays allocated rather than being
    // reused out of order: a leak, never a corruption.
  }
}

void GpuAllocator::deallocate_locked(void* p) {
  auto& I = *impl_;
  auto it = I.live.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == I.live.end()) {
    ++I.unknown_frees;
    return;
  }
  Block* b = it->second;
  I.live.erase(it);
  ++I.st.frees;
  I.st.allocated -= b->size;
  I.st.requested -= b->requested;
  b->seg->arena->live -= b->size;
  std::erase(b->uses, b->stream);
  if (!b->uses.empty()) {
    try {
      Pending pend{b, {}};
      for (StreamHandle u : b->uses) {
        EventHandle e = I.take_event();
        pend.events.push_back(e);
        I.be().record(e, u);
      }
      I.pending.push_back(std::move(pend));
      return;
    } catch (...) {
      // Could not record: fall through and free in order of the allocating stream only. This only
      // happens when the driver is failing, where no ordering can be promised anyway.
    }
  }
  I.free_block(b);
}

void GpuAllocator::record_stream(void* p, StreamHandle stream) {
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  auto it = I.live.find(reinterpret_cast<std::uintptr_t>(p));
  TIERPACK_EXPECTS(it != I.live.end(), "record_stream on a pointer this allocator did not return");
  Block* b = it->second;
  I.saw_stream(stream);
  if (stream != b->stream && std::find(b->uses.begin(), b->uses.end(), stream) == b->uses.end())
    b->uses.push_back(stream);
}

std::size_t GpuAllocator::block_size(const void* p) const {
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  auto it = I.live.find(reinterpret_cast<std::uintptr_t>(p));
  return it == I.live.end() ? 0 : it->second->size;
}

std::optional<LiveBlock> GpuAllocator::find_block(const void* p) const {
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  const Segment* s = I.segment_of(addr);
  if (!s) return std::nullopt;
  for (const Block* b = s->head; b; b = b->next)
    if (b->allocated && addr >= b->addr && addr < b->addr + b->size)
      return LiveBlock{b->addr, b->size, s->base, s->bytes, s->arena->id};
  return std::nullopt;
}

std::vector<LiveBlock> GpuAllocator::live_blocks() const {
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  std::vector<LiveBlock> out;
  out.reserve(I.live.size());
  for (const auto& [addr, b] : I.live) out.push_back(LiveBlock{addr, b->size, b->seg->base, b->seg->bytes, b->seg->arena->id});
  std::sort(out.begin(), out.end(), [](const LiveBlock& a, const LiveBlock& b) { return a.addr < b.addr; });
  return out;
}

}  // namespace tierpack::gpu

// The GPU allocator's arena layer (Note [GPU allocator layout] in gpu_allocator.hpp): an arena is a
// page group as the plan sees it, whose chunks migrate together. Whether an arena takes new blocks
// (Note [Closed arenas]), creating arenas and moving segments into them, their residency, and the
// migration of an arena's chunks between handles (used by migrate/gpu/group_mover.hpp).
#include "alloc/gpu/detail/gpu_allocator_impl.hpp"

#include "core/error.hpp"

namespace tierpack::gpu {
using namespace detail;

// Note [Closed arenas]: arenas closed by set_arena_closed (an eviction was scheduled: no new
// blocks), under their own lock, never held while waiting. The mover sets them with its own lock
// held, while the training thread may hold `m` and wait for a stream the mover has gated: with
// `m`, the two would wait for each other.
bool GpuAllocator::Impl::arena_open(const Arena* a) {
  {
    std::lock_guard lk(closed_m);
    if (closed.count(a->id)) return false;
  }
  for (const Segment* s : a->segments)
    for (std::uint32_t i = 0; i < s->count; ++i) {
      const Chunk& c = chunks[s->first + i];
      if (c.moving || c.where != Residence::device) return false;
    }
  return true;
}

void GpuAllocator::set_arena_closed(ArenaId arena, bool closed) {
  auto& I = *impl_;
  TIERPACK_EXPECTS(arena < I.arena_count.load(), "unknown arena");
  if (arena == kDefaultArena || arena == kSmallArena) return;
  std::lock_guard lk(I.closed_m);  // Note [Closed arenas]: not `m`
  if (closed) I.closed.insert(arena);
  else I.closed.erase(arena);
}

ArenaId GpuAllocator::arena_of(const void* p) const {
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  const Segment* s = I.segment_of(reinterpret_cast<std::uintptr_t>(p));
  return s ? s->arena->id : kDefaultArena;
}

ArenaId GpuAllocator::create_arena(std::string name, std::size_t segment_hint) {
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  auto a = std::make_unique<Arena>();
  a->id = static_cast<ArenaId>(I.arenas.size());
  a->name = std::move(name);
  a->segment_hint = segment_hint;
  I.arenas.push_back(std::move(a));
  I.arena_count = I.arenas.size();
  return I.arenas.back()->id;
}

std::uint64_t GpuAllocator::adopt(ArenaId arena, const void* p) {
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  TIERPACK_EXPECTS(arena < I.arenas.size(), "unknown arena");
  Segment* s = I.segment_of(reinterpret_cast<std::uintptr_t>(p));
  Arena* to = I.arenas[arena].get();
  if (!s || s->arena == to) return 0;
  for (std::uint32_t i = 0; i < s->count; ++i)
    if (I.chunks[s->first + i].moving) return 0;
  Arena* from = s->arena;
  std::uint64_t live = 0;
  for (Block* b = s->head; b; b = b->next) {
    if (b->allocated) {
      live += b->size;
    } else {
      (s->spill ? from->spill_free : from->free).erase(b);
      (s->spill ? to->spill_free : to->free).insert(b);
    }
  }
  from->live -= live;
  to->live += live;
  from->segments.erase(s);
  to->segments.insert(s);
  s->arena = to;
  return s->bytes;
}

ArenaResidency GpuAllocator::residency(ArenaId arena) const {
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  TIERPACK_EXPECTS(arena < I.arenas.size(), "unknown arena");
  ArenaResidency r;
  const Arena* a = I.arenas[arena].get();
  for (const Segment* s : a->segments)
    for (std::uint32_t i = 0; i < s->count; ++i) {
      const Chunk& c = I.chunks[s->first + i];
      if (c.moving) r.moving_bytes += options_.chunk_bytes;
      else if (c.where == Residence::device) r.device_bytes += options_.chunk_bytes;
      else r.host_bytes += options_.chunk_bytes;
    }
  r.live_bytes = a->live;
  r.open = I.arena_open(a);
  return r;
}

std::size_t GpuAllocator::arena_count() const {
  std::lock_guard lk(impl_->m);
  return impl_->arenas.size();
}

// ---- migration
std::uint64_t MigrationTicket::copy_bytes() const {
  std::uint64_t n = 0;
  for (const ChunkMove& m : moves)
    if (m.copy) n += m.bytes;
  return n;
}

MigrationTicket GpuAllocator::begin_migration(ArenaId arena, Residence to) {
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  TIERPACK_EXPECTS(arena < I.arenas.size(), "unknown arena");
  MigrationTicket t;
  t.arena = arena;
  t.to = to;
  std::vector<Segment*> segs(I.arenas[arena]->segments.begin(), I.arenas[arena]->segments.end());
  std::sort(segs.begin(), segs.end(), [](const Segment* a, const Segment* b) { return a->base < b->base; });
  for (Segment* s : segs) {
    for (std::uint32_t i = 0; i < s->count; ++i) {
      Chunk& c = I.chunks[s->first + i];
      if (c.moving || c.where == to) continue;
      PooledHandle h = I.pool(to).try_acquire();
      if (!h && to == Residence::device && I.reclaim_one(false)) h = I.pool(to).try_acquire();
      if (!h) {
        ++t.chunks_left;
        continue;
      }
      c.moving = true;
      t.moves.push_back(ChunkMove{I.slot_va(s->first + i), options_.chunk_bytes, c.handle, h, s->allocated > 0});
    }
  }
  I.update_peaks();
  return t;
}

void GpuAllocator::finish_migration(const MigrationTicket& t) noexcept {
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  for (const ChunkMove& mv : t.moves) {
    Chunk& c = I.chunks[(mv.va - base_) / options_.chunk_bytes];
    I.st.segment_bytes[static_cast<int>(c.where)] -= options_.chunk_bytes;
    I.pool(mv.from.phys.where).put(mv.from);
    c.handle = mv.to;
    c.where = t.to;
    c.moving = false;
    I.st.segment_bytes[static_cast<int>(c.where)] += options_.chunk_bytes;
  }
  for (const ChunkMove& mv : t.moves) I.release_if_emptied(mv.va);
}

void GpuAllocator::abort_migration(const MigrationTicket& t) noexcept {
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  for (const ChunkMove& mv : t.moves) {
    I.chunks[(mv.va - base_) / options_.chunk_bytes].moving = false;
    I.pool(mv.to.phys.where).put(mv.to);
  }
  for (const ChunkMove& mv : t.moves) I.release_if_emptied(mv.va);
}

}  // namespace tierpack::gpu

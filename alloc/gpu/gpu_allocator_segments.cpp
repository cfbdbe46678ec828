// The GPU allocator's segment layer (Note [GPU allocator layout] in gpu_allocator.hpp): a segment is
// one chunk, or a run of chunks, of one arena and one stream. New segments (or an empty one moved to
// another arena or stream), the list of empty segments and the events that say when their stream
// passed their last use, reclaiming empty device segments, and releasing emptied segments that live
// on the host (Notes [Spill segments] in gpu_allocator_blocks.cpp, [Split segments] below).
#include "alloc/gpu/detail/gpu_allocator_impl.hpp"

#include "core/error.hpp"

namespace tierpack::gpu {
using namespace detail;

// ---- empty-segment list
// Records on the segment's stream the point after which nothing enqueued uses it. Runs on free
// paths, so it never throws: without an event the segment is treated as "wait for the stream".
void GpuAllocator::Impl::record_empty(Segment* s) noexcept {
  try {
    if (s->empty_event == 0) s->empty_event = take_event();
    be().record(s->empty_event, s->stream);
    s->empty_known = true;
  } catch (...) {
    s->empty_known = false;
  }
}
// Has the stream passed the segment's last use? The event is recorded lazily, on the first ask
// after the segment became empty (an event per free would cost ~1-2 us on the hot path); recorded
// then, it also waits for work enqueued after the free, which is merely conservative.
bool GpuAllocator::Impl::empty_passed(Segment* s) {
  if (!s->empty_known) record_empty(s);
  return s->empty_known && be().query(s->empty_event);
}
void GpuAllocator::Impl::wait_empty(Segment* s) {
  if (!s->empty_known) record_empty(s);
  if (s->empty_known) be().synchronize(s->empty_event);
  else be().synchronize_stream(s->stream);
}

void GpuAllocator::Impl::mark_empty(Segment* s) {
  if (s->in_empty) return;
  s->empty_known = false;
  s->in_empty = true;
  s->empty_it = empty.insert(empty.end(), s);
}
void GpuAllocator::Impl::unmark_empty(Segment* s) {
  if (!s->in_empty) return;
  empty.erase(s->empty_it);
  s->in_empty = false;
}

bool GpuAllocator::Impl::segment_on_device_idle(const Segment* s) const {
  for (std::uint32_t i = 0; i < s->count; ++i) {
    const Chunk& c = chunks[s->first + i];
    if (c.moving || c.where != Residence::device) return false;
  }
  return true;
}

void GpuAllocator::Impl::queue_host_release(Segment* s) {
  // Recorded on every call: a queued segment may have been reused and emptied again since, and
  // its release must wait for that use too.
  record_empty(s);
  if (s->in_release) return;
  s->in_release = true;
  host_release.push_back(s);
}

// Note [Split segments]: a segment some of whose chunks are on the host and none moving: evicted
// whole, or left split by a move that ran out of handles or was given up (a prefetch parked for
// memory no eviction would free). Empty, it is released (no bytes to keep): cached, it would keep
// its group's arena from opening (arena_open wants every chunk on the device), and the group's next
// tensors would all land in the default arena, never to move: on GPT-2 large at 45% on the twin one
// given-up prefetch led that way to hundreds of spilled chunks (bench/gpu/gpu_trace_twin).
bool GpuAllocator::Impl::segment_holds_host_idle(const Segment* s) const {
  bool host = false;
  for (std::uint32_t i = 0; i < s->count; ++i) {
    const Chunk& c = chunks[s->first + i];
    if (c.moving) return false;
    host |= c.where == Residence::host;
  }
  return host;
}
// After a move: a segment it left empty and (partly) on the host goes (Note [Split segments]).
void GpuAllocator::Impl::release_if_emptied(std::uintptr_t va) {
  Segment* s = chunks[(va - self.base_) / chunk()].seg;
  if (s && s->allocated == 0 && !s->spill && segment_holds_host_idle(s)) {
    unmark_empty(s);
    queue_host_release(s);
  }
}

void GpuAllocator::Impl::process_events() {
  for (std::size_t i = 0; i < host_release.size();) {
    Segment* s = host_release[i];
    bool chunk_moving = false;
    for (std::uint32_t k = 0; k < s->count; ++k) chunk_moving |= chunks[s->first + k].moving;
    if (chunk_moving) {
      ++i;
      continue;
    }
    // A segment may have been reused, or brought to the device, since it was queued.
    const bool keep = s->allocated != 0 || (!s->spill && !segment_holds_host_idle(s));
    if (!keep && !empty_passed(s)) {
      ++i;
      continue;
    }
    host_release[i] = host_release.back();
    host_release.pop_back();
    s->in_release = false;
    if (keep) {
      if (s->allocated == 0) mark_empty(s);
    } else {
      release_segment(s);
    }
  }
  if (pending.empty()) return;
  for (auto it = pending.begin(); it != pending.end();) {
    bool done = true;
    for (EventHandle e : it->events)
      if (!be().query(e)) done = false;
    if (!done) {
      ++it;
      continue;
    }
    for (EventHandle e : it->events) events.push_back(e);
    free_block(it->block);
    it = pending.erase(it);
  }
}

// ---- segments
void GpuAllocator::Impl::release_segment(Segment* s) {  // empty, idle: unmap and give the handles back
  unmark_empty(s);
  drop_blocks(s);
  for (std::uint32_t i = 0; i < s->count; ++i) {
    Chunk& c = chunks[s->first + i];
    try {
      be().unmap(slot_va(s->first + i), chunk());
    } catch (...) {
      // An unmap failure is a driver error we cannot repair; keep the handle out of the pool.
      c = Chunk{};
      continue;
    }
    st.segment_bytes[static_cast<int>(c.where)] -= chunk();
    pool(c.where).put(c.handle);
    c = Chunk{};
  }
  free_run(s->first, s->count);
  s->arena->segments.erase(s);
  if (s->empty_event) events.push_back(s->empty_event);
  delete s;
  ++st.segments_reclaimed;
}

// Unmaps one empty device segment (any arena). Without `allow_wait` only segments whose stream has
// passed the point where they became empty qualify; with it, the host waits for that point.
bool GpuAllocator::Impl::reclaim_one(bool allow_wait) {
  for (Segment* s : empty) {
    if (!segment_on_device_idle(s)) continue;
    if (!allow_wait && !empty_passed(s)) continue;
    if (allow_wait) wait_empty(s);
    release_segment(s);
    return true;
  }
  return false;
}

// Moves an empty single-chunk device segment to arena `a` and stream `stream` (no driver call;
// an event wait orders the new stream after the old one).
Segment* GpuAllocator::Impl::transfer_empty(Arena* a, StreamHandle stream) {
  Segment* pick = nullptr;
  for (Segment* s : empty) {
    if (s->count != 1 || !segment_on_device_idle(s)) continue;
    if (s->arena == a && s->stream == stream) continue;  // find_in(a->free) would have used it
    pick = s;
    if (s->stream == stream || empty_passed(s)) break;
  }
  if (!pick) return nullptr;
  drop_blocks(pick);
  pick->arena->segments.erase(pick);
  if (pick->stream != stream) {
    if (!empty_passed(pick)) {
      if (pick->empty_known) be().wait(stream, pick->empty_event);
      else be().synchronize_stream(pick->stream);
    }
    ++st.cross_stream_reuses;
  }
  pick->arena = a;
  pick->stream = stream;
  pick->paged = a->paged;
  a->segments.insert(pick);
  build_blocks(pick);
  return pick;
}

void GpuAllocator::Impl::throw_oom(std::size_t requested, const std::string& why) {
  ++st.out_of_memory;
  const std::uint64_t held = pool(Residence::device).owned_bytes();
  const std::uint64_t budget = self.device_budget_locked();
  throw out_of_memory(requested, self.options_.tier_name, budget > held ? budget - held : 0,
                      describe_locked() + "; " + why);
}

Segment* GpuAllocator::Impl::new_segment(std::unique_lock<std::mutex>& lk, Arena* a, StreamHandle stream,
                                         std::size_t size) {
  std::size_t want = size;
  if (!a->paged && a->segment_hint > 0) {
    std::size_t have = 0;
    for (const Segment* s : a->segments) have += s->bytes;
    if (a->segment_hint > have) want = std::max(want, a->segment_hint - have);
  }
  const std::uint32_t n = a->paged ? 1u : static_cast<std::uint32_t>(round_up(want, chunk()) / chunk());
  if (n == 1)
    if (Segment* s = transfer_empty(a, stream)) return s;
  std::vector<Acquired> got;
  got.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    Acquired h{acquire_device(lk), Residence::device};
    if (!h.h && !a->paged)
      // Note [Spill segments]: the request would spill; room left in a spill segment serves it first.
      if (Block* room = find_in(a->spill_free, stream, size)) {
        for (Acquired& g : got) pool(g.where).put(g.h);
        return room->seg;
      }
    if (!h.h && self.options_.spill_to_host && (h.h = pool(Residence::host).try_acquire())) {
      h.where = Residence::host;
      ++st.spilled_chunks;
    }
    if (!h.h) {
      for (Acquired& g : got) pool(g.where).put(g.h);
      std::string why = "device pool: " + pool(Residence::device).last_failure();
      if (self.options_.spill_to_host) why += "; host pool: " + pool(Residence::host).last_failure();
      else why += "; spilling to host is off";
      throw_oom(size, why);
    }
    got.push_back(h);
  }
  auto first = alloc_run(n);
  if (!first) {
    for (Acquired& g : got) pool(g.where).put(g.h);
    throw_oom(size, "virtual address reservation exhausted");
  }
  std::uint32_t mapped = 0;
  try {
    for (; mapped < n; ++mapped) be().map(slot_va(*first + mapped), got[mapped].h.phys);
  } catch (...) {
    for (std::uint32_t i = 0; i < mapped; ++i) {
      try {
        be().unmap(slot_va(*first + i), chunk());
      } catch (...) {
      }
    }
    for (Acquired& g : got) pool(g.where).put(g.h);
    free_run(*first, n);
    throw;
  }
  auto* s = new Segment;
  s->base = slot_va(*first);
  s->bytes = std::size_t{n} * chunk();
  s->first = *first;
  s->count = n;
  s->arena = a;
  s->stream = stream;
  s->paged = a->paged;
  for (const Acquired& g : got) s->spill |= !a->paged && g.where == Residence::host;
  for (std::uint32_t i = 0; i < n; ++i) {
    Chunk& c = chunks[*first + i];
    c.handle = got[i].h;
    c.where = got[i].where;
    c.moving = false;
    c.seg = s;
    st.segment_bytes[static_cast<int>(c.where)] += chunk();
  }
  a->segments.insert(s);
  build_blocks(s);
  ++st.segments_created;
  return s;
}

std::uint64_t GpuAllocator::reclaim_device(std::uint64_t bytes, bool wait) {
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  I.process_events();
  const std::uint64_t before = I.pool(Residence::device).idle() * options_.chunk_bytes;
  std::uint64_t got = 0;
  while (got < bytes && (I.reclaim_one(false) || (wait && I.reclaim_one(true))))
    got = I.pool(Residence::device).idle() * options_.chunk_bytes - std::min(before, I.pool(Residence::device).idle() * options_.chunk_bytes);
  return got;
}

void GpuAllocator::empty_cache() {
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  I.process_events();
  while (I.reclaim_one(true)) {
  }
  I.pool(Residence::device).trim(0);
}

}  // namespace tierpack::gpu

// Stream-ordered caching allocator on always-mapped chunks (see Note [GPU allocator layout] in
// gpu_allocator.hpp).
#include "alloc/gpu/gpu_allocator.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "core/error.hpp"
#include "core/units.hpp"

namespace tierpack::gpu {
namespace {

constexpr std::size_t kMinBlock = 512;

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
  bool spill = false;           // made over budget with host chunks: Note [Spill segments]
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

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

}  // namespace

std::uint64_t MigrationTicket::copy_bytes() const {
  std::uint64_t n = 0;
  for (const ChunkMove& m : moves)
    if (m.copy) n += m.bytes;
  return n;
}

struct GpuAllocator::Impl {
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
  // Note [Closed arenas]: arenas closed by set_arena_closed (an eviction was scheduled: no new
  // blocks), under their own lock, never held while waiting. The mover sets them with its own lock
  // held, while the training thread may hold `m` and wait for a stream the mover has gated: with
  // `m`, the two would wait for each other.
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

  // ---- virtual address runs
  std::optional<std::uint32_t> alloc_run(std::uint32_t n) {
    for (auto it = free_runs.begin(); it != free_runs.end(); ++it) {
      if (it->second < n) continue;
      const std::uint32_t first = it->first, len = it->second;
      free_runs.erase(it);
      if (len > n) free_runs[first + n] = len - n;
      return first;
    }
    return std::nullopt;
  }
  void free_run(std::uint32_t first, std::uint32_t n) {
    auto next = free_runs.lower_bound(first);
    if (next != free_runs.end() && next->first == first + n) {
      n += next->second;
      next = free_runs.erase(next);
    }
    if (next != free_runs.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == first) {
        prev->second += n;
        return;
      }
    }
    free_runs[first] = n;
  }

  // ---- empty-segment list
  // Records on the segment's stream the point after which nothing enqueued uses it. Runs on free
  // paths, so it never throws: without an event the segment is treated as "wait for the stream".
  void record_empty(Segment* s) noexcept {
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
  bool empty_passed(Segment* s) {
    if (!s->empty_known) record_empty(s);
    return s->empty_known && be().query(s->empty_event);
  }
  void wait_empty(Segment* s) {
    if (!s->empty_known) record_empty(s);
    if (s->empty_known) be().synchronize(s->empty_event);
    else be().synchronize_stream(s->stream);
  }

  void mark_empty(Segment* s) {
    if (s->in_empty) return;
    s->empty_known = false;
    s->in_empty = true;
    s->empty_it = empty.insert(empty.end(), s);
  }
  void unmark_empty(Segment* s) {
    if (!s->in_empty) return;
    empty.erase(s->empty_it);
    s->in_empty = false;
  }

  bool segment_on_device_idle(const Segment* s) const {
    for (std::uint32_t i = 0; i < s->count; ++i) {
      const Chunk& c = chunks[s->first + i];
      if (c.moving || c.where != Residence::device) return false;
    }
    return true;
  }

  // ---- blocks
  // Note [Spill segments]: a segment made with host chunks because the budget was full keeps its free
  // blocks apart, for requests that would otherwise spill a chunk of their own: a request that can get
  // device memory never lands in one, and once empty the segment is released, so later tensors get
  // device memory again instead of settling in host memory for good. Without the sharing every spilled
  // request took whole chunks for itself: with 256 MiB chunks, GPT-2 large at 45% of its peak filled the
  // 64 GiB host limit (256 handles) with 21 GiB of tensors in its first iteration and ran out of memory
  // (bench/results/gpu-h200-2026-11-30-5, section 3; bench/gpu/gpu_trace_twin reproduces it).
  static std::set<Block*, FreeOrder>& free_set(const Segment* s) {
    return s->spill ? s->arena->spill_free : s->arena->free;
  }

  void build_blocks(Segment* s) {
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
  void drop_blocks(Segment* s) {  // all blocks are free
    for (Block* b = s->head; b;) {
      Block* n = b->next;
      free_set(s).erase(b);
      delete b;
      b = n;
    }
    s->head = nullptr;
  }

  bool can_merge(const Block* first, const Block* second) const {
    return !first->seg->paged || second->addr % self.options_.page_bytes != 0;
  }

  void free_block(Block* b) {
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

  void queue_host_release(Segment* s) {
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
  bool segment_holds_host_idle(const Segment* s) const {
    bool host = false;
    for (std::uint32_t i = 0; i < s->count; ++i) {
      const Chunk& c = chunks[s->first + i];
      if (c.moving) return false;
      host |= c.where == Residence::host;
    }
    return host;
  }
  // After a move: a segment it left empty and (partly) on the host goes (Note [Split segments]).
  void release_if_emptied(std::uintptr_t va) {
    Segment* s = chunks[(va - self.base_) / chunk()].seg;
    if (s && s->allocated == 0 && !s->spill && segment_holds_host_idle(s)) {
      unmark_empty(s);
      queue_host_release(s);
    }
  }

  void process_events() {
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

  // The smallest free block of `set` on `stream` that holds `size`.
  static Block* find_in(const std::set<Block*, FreeOrder>& set, StreamHandle stream, std::size_t size) {
    Block probe;
    probe.stream = stream;
    probe.size = size;
    auto it = set.lower_bound(&probe);
    if (it == set.end() || (*it)->stream != stream) return nullptr;
    return *it;
  }

  // ---- segments
  void release_segment(Segment* s) {  // empty, idle: unmap and give the handles back
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
  bool reclaim_one(bool allow_wait) {
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
  Segment* transfer_empty(Arena* a, StreamHandle stream) {
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

  struct Acquired {
    PooledHandle h;
    Residence where = Residence::device;
  };

  // A device handle for a new chunk: from the pool, else by reclaiming empty segments, else by
  // waiting for evictions. Empty result: the chunk would have to spill.
  PooledHandle acquire_device(std::unique_lock<std::mutex>& lk) {
    for (int attempt = 0; attempt < 1000; ++attempt) {
      if (PooledHandle h = pool(Residence::device).try_acquire()) return h;
      if (reclaim_one(false) || reclaim_one(true)) continue;
      if (!pressure) break;
      ++st.pressure_waits;
      lk.unlock();
      bool more = false;
      const auto t0 = std::chrono::steady_clock::now();
      try {
        more = pressure();
      } catch (...) {
        more = false;
      }
      const double waited = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
      lk.lock();
      st.pressure_wait_ns += waited;
      if (!more) return pool(Residence::device).try_acquire();
    }
    return {};
  }

  [[noreturn]] void throw_oom(std::size_t requested, const std::string& why) {
    ++st.out_of_memory;
    const std::uint64_t held = pool(Residence::device).owned_bytes();
    const std::uint64_t budget = self.device_budget_locked();
    throw out_of_memory(requested, self.options_.tier_name, budget > held ? budget - held : 0,
                        describe_locked() + "; " + why);
  }

  Segment* new_segment(std::unique_lock<std::mutex>& lk, Arena* a, StreamHandle stream, std::size_t size) {
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

  bool arena_open(const Arena* a) {
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

  Segment* segment_of(std::uintptr_t p) const {
    if (p < self.base_ || p >= self.base_ + self.va_bytes_) return nullptr;
    return chunks[(p - self.base_) / chunk()].seg;
  }

  void update_peaks() {
    st.peak_allocated = std::max(st.peak_allocated, st.allocated);
    const std::uint64_t dev = pool(Residence::device).owned_bytes();
    st.peak_device_handles = std::max(st.peak_device_handles, dev);
  }

  std::string describe_locked() const {
    const auto& o = self.options_;
    const std::uint64_t dev_held = pools[0]->owned_bytes();
    std::string s = "budget " + format_bytes(self.device_budget_locked()) + ", resident on " + o.tier_name + " " +
                    format_bytes(dev_held) + " (" + format_bytes(st.segment_bytes[0]) + " in segments, " +
                    format_bytes(st.allocated) + " allocated), on host " + format_bytes(st.segment_bytes[1]) +
                    " in segments (host limit " + format_bytes(o.host_limit) + ", spill " +
                    (o.spill_to_host ? "on" : "off") + ")";
    return s;
  }
};

GpuAllocator::GpuAllocator(VmmBackend& backend, GpuAllocatorOptions options)
    : backend_(backend), options_(std::move(options)), impl_(std::make_unique<Impl>(*this)) {
  const std::size_t g = backend_.info().granularity;
  TIERPACK_EXPECTS(options_.chunk_bytes >= g && options_.chunk_bytes % g == 0,
                   "chunk size must be a multiple of the mapping granularity (" + format_bytes(g) + ")");
  TIERPACK_EXPECTS(options_.page_bytes > 0 && options_.chunk_bytes % options_.page_bytes == 0,
                   "chunk size must be a multiple of the page size");
  TIERPACK_EXPECTS(options_.small_threshold <= options_.page_bytes, "small allocations must fit in a page");
  const std::uint64_t device_bytes = std::max<std::uint64_t>(backend_.info().device_bytes, options_.chunk_bytes);
  if (options_.device_budget == 0 || options_.device_budget > device_bytes) options_.device_budget = device_bytes;
  const std::size_t c = options_.chunk_bytes;
  const std::size_t dev_cap = device_bytes / c;
  const std::size_t host_cap = std::max<std::uint64_t>(options_.host_limit / c, 1);
  impl_->pools[0] = std::make_unique<HandlePool>(backend_, Residence::device, c, dev_cap, options_.device_budget / c);
  impl_->pools[1] = std::make_unique<HandlePool>(backend_, Residence::host, c, host_cap, host_cap);
  const std::size_t slots = 2 * (dev_cap + host_cap) + 16;
  va_bytes_ = slots * c;
  base_ = backend_.reserve(va_bytes_);
  impl_->chunks.resize(slots);
  impl_->free_runs[0] = static_cast<std::uint32_t>(slots);
  for (ArenaId id : {kDefaultArena, kSmallArena}) {
    auto a = std::make_unique<Arena>();
    a->id = id;
    a->name = id == kDefaultArena ? "default" : "small";
    a->paged = id == kSmallArena;
    impl_->arenas.push_back(std::move(a));
  }
  impl_->arena_count = impl_->arenas.size();
  impl_->st.device_budget = options_.device_budget;
}

GpuAllocator::~GpuAllocator() {
  std::unique_lock lk(impl_->m);
  for (Pending& p : impl_->pending)
    for (EventHandle e : p.events) impl_->events.push_back(e);
  impl_->pending.clear();
  for (auto& a : impl_->arenas) {
    std::vector<Segment*> segs(a->segments.begin(), a->segments.end());
    for (Segment* s : segs) {
      for (Block* b = s->head; b; b = b->next) b->allocated = false;
      s->allocated = 0;
      impl_->release_segment(s);
    }
  }
  for (EventHandle e : impl_->events) backend_.destroy_event(e);
  impl_->pools[0].reset();
  impl_->pools[1].reset();
  backend_.unreserve(base_, va_bytes_);
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

std::vector<StreamHandle> GpuAllocator::streams() const {
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  return I.seen_streams;
}

void GpuAllocator::add_stream(StreamHandle s) {
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  I.saw_stream(s);
}

std::size_t GpuAllocator::block_size(const void* p) const {
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  auto it = I.live.find(reinterpret_cast<std::uintptr_t>(p));
  return it == I.live.end() ? 0 : it->second->size;
}

ArenaId GpuAllocator::arena_of(const void* p) const {
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  const Segment* s = I.segment_of(reinterpret_cast<std::uintptr_t>(p));
  return s ? s->arena->id : kDefaultArena;
}

std::optional<Residence> GpuAllocator::residence_of(const void* p) const {
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (a < base_ || a >= base_ + va_bytes_) return std::nullopt;
  const Segment* s = I.segment_of(a);
  if (!s) return std::nullopt;
  return I.chunks[(a - base_) / options_.chunk_bytes].where;
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

std::size_t GpuAllocator::arena_count() const {
  std::lock_guard lk(impl_->m);
  return impl_->arenas.size();
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

void GpuAllocator::set_arena_closed(ArenaId arena, bool closed) {
  auto& I = *impl_;
  TIERPACK_EXPECTS(arena < I.arena_count.load(), "unknown arena");
  if (arena == kDefaultArena || arena == kSmallArena) return;
  std::lock_guard lk(I.closed_m);  // Note [Closed arenas]: not `m`
  if (closed) I.closed.insert(arena);
  else I.closed.erase(arena);
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

void GpuAllocator::set_pressure_handler(std::function<bool()> handler) {
  std::lock_guard lk(impl_->m);
  impl_->pressure = std::move(handler);
}

void GpuAllocator::set_device_budget(std::uint64_t bytes) {
  std::lock_guard lk(impl_->m);
  const std::uint64_t cap = impl_->pool(Residence::device).capacity() * options_.chunk_bytes;
  options_.device_budget = std::clamp<std::uint64_t>(bytes, options_.chunk_bytes, cap);
  impl_->pool(Residence::device).set_limit(options_.device_budget / options_.chunk_bytes);
  impl_->st.device_budget = options_.device_budget;
}

std::uint64_t GpuAllocator::device_budget() const {
  std::lock_guard lk(impl_->m);
  return options_.device_budget;
}

std::uint64_t GpuAllocator::device_budget_locked() const { return options_.device_budget; }

void GpuAllocator::empty_cache() {
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  I.process_events();
  while (I.reclaim_one(true)) {
  }
  I.pool(Residence::device).trim(0);
}

std::size_t GpuAllocator::prewarm_host(std::uint64_t bytes) {
  return impl_->pool(Residence::host).prewarm(bytes / options_.chunk_bytes);
}

AllocatorStats GpuAllocator::stats() const {
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  AllocatorStats s = I.st;
  s.device_handles = I.pools[0]->owned_bytes();
  s.host_handles = I.pools[1]->owned_bytes();
  return s;
}

std::uint64_t GpuAllocator::device_bytes() const { return impl_->pools[0]->owned_bytes(); }

std::uint64_t GpuAllocator::segment_bytes(Residence where) const {
  std::lock_guard lk(impl_->m);
  return impl_->st.segment_bytes[static_cast<int>(where)];
}

void GpuAllocator::reset_peaks() {
  auto& I = *impl_;
  std::lock_guard lk(I.m);
  I.st.peak_allocated = I.st.allocated;
  I.st.peak_device_handles = I.pools[0]->owned_bytes();
}

std::string GpuAllocator::describe() const {
  std::lock_guard lk(impl_->m);
  return impl_->describe_locked();
}

}  // namespace tierpack::gpu

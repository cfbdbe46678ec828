// Stream-ordered caching allocator on always-mapped chunks (see Note [GPU allocator layout] in
// gpu_allocator.hpp): construction and teardown of the reservation, pools and default arenas; the
// streams seen; the budget and the pressure handler; statistics. The layers live in
// gpu_allocator_{chunks,segments,blocks,arenas}.cpp (detail/gpu_allocator_impl.hpp lists them).
#include "alloc/gpu/gpu_allocator.hpp"

#include "alloc/gpu/detail/gpu_allocator_impl.hpp"
#include "core/error.hpp"
#include "core/units.hpp"

namespace tierpack::gpu {
using namespace detail;

std::string GpuAllocator::Impl::describe_locked() const {
  const auto& o = self.options_;
  const std::uint64_t dev_held = pools[0]->owned_bytes();
  std::string s = "budget " + format_bytes(self.device_budget_locked()) + ", resident on " + o.tier_name + " " +
                  format_bytes(dev_held) + " (" + format_bytes(st.segment_bytes[0]) + " in segments, " +
                  format_bytes(st.allocated) + " allocated), on host " + format_bytes(st.segment_bytes[1]) +
                  " in segments (host limit " + format_bytes(o.host_limit) + ", spill " +
                  (o.spill_to_host ? "on" : "off") + ")";
  return s;
}

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

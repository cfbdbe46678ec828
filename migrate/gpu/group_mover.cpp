// Page-group migration between device and host memory (see Note [Migration protocol] in
// group_mover.hpp): the mover's threads and streams, and what the training thread calls: requests
// (evict, prefetch), the waits (ensure_resident, drain, the allocator's pressure handler) and the
// counters. The workers live in group_mover_worker.cpp, the gates and remaps in group_mover_remap.cpp.
#include "migrate/gpu/group_mover.hpp"

#include <unordered_set>

namespace tierpack::gpu {
namespace {
double since_ns(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

MoverCounters& MoverCounters::operator+=(const MoverCounters& o) {
  bytes_to_host += o.bytes_to_host;
  bytes_to_device += o.bytes_to_device;
  evictions += o.evictions;
  prefetches += o.prefetches;
  chunks_remapped += o.chunks_remapped;
  stalls += o.stalls;
  stall_ns += o.stall_ns;
  misses += o.misses;
  failures += o.failures;
  remap_ns += o.remap_ns;
  gates += o.gates;
  gate_wait_ns += o.gate_wait_ns;
  gate_hold_ns += o.gate_hold_ns;
  gate_timeouts += o.gate_timeouts;
  busy_gates += o.busy_gates;
  verified_chunks += o.verified_chunks;
  rewrites += o.rewrites;
  verify_ns += o.verify_ns;
  return *this;
}

GroupMover::GroupMover(GpuAllocator& allocator, MoverOptions options)
    : alloc_(allocator), backend_(allocator.backend()), options_(options) {
  for (int d = 0; d < kResidenceCount; ++d) {
    copy_stream_[d] = backend_.create_stream();
    if (options_.verify != Verify::off) {
      verify_stream_[d] = backend_.create_stream();
      verify_event_[d] = backend_.create_event();
    }
  }
  for (int d = 0; d < kResidenceCount; ++d) workers_[d] = std::thread([this, d] { run(static_cast<Residence>(d)); });
}

GroupMover::~GroupMover() {
  drain();
  {
    std::lock_guard lk(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& w : workers_) w.join();
  for (EventHandle e : events_) backend_.destroy_event(e);
  for (int d = 0; d < kResidenceCount; ++d) {
    backend_.destroy_stream(copy_stream_[d]);
    if (verify_stream_[d]) backend_.destroy_stream(verify_stream_[d]);
    if (verify_event_[d]) backend_.destroy_event(verify_event_[d]);
  }
}

void GroupMover::verify_always(ArenaId arena) {
  std::lock_guard lk(mutex_);
  verify_always_.insert(arena);
}

std::uint64_t GroupMover::evict(ArenaId arena, StreamHandle after) {
  return queue_job(arena, Residence::host, after);
}

std::uint64_t GroupMover::prefetch(ArenaId arena, StreamHandle after) {
  return queue_job(arena, Residence::device, after);
}

std::uint64_t GroupMover::queue_job(ArenaId arena, Residence to, StreamHandle after) {
  Job job;
  job.arena = arena;
  job.to = to;
  job.after = take_event();
  backend_.record(job.after, after);
  std::uint64_t n = 0;
  {
    std::lock_guard lk(mutex_);
    if (to == Residence::host) {
      // From now on no new tensor lands in it; set with the count, so that a job of the arena finishing
      // now cannot reopen it (finish() reopens it once nothing is outstanding).
      alloc_.set_arena_closed(arena, true);
      ++eviction_jobs_;
    } else {
      ++prefetch_jobs_;
    }
    ++outstanding_[arena];
    n = ++requests_made_[arena];
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
  return n;
}

bool GroupMover::request_done(ArenaId arena, std::uint64_t n) const {
  std::lock_guard lk(mutex_);
  auto it = requests_done_.find(arena);
  return it != requests_done_.end() && it->second >= n;
}

void GroupMover::bind_groups(const std::unordered_map<GroupId, ArenaId>& arenas) {
  arenas_.insert(arenas.begin(), arenas.end());
}

std::uint64_t GroupMover::submit(const Move& m, MoveOrder order) {
  const ArenaId arena = arenas_.at(m.group);
  return m.kind == MoveKind::evict ? evict(arena, order) : prefetch(arena, order);
}

bool GroupMover::done(GroupId group, std::uint64_t request) const { return request_done(arenas_.at(group), request); }

Landing GroupMover::land(const Move& m) {
  Landing l;
  l.landed = ensure_resident(arenas_.at(m.group), &l.waited);
  return l;
}

bool GroupMover::busy_locked(ArenaId arena) const {
  auto it = outstanding_.find(arena);
  return it != outstanding_.end() && it->second > 0;
}

bool GroupMover::idle(ArenaId arena) const {
  std::lock_guard lk(mutex_);
  return !busy_locked(arena);
}

// Note [Parked evictions]: an eviction that finds no host memory (the host limit is reached, or a
// handle cannot be created) is parked and retried when an eviction finishes or a prefetch gives host
// memory back. Threads that wait for evictions to free device memory (wait_for_eviction, the
// allocator's pressure handler; ensure_resident; drain) count only evictions that can make progress,
// so they never wait for a parked one, nor for one queued behind a parked eviction of its arena (jobs
// of one arena run in order): with nothing else moving, neither would ever finish, and the training
// thread would hang in an allocation instead of spilling or raising out_of_memory. Parking notifies
// the waiters, and wait_for_eviction also rechecks now and then.
std::uint64_t GroupMover::evictions_pending_locked() const {
  // Queued, being issued, running or completing; not parked or queued behind a parked one.
  std::uint64_t stuck = 0;
  std::unordered_set<ArenaId> behind;
  for (const Job& j : queue_) {
    if (j.to != Residence::host) continue;
    if (j.parked || j.cancelled || behind.count(j.arena)) ++stuck;
    if (j.parked && !j.cancelled) behind.insert(j.arena);
  }
  return eviction_jobs_ - stuck;
}

// Prefetch jobs that can make progress (and give host memory back): not parked or given up.
std::uint64_t GroupMover::prefetches_pending_locked() const {
  std::uint64_t stuck = 0;
  for (const Job& j : queue_) stuck += j.to == Residence::device && (j.parked || j.cancelled);
  return prefetch_jobs_ - stuck;
}

bool GroupMover::any_outstanding_locked() const {
  for (const auto& [arena, n] : outstanding_)
    if (n > 0) return true;
  return false;
}

bool GroupMover::ensure_resident(ArenaId arena, bool* waited_out) {
  const auto t0 = std::chrono::steady_clock::now();
  bool waited = false;
  {
    std::unique_lock lk(mutex_);
    if (busy_locked(arena)) ++ensure_waiting_[arena];  // Note [When to remap]: its remaps are due now
    while (busy_locked(arena)) {
      if (evictions_pending_locked() == 0) {
        // A prefetch parked for memory that no eviction will free (it has retried since the last
        // eviction finished): free cached device memory for it (this thread is stalled anyway), and
        // when there is none, give it up: a miss, not a fault.
        Job* stuck = nullptr;
        for (Job& j : queue_)
          if (j.arena == arena && j.parked && !j.cancelled && j.evictions_seen == evictions_done_) stuck = &j;
        if (stuck) {
          lk.unlock();
          const std::uint64_t freed = alloc_.reclaim_device(alloc_.options().chunk_bytes * 64, true);
          lk.lock();
          for (Job& j : queue_)
            if (j.arena == arena && j.parked) {
              if (freed > 0) j.evictions_seen = ~std::uint64_t{0};  // retry now
              else j.cancelled = true;
            }
        }
        cv_.notify_all();
      }
      waited = true;
      cv_.wait_for(lk, options_.poll * 10);
    }
    if (waited && --ensure_waiting_[arena] == 0) ensure_waiting_.erase(arena);
    if (waited) {
      ++counters_.stalls;
      counters_.stall_ns += since_ns(t0);
    }
  }
  if (waited_out) *waited_out = waited;
  const ArenaResidency r = alloc_.residency(arena);
  const bool resident = r.host_bytes == 0 && r.moving_bytes == 0;
  if (!resident) {
    std::lock_guard lk(mutex_);
    ++counters_.misses;
  }
  return resident;
}

void GroupMover::drain() {
  std::unique_lock lk(mutex_);
  ++drain_waiters_;  // Note [When to remap]: every remap is due now
  while (any_outstanding_locked()) {
    // A parked job nothing in flight can unpark is given up: a prefetch once no eviction can free
    // device memory, an eviction once no prefetch can give host memory back either.
    if (evictions_pending_locked() == 0) {
      const bool host_may_return = prefetches_pending_locked() > 0;
      for (Job& j : queue_)
        if (j.parked && j.evictions_seen == evictions_done_ && !(j.to == Residence::host && host_may_return))
          j.cancelled = true;
    }
    cv_.notify_all();
    cv_.wait_for(lk, options_.poll * 10);
  }
  --drain_waiters_;
}

bool GroupMover::wait_for_eviction() {
  std::unique_lock lk(mutex_);
  if (evictions_pending_locked() == 0) return false;
  const std::uint64_t seen = eviction_progress_, seen_done = evictions_done_;
  ++pressure_waiters_;  // Note [When to remap]: eviction remaps are due now
  // Rechecked now and then too, not only when notified (Note [Parked evictions]).
  while (!(eviction_progress_ != seen || evictions_done_ != seen_done || stop_ || evictions_pending_locked() == 0))
    cv_.wait_for(lk, options_.poll * 10);
  --pressure_waiters_;
  return eviction_progress_ != seen || evictions_done_ != seen_done;
}

MoverCounters GroupMover::counters() const {
  std::lock_guard lk(mutex_);
  return counters_;
}

MoverCounters GroupMover::take_counters() {
  std::lock_guard lk(mutex_);
  MoverCounters c = counters_;
  counters_ = {};
  return c;
}

}  // namespace tierpack::gpu

// Page-group migration between device and host memory (see Note [Migration protocol] in
// group_mover.hpp).
#include "migrate/gpu/group_mover.hpp"

#include <algorithm>
#include <unordered_set>

#include "alloc/gpu/chunk_checksum.hpp"
#include "core/error.hpp"

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

std::int64_t GroupMover::verify_stride(Residence to, ArenaId arena) {
  switch (options_.verify) {
    case Verify::off: return -1;
    case Verify::all: return 0;
    case Verify::evictions:
    case Verify::sampled:
      if (to == Residence::host) return 0;
      break;
  }
  std::lock_guard lk(mutex_);
  if (verify_always_.count(arena)) return 0;
  return options_.verify == Verify::sampled ? static_cast<std::int64_t>(kPrefetchSampleStride) : -1;
}

void GroupMover::verify_always(ArenaId arena) {
  std::lock_guard lk(mutex_);
  verify_always_.insert(arena);
}

// Slots of 2 * kChecksumWords pinned words, made 64 at a time (host_words is a driver allocation:
// never called behind a closed gate, only when issuing).
std::uint64_t* GroupMover::take_sum_slots() {
  std::lock_guard lk(slots_mutex_);
  if (free_slots_.empty()) {
    constexpr std::size_t kBatch = 64;
    std::uint64_t* words = backend_.host_words(kBatch * 2 * kChecksumWords);
    for (std::size_t i = 0; i < kBatch; ++i) free_slots_.push_back(words + i * 2 * kChecksumWords);
  }
  std::uint64_t* p = free_slots_.back();
  free_slots_.pop_back();
  return p;
}

void GroupMover::give_sum_slots(std::uint64_t* p) {
  if (!p) return;
  std::lock_guard lk(slots_mutex_);
  free_slots_.push_back(p);
}

EventHandle GroupMover::take_event() {
  {
    std::lock_guard lk(mutex_);
    if (!events_.empty()) {
      EventHandle e = events_.back();
      events_.pop_back();
      return e;
    }
  }
  return backend_.create_event();
}

void GroupMover::give_event(EventHandle e) {
  if (e) events_.push_back(e);  // mutex_ held by the caller
}

std::uint64_t GroupMover::evict(ArenaId arena, StreamHandle after) {
  Job job;
  job.arena = arena;
  job.to = Residence::host;
  job.after = take_event();
  backend_.record(job.after, after);
  std::uint64_t n = 0;
  {
    std::lock_guard lk(mutex_);
    // From now on no new tensor lands in it; set with the count, so that a job of the arena finishing
    // now cannot reopen it (finish() reopens it once nothing is outstanding).
    alloc_.set_arena_closed(arena, true);
    ++outstanding_[arena];
    ++eviction_jobs_;
    n = ++requests_made_[arena];
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
  return n;
}

std::uint64_t GroupMover::prefetch(ArenaId arena, StreamHandle after) {
  Job job;
  job.arena = arena;
  job.to = Residence::device;
  job.after = take_event();
  backend_.record(job.after, after);
  std::uint64_t n = 0;
  {
    std::lock_guard lk(mutex_);
    ++outstanding_[arena];
    ++prefetch_jobs_;
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

// Acquires destination handles and issues the copies, one event per chunk so that each chunk can be
// remapped as soon as its own copy is done (remaps of early chunks overlap later chunks' copies).
// Called with the lock held; drops it around allocator and driver calls. Returns false when the
// job was parked for lack of memory.
bool GroupMover::try_issue(std::unique_lock<std::mutex>& lk, Job& job) {
  lk.unlock();
  const StreamHandle stream = copy_stream_[static_cast<int>(job.to)];
  MigrationTicket ticket;
  std::vector<EventHandle> chunk_events;
  std::vector<std::uint64_t*> sums;
  const std::int64_t stride = verify_stride(job.to, job.arena);
  const bool verify = stride >= 0;
  job.verify_stride = stride > 0 ? static_cast<std::size_t>(stride) : 0;
  bool ok = true;
  try {
    ticket = alloc_.begin_migration(job.arena, job.to);
    if (!ticket.moves.empty()) {
      if (job.after) backend_.wait(stream, job.after);
      for (const ChunkMove& m : ticket.moves) {
        // Note [Verified remaps]: the fingerprint is taken on the device side of the copy.
        std::uint64_t* sum = verify && m.copy ? take_sum_slots() : nullptr;
        sums.push_back(sum);
        if (sum && job.to == Residence::host) backend_.checksum_async(m.va, m.bytes, job.verify_stride, sum, stream);
        if (m.copy) copy_chunk(m.to.shadow, m.va, m.bytes, stream);
        if (sum && job.to == Residence::device)
          backend_.checksum_async(m.to.shadow, m.bytes, job.verify_stride, sum, stream);
        // Also for chunks without live data: the event orders their remap after `after`.
        chunk_events.push_back(take_event());
        backend_.record(chunk_events.back(), stream);
      }
    }
  } catch (...) {
    alloc_.abort_migration(ticket);
    ticket = {};
    ok = false;
  }
  lk.lock();
  if (!ok) {
    // The copy stream may still run what was enqueued: wait before the slots are reused.
    lk.unlock();
    try {
      backend_.synchronize_stream(stream);
    } catch (...) {
    }
    lk.lock();
    for (EventHandle e : chunk_events) give_event(e);
    for (std::uint64_t* p : sums) give_sum_slots(p);
    chunk_events.clear();
    sums.clear();
  }
  job.ticket = std::move(ticket);
  job.chunk_events = std::move(chunk_events);
  job.sums = std::move(sums);
  job.remapped = 0;
  if (!ok) {
    ++counters_.failures;
    job.ticket.chunks_left = 0;
  }
  const std::size_t left = job.ticket.chunks_left;
  if (job.ticket.moves.empty()) {
    if (left > 0) {
      job.parked = true;
      job.evictions_seen = evictions_done_;
      queue_.push_front(std::move(job));
      cv_.notify_all();  // Note [Parked evictions]: the evictions a pressure waiter counts changed
      return false;
    }
    finish(job);  // nothing (more) to move
    return true;
  }
  if (left > 0) {
    // Move the rest once memory frees up; the copy stream already waits for job.after.
    Job rest;
    rest.arena = job.arena;
    rest.to = job.to;
    rest.parked = true;
    rest.evictions_seen = evictions_done_;
    ++outstanding_[job.arena];
    ++(rest.to == Residence::host ? eviction_jobs_ : prefetch_jobs_);
    queue_.push_front(std::move(rest));
    job.continued = true;
    cv_.notify_all();  // Note [Parked evictions]
  }
  running_[static_cast<int>(job.to)].push_back(std::move(job));
  return true;
}

void GroupMover::copy_chunk(std::uintptr_t dst, std::uintptr_t src, std::size_t bytes, StreamHandle s) {
  const std::size_t piece = options_.copy_piece ? options_.copy_piece : bytes;
  for (std::size_t off = 0; off < bytes; off += piece) backend_.copy_async(dst + off, src + off, std::min(piece, bytes - off), s);
}

bool GroupMover::copying(const std::vector<Job>& running) {
  for (const Job& j : running) {
    if (j.remapped >= j.chunk_events.size()) continue;
    try {
      if (!backend_.query(j.chunk_events.back())) return true;  // one copy stream: the last event is the latest
    } catch (...) {
      // a failing driver: the remap attempts fail and are counted
    }
  }
  return false;
}

bool GroupMover::remap_due_locked(Residence dir, const std::vector<Job>& running) {
  if (options_.remap_when == RemapWhen::eager || stop_ || drain_waiters_ > 0) return true;
  const int d = static_cast<int>(dir);
  const auto now = std::chrono::steady_clock::now();
  if (!ready_seen_[d]) {
    ready_seen_[d] = true;
    ready_since_[d] = now;
  }
  if (!copying_[0].load() && !copying_[1].load()) return true;
  if (now - ready_since_[d] >= options_.remap_max_delay) return true;
  for (const Job& j : running)
    if (ensure_waiting_.count(j.arena)) return true;
  if (dir == Residence::host) {
    if (pressure_waiters_ > 0) return true;
    for (const Job& j : queue_)
      if (j.to == Residence::device && j.parked) return true;  // waits for the device memory evictions give back
  }
  return false;
}

// Gates every stream the allocator has seen (Note [Remap gate]). Lock not held.
GroupMover::GateResult GroupMover::close_gates(Residence dir) {
  GateState& g = gate_[static_cast<int>(dir)];
  if (!gate_owner_.try_lock()) return GateResult::busy;
  g.gates.clear();
  g.closed_at = std::chrono::steady_clock::now();
  g.closed = true;
  ++gates_closed_;
  if (!options_.gate) return GateResult::closed;
  try {
    for (StreamHandle s : alloc_.streams()) g.gates.push_back(backend_.close_gate(s));
  } catch (...) {
    open_gates(dir);
    return GateResult::failed;
  }
  return GateResult::closed;
}

bool GroupMover::gates_reached(Residence dir) {
  for (GateHandle h : gate_[static_cast<int>(dir)].gates)
    if (!backend_.gate_reached(h)) return false;
  return true;
}

void GroupMover::open_gates(Residence dir) noexcept {
  GateState& g = gate_[static_cast<int>(dir)];
  for (GateHandle h : g.gates) backend_.open_gate(h);
  g.gates.clear();
  if (g.closed) {
    --gates_closed_;
    gate_owner_.unlock();
  }
  g.closed = false;
}

// Note [Verified remaps]. Called behind the closed and reached gates, lock not held. No allocator
// call and no driver allocation here: only kernels, copies and a wait on the (ungated) verify stream.
std::vector<char> GroupMover::check_batch(Residence dir, std::vector<Job>& running,
                                          const std::vector<std::pair<std::size_t, std::size_t>>& items) {
  std::vector<char> result(items.size(), 0);
  const StreamHandle vs = verify_stream_[static_cast<int>(dir)];
  const EventHandle ve = verify_event_[static_cast<int>(dir)];
  bool any = false;
  for (const auto& [j, i] : items) any |= running[j].sums[i] != nullptr;
  if (!any || !vs) return result;
  try {
    for (const auto& [j, i] : items) {
      std::uint64_t* sum = running[j].sums[i];
      if (!sum) continue;
      const ChunkMove& m = running[j].ticket.moves[i];
      // The source as its address sees it now.
      backend_.checksum_async(m.va, m.bytes, running[j].verify_stride, sum + kChecksumWords, vs);
    }
    backend_.record(ve, vs);
    backend_.synchronize(ve);
    bool copied = false;
    for (std::size_t k = 0; k < items.size(); ++k) {
      const auto [j, i] = items[k];
      const std::uint64_t* sum = running[j].sums[i];
      if (!sum || checksum_total(sum) == checksum_total(sum + kChecksumWords)) continue;
      const ChunkMove& m = running[j].ticket.moves[i];
      backend_.copy_async(m.to.shadow, m.va, m.bytes, vs);  // written after the copy: copy it again
      result[k] = 1;
      copied = true;
    }
    if (copied) {
      backend_.record(ve, vs);
      backend_.synchronize(ve);
    }
  } catch (...) {
    // Without a verdict no verified chunk may be remapped: they keep their old handles (correct data).
    for (std::size_t k = 0; k < items.size(); ++k)
      if (running[items[k].first].sums[items[k].second]) result[k] = 2;
  }
  return result;
}

// Remaps, behind the closed and reached gates, every chunk of this direction's running jobs whose
// copy has completed, then opens the gates and gives the old handles back. Lock held on entry and
// exit; only this direction's worker touches running_[dir], so the jobs stay valid unlocked.
void GroupMover::remap_ready(std::unique_lock<std::mutex>& lk, Residence dir) {
  std::vector<Job>& running = running_[static_cast<int>(dir)];
  std::vector<std::size_t> ends(running.size());
  for (std::size_t j = 0; j < running.size(); ++j) {
    Job& job = running[j];
    std::size_t end = job.remapped;
    try {
      while (end < job.ticket.moves.size() && backend_.query(job.chunk_events[end])) ++end;
    } catch (...) {
      end = job.ticket.moves.size();  // a failing driver: the remap attempts fail and are counted
    }
    ends[j] = end;
  }
  std::vector<MigrationTicket> done(running.size()), failed(running.size());
  GateState& gate = gate_[static_cast<int>(dir)];
  const bool busy = copying_[0].load() || copying_[1].load() || copying(running);
  lk.unlock();
  const auto t0 = std::chrono::steady_clock::now();
  // The batch: every (job, move) whose copy is done; remapped by up to remap_threads threads.
  std::vector<std::pair<std::size_t, std::size_t>> items;
  for (std::size_t j = 0; j < running.size(); ++j) {
    Job& job = running[j];
    done[j].arena = failed[j].arena = job.ticket.arena;
    done[j].to = failed[j].to = job.ticket.to;
    for (std::size_t i = job.remapped; i < ends[j]; ++i) items.emplace_back(j, i);
  }
  const std::vector<char> checked = check_batch(dir, running, items);
  const auto t_checked = std::chrono::steady_clock::now();
  std::vector<char> ok(items.size(), 0);
  auto remap_range = [&](std::size_t from, std::size_t to) {
    for (std::size_t k = from; k < to; ++k) {
      if (checked[k] == 2) continue;  // could not be verified: keeps its old handle (still correct)
      const ChunkMove& m = running[items[k].first].ticket.moves[items[k].second];
      try {
        backend_.unmap(m.va, m.bytes);
      } catch (...) {
        continue;  // still mapped to `from`: nothing changed
      }
      try {
        backend_.map(m.va, m.to.phys);
        ok[k] = 1;
      } catch (...) {
        try {
          backend_.map(m.va, m.from.phys);  // put the old mapping back: the data is unchanged there
        } catch (...) {
          // Nothing else can be done: the chunk stays unmapped and the failure is counted.
        }
      }
    }
  };
  const std::size_t nthreads =
      std::min<std::size_t>(static_cast<std::size_t>(std::max(options_.remap_threads, 1)), items.size() / 2 + 1);
  if (nthreads <= 1) {
    remap_range(0, items.size());
  } else {
    std::vector<std::thread> helpers;
    const std::size_t per = (items.size() + nthreads - 1) / nthreads;
    for (std::size_t t = 1; t < nthreads; ++t)
      helpers.emplace_back(remap_range, std::min(items.size(), t * per), std::min(items.size(), (t + 1) * per));
    remap_range(0, std::min(items.size(), per));
    for (std::thread& h : helpers) h.join();
  }
  for (std::size_t k = 0; k < items.size(); ++k) {
    const auto [j, i] = items[k];
    (ok[k] ? done[j] : failed[j]).moves.push_back(running[j].ticket.moves[i]);
  }
  const auto t1 = std::chrono::steady_clock::now();
  const double wait_ns = std::chrono::duration<double, std::nano>(t0 - gate.closed_at).count();
  open_gates(dir);
  const double hold_ns = since_ns(t0);
  for (std::size_t j = 0; j < running.size(); ++j) {
    alloc_.finish_migration(done[j]);  // device handles of evicted chunks are usable again from here
    alloc_.abort_migration(failed[j]);
  }
  std::uint64_t verified = 0, rewritten = 0;
  for (std::size_t k = 0; k < items.size(); ++k) {
    const auto [j, i] = items[k];
    verified += running[j].sums[i] != nullptr && checked[k] != 2;
    if (checked[k] != 1) continue;
    ++rewritten;
    if (options_.on_rewrite) {
      const ChunkMove& m = running[j].ticket.moves[i];
      try {
        options_.on_rewrite(RewriteReport{running[j].ticket.arena, m.va, m.bytes, running[j].ticket.to});
      } catch (...) {
        // diagnostics only
      }
    }
  }
  lk.lock();
  counters_.verified_chunks += verified;
  counters_.rewrites += rewritten;
  counters_.verify_ns += std::chrono::duration<double, std::nano>(t_checked - t0).count();
  counters_.remap_ns += std::chrono::duration<double, std::nano>(t1 - t_checked).count();
  ++counters_.gates;
  counters_.busy_gates += busy ? 1 : 0;
  ready_seen_[static_cast<int>(dir)] = false;
  counters_.gate_wait_ns += wait_ns;
  counters_.gate_hold_ns += hold_ns;
  for (std::size_t j = 0; j < running.size(); ++j) {
    Job& job = running[j];
    retire_moves(job, ends[j]);
    const std::uint64_t bytes = done[j].copy_bytes();
    (job.to == Residence::host ? counters_.bytes_to_host : counters_.bytes_to_device) += bytes;
    counters_.chunks_remapped += done[j].moves.size();
    job.moved |= !done[j].moves.empty();
    job.failed |= !failed[j].moves.empty();
    if (job.to == Residence::host && !done[j].moves.empty()) ++eviction_progress_;
  }
  // Note [Parked evictions]: an eviction parked for host memory is retried when an eviction finishes
  // (evictions_seen); host memory comes back with prefetches, so it is retried after these too.
  bool host_returned = false;
  for (const MigrationTicket& t : done) host_returned |= t.to == Residence::device && !t.moves.empty();
  if (host_returned)
    for (Job& j : queue_)
      if (j.to == Residence::host && j.parked) j.evictions_seen = ~std::uint64_t{0};
  cv_.notify_all();  // a pressure waiter may use the returned handles
}

// Moves [job.remapped, end) are over (remapped or given up): their event and checksum slots go back.
// Lock held.
void GroupMover::retire_moves(Job& job, std::size_t end) {
  for (std::size_t i = job.remapped; i < end; ++i) {
    give_event(job.chunk_events[i]);
    give_sum_slots(job.sums[i]);
    job.sums[i] = nullptr;
  }
  job.remapped = end;
}

// A job is over: bookkeeping. Lock held.
void GroupMover::finish(Job& job) {
  if (job.to == Residence::host) {
    counters_.evictions += job.moved ? 1 : 0;
    ++evictions_done_;
    --eviction_jobs_;
  } else {
    counters_.prefetches += job.moved ? 1 : 0;
    --prefetch_jobs_;
  }
  counters_.failures += job.failed ? 1 : 0;
  give_event(job.after);
  job.after = 0;
  if (!job.continued) ++requests_done_[job.arena];
  // The one allocator call made with mutex_ held: it takes no lock a waiting thread holds (Note
  // [Closed arenas] in gpu_allocator.cpp; Note [No allocator calls behind closed gates]).
  if (--outstanding_[job.arena] == 0 && job.to == Residence::device) alloc_.set_arena_closed(job.arena, false);
  cv_.notify_all();
}

void GroupMover::run(Residence dir) {
  std::vector<Job>& running = running_[static_cast<int>(dir)];
  GateState& gate = gate_[static_cast<int>(dir)];
  std::unique_lock lk(mutex_);
  const bool idle_mode = options_.remap_when == RemapWhen::idle;
  for (;;) {
    bool progressed = false;
    if (idle_mode) copying_[static_cast<int>(dir)] = copying(running);
    // Remaps: close the gates once some copy is done and the remap is due (Note [When to remap]);
    // remap once every stream reached them.
    if (!gate.closed) {
      bool ready = false;
      for (Job& job : running) {
        if (job.remapped >= job.ticket.moves.size()) continue;
        try {
          ready = backend_.query(job.chunk_events[job.remapped]);
        } catch (...) {
          ready = true;  // a failing driver: the remap attempts fail and are counted
        }
        if (ready) break;
      }
      if (ready && !remap_due_locked(dir, running)) ready = false;
      if (ready) {
        lk.unlock();
        const GateResult closed = close_gates(dir);
        lk.lock();
        if (closed == GateResult::failed) {
          // Without a gate no remap is safe: the chunks keep their old handles (still correct).
          for (Job& job : running) {
            MigrationTicket failed;
            failed.arena = job.ticket.arena;
            failed.to = job.ticket.to;
            for (std::size_t i = job.remapped; i < job.ticket.moves.size(); ++i) failed.moves.push_back(job.ticket.moves[i]);
            lk.unlock();
            try {
              for (std::size_t i = job.remapped; i < job.ticket.moves.size(); ++i) backend_.synchronize(job.chunk_events[i]);
            } catch (...) {
            }
            alloc_.abort_migration(failed);
            lk.lock();
            retire_moves(job, job.ticket.moves.size());
            job.failed = true;
          }
          progressed = true;
        }
      }
    }
    if (gate.closed) {
      bool reached = false;
      lk.unlock();
      try {
        reached = gates_reached(dir);
      } catch (...) {
        reached = false;
      }
      lk.lock();
      if (reached) {
        remap_ready(lk, dir);
        progressed = true;
      } else if (std::chrono::steady_clock::now() - gate.closed_at > options_.gate_timeout) {
        open_gates(dir);
        ++counters_.gate_timeouts;
      }
    }
    // Note [No allocator calls behind closed gates]: the training thread may hold the allocator's lock
    // while it waits for a stream a worker has gated (reclaiming with wait, in allocate or from
    // ensure_resident). So (1) a worker never calls the allocator while its own gates are closed
    // (remap_ready opens them first), and (2) no thread waits for the allocator's lock while holding
    // mutex_, which the gate holder needs before it can open its gates: try_issue and remap_ready
    // unlock around their allocator calls, and the one call made with mutex_ held, set_arena_closed in
    // finish(), never waits for the allocator's lock. The other worker's gates cannot be ruled out
    // by the check below: they close without mutex_, possibly right after it (a deadlock seen in CI:
    // the training thread reclaiming, waiting for a gated stream; the device worker in finish()
    // waiting for the allocator's lock; the gate holder waiting for mutex_).
    bool have_queued = false;
    // Jobs are issued and finished only while no worker's gates are closed: remaps run with the copy
    // engines quieter (Note [When to remap]).
    if (!gate.closed && gates_closed_.load() == 0) {
      for (std::size_t i = 0; i < running.size();) {
        if (running[i].remapped == running[i].ticket.moves.size()) {
          Job over = std::move(running[i]);
          running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
          finish(over);
          progressed = true;
          continue;
        }
        ++i;
      }
      // Issue the first queued job of this direction whose arena has no earlier job queued or running.
      std::unordered_set<ArenaId> blocked;
      for (const auto& r : running_)
        for (const Job& j : r) blocked.insert(j.arena);
      for (ArenaId a : issuing_) blocked.insert(a);
      for (std::size_t i = 0; i < queue_.size(); ++i) {
        Job& j = queue_[i];
        const bool mine = j.to == dir;
        if (blocked.count(j.arena)) continue;
        blocked.insert(j.arena);
        if (!mine) continue;
        have_queued = true;
        // A prefetch parked for device memory with an eviction of its group queued behind it blocks
        // that eviction (jobs of one arena run in order) while the memory it waits for may have to
        // come from that very eviction: with a thread waiting for evictions (the allocator's
        // pressure handler, drain, or ensure_resident for any group, whose own prefetch may be
        // parked for that memory: the waiter counts the blocked eviction as pending), nothing would
        // ever move again. Then the prefetch is given up (it would only bring back what the eviction
        // takes away): whatever part of the group already arrived, the eviction moves back.
        if (j.parked && j.to == Residence::device &&
            (pressure_waiters_ > 0 || drain_waiters_ > 0 || !ensure_waiting_.empty()) &&
            std::any_of(queue_.begin() + static_cast<std::ptrdiff_t>(i) + 1, queue_.end(),
                        [&](const Job& k) { return k.arena == j.arena && k.to == Residence::host; }))
          j.cancelled = true;
        if (j.cancelled) {
          Job job = std::move(j);
          queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
          // An eviction given up for lack of host memory (or of handles: creation failed) left chunks
          // on the device that the plan wanted gone: a failure, counted (a given-up prefetch is a miss).
          if (job.to == Residence::host) job.failed = true;
          finish(job);
          progressed = true;
          break;
        }
        if (j.parked && j.evictions_seen == evictions_done_ && !progressed) continue;  // retried on the next poll
        Job job = std::move(j);
        queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
        job.parked = false;
        issuing_.push_back(job.arena);
        const ArenaId issued = job.arena;
        if (try_issue(lk, job)) progressed = true;
        issuing_.erase(std::find(issuing_.begin(), issuing_.end(), issued));
        break;  // the queue may have changed while unlocked
      }
    }
    if (!have_queued)
      for (const Job& j : queue_) have_queued |= j.to == dir;
    if (stop_ && !have_queued && running.empty() && !gate.closed) return;
    if (progressed) continue;
    if (gate.closed) cv_.wait_for(lk, options_.gate_poll);
    else if (running.empty() && !have_queued) cv_.wait(lk);
    else cv_.wait_for(lk, options_.poll);
  }
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

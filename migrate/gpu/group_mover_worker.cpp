// The GroupMover's workers (Note [Migration protocol] in group_mover.hpp): one thread per direction
// that issues each queued job's copies (destination handles from the allocator, a checksum around
// each copy when it is verified, an event per chunk), closes and reaches the gates when copies are
// done (group_mover_remap.cpp), and finishes jobs whose chunks are all remapped or given up.
#include "migrate/gpu/group_mover.hpp"

#include <algorithm>
#include <unordered_set>

#include "alloc/gpu/chunk_checksum.hpp"

namespace tierpack::gpu {

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
      cv_.notify_all();  // Note [Parked evictions] in group_mover.cpp: the evictions a pressure waiter counts changed
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
  // [Closed arenas] in alloc/gpu/gpu_allocator_arenas.cpp; Note [No allocator calls behind closed gates]).
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

}  // namespace tierpack::gpu

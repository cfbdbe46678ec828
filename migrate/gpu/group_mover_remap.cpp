// The GroupMover's remaps (Notes [Remap gate], [Verified remaps] and [When to remap] in
// group_mover.hpp): when a worker's ready chunks are due, gating every stream the allocator has seen,
// checking behind the gate that nothing wrote a chunk after its copy, remapping the batch, opening the
// gates and only then giving the old handles back to the allocator.
#include "migrate/gpu/group_mover.hpp"

#include <algorithm>

#include "alloc/gpu/chunk_checksum.hpp"

namespace tierpack::gpu {

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
  const double hold_ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
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
  // Note [Parked evictions] in group_mover.cpp: an eviction parked for host memory is retried when an
  // eviction finishes (evictions_seen); host memory comes back with prefetches, so it is retried after
  // these too.
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

}  // namespace tierpack::gpu

// GroupMover: moves page groups (allocator arenas) between device and host memory without changing
// a single pointer, overlapped with compute.
//
// Note [Migration protocol]
// evict(g, s)   on the training thread: closes g to new blocks, records an event E on s (after g's
//               last use) and queues the job; nothing blocks.
// worker        acquires host handles for g's chunks, makes the device-to-host copy stream wait on E,
//               copies each chunk into its new handle through the handle's shadow mapping (an event
//               after each chunk), and, as each chunk's copy completes, remaps the chunk's address to
//               the new handle and returns its device handle to the pool (where the budget can use
//               it again): remaps of early chunks overlap the copies of later ones.
// prefetch(g,s) the same towards the device on its own copy stream, so both directions run at once.
//               Device handles may be short (the budget is full until evictions finish): the job
//               waits for evictions, moving what it can.
// ensure(g)     on the training thread before the first op that needs g: waits for g's moves; the
//               wait is a counted stall. If no move can make progress (no device memory will come),
//               g simply stays on the host: still mapped, still correct, only slower (a counted miss).
// Jobs of one arena run in order; jobs of different arenas overlap. A remap happens only after its
// copy completed and only for chunks the plan says no enqueued op touches (the executor's contract).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "alloc/gpu/gpu_allocator.hpp"

namespace tierpack::gpu {

/// Counters of one iteration (or since the last take_counters()).
struct MoverCounters {
  std::uint64_t bytes_to_host = 0;
  std::uint64_t bytes_to_device = 0;
  std::uint64_t evictions = 0;   ///< jobs completed towards the host
  std::uint64_t prefetches = 0;  ///< jobs completed towards the device
  std::uint64_t chunks_remapped = 0;
  std::uint64_t stalls = 0;      ///< ensure() calls that had to wait
  double stall_ns = 0;
  std::uint64_t misses = 0;      ///< ensure() found the group (partly) on the host and nothing coming
  std::uint64_t failures = 0;    ///< jobs that failed (data stays where it was)
  double remap_ns = 0;           ///< driver time spent in unmap+map on the worker

  MoverCounters& operator+=(const MoverCounters& o);
};

struct MoverOptions {
  std::chrono::microseconds poll{50};  ///< worker's poll interval while copies run
};

class GroupMover {
 public:
  GroupMover(GpuAllocator& allocator, MoverOptions options = {});
  ~GroupMover();  ///< finishes queued work first
  GroupMover(const GroupMover&) = delete;
  GroupMover& operator=(const GroupMover&) = delete;

  /// Moves `arena` to the host once the work enqueued on `after` so far has run.
  void evict(ArenaId arena, StreamHandle after);
  /// Moves `arena` to the device; copies start after the work enqueued on `after` so far.
  void prefetch(ArenaId arena, StreamHandle after);
  /// Waits until `arena`'s queued moves are done (a stall when it has to wait). Returns true when
  /// the arena is then entirely on the device.
  bool ensure_resident(ArenaId arena);
  /// Waits for every queued move.
  void drain();
  /// Pressure handler for the allocator: waits for one eviction to complete; false when none is
  /// queued or in flight.
  bool wait_for_eviction();
  /// True when `arena` has no queued or running move.
  bool idle(ArenaId arena) const;

  MoverCounters counters() const;
  MoverCounters take_counters();

 private:
  struct Job {
    ArenaId arena = 0;
    Residence to = Residence::host;
    EventHandle after = 0;
    MigrationTicket ticket;
    std::vector<EventHandle> chunk_events;  // one per move, recorded after its copy
    std::size_t remapped = 0;               // moves [0, remapped) are done
    bool moved = false;
    bool failed = false;
    bool parked = false;     // waiting for destination memory
    bool cancelled = false;  // given up by ensure_resident
    std::uint64_t evictions_seen = 0;
  };

  void run();
  bool try_issue(std::unique_lock<std::mutex>& lk, Job& job);
  void remap_ready(std::unique_lock<std::mutex>& lk, Job& job, std::size_t end);
  void finish(Job& job);
  EventHandle take_event();
  void give_event(EventHandle e);
  bool busy_locked(ArenaId arena) const;
  std::uint64_t evictions_pending_locked() const;
  bool any_outstanding_locked() const;

  GpuAllocator& alloc_;
  VmmBackend& backend_;
  MoverOptions options_;
  StreamHandle copy_stream_[kResidenceCount] = {0, 0};  // indexed by destination
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> queue_;     // not yet issued, FIFO
  std::vector<Job> running_;  // copies issued
  std::vector<EventHandle> events_;
  std::unordered_map<ArenaId, int> outstanding_;  // queued + running jobs per arena
  std::uint64_t evictions_done_ = 0;
  std::uint64_t eviction_progress_ = 0;  // chunks batches evicted (device handles given back)
  std::uint64_t eviction_jobs_ = 0;  // eviction jobs not yet completed (parked ones included)
  MoverCounters counters_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace tierpack::gpu

// GroupMover: moves page groups (allocator arenas) between device and host memory without changing
// a single pointer, overlapped with compute: the Mover of the device <-> host tier pair (migrate/mover.hpp).
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
// Jobs of one arena run in order; jobs of different arenas overlap. Each direction has its own
// worker thread and copy stream, so evictions and prefetches (copies and remaps) run at once.
//
// Note [Remap gate]
// Between cuMemUnmap and cuMemMap+cuMemSetAccess a chunk's addresses are invalid: a kernel touching
// them then dies with CUDA_ERROR_ILLEGAL_ADDRESS and takes the context with it. A plan cannot rule
// that out: the op observer misses kernels (views, foreach/fused optimizer kernels, kernels of
// libraries), and a late prefetch leaves a group in use from host memory while its move finishes.
// So the mover does not trust the plan for this; it makes the remap window unobservable:
//   1. when chunks' copies are done, the worker closes a gate (VmmBackend::close_gate) on every
//      stream the allocator has seen (allocate, record_stream): one stream operation that holds
//      all later work of the stream;
//   2. it waits until every gated stream has reached its gate: all work enqueued before the gate
//      has completed, none after it has started;
//   3. it unmaps and maps every chunk whose copy has completed by then (a batch, to amortise the
//      gate), then opens the gates, and only then touches the allocator (whose lock a training
//      thread may hold while it waits for a gated stream).
// A kernel on a gated stream therefore runs wholly before the remap (on the old handle) or wholly
// after it (on the new one); both handles hold the same bytes unless something wrote the group
// between the copy's start and the gate, which only a wrong plan does (a lost write of a hidden
// writer, never a fault).
// Note [Verified remaps]
// The gate makes the remap window invisible, but it cannot undo a write that landed on the old handle
// after the copy read it: only a kernel touching a group the plan says is idle does that (a use the op
// observer missed, a clock the alignment got wrong), and its write would be lost by the remap. So the
// mover fingerprints what it copied and checks it again behind the gate:
//   eviction   checksum of the source (device memory, cheap) on the copy stream just before the copy;
//   prefetch   checksum of the destination (device memory) just after the copy: exactly the bytes
//              copied;
//   behind the gate, before the unmap: checksum of the source as the chunk's address sees it now, on a
//   verify stream of this worker (never gated). A difference means the source changed after the
//   copy: the chunk is copied again, still behind the gate, and only then remapped (a counted
//   rewrite, reported through on_rewrite with the chunk's address once the gates are open).
// For evictions both checksums read HBM (~70 us per 64 MiB on an H200); for prefetches the one
// behind the gate reads the host copy over PCIe, about as long as the copy itself (~1.3 ms per
// 64 MiB), held compute included. So by default (Verify::sampled) prefetches are checked on samples,
// 64 KiB of every MiB: 1/16 of the reads, and every write covering an aligned MiB (any tensor of 2 MiB
// or more written whole) is still seen; smaller writes are seen only when they touch a sample. A
// group found written once is then verified both ways (verify_always), and
// the GPU runtime repairs its schedule around the missed use (Note [Repairing the schedule] in
// migrate/schedule_executor.cpp). A write between the first checksum and an eviction's copy makes a false
// difference (one more copy, never a loss). Chunks copied without live blocks are not checked.
// Note [When to remap]
// The driver's remap calls cost far more while copies run (BM_RemapParts on an H200, 64 MiB chunks,
// ms per GiB: device handles 0.67 idle / 17 with copies running both ways; host handles 12 / 25;
// cuMemSetAccess is most of it, and more threads do not help). The compute streams wait behind the
// gate for all of it. So with RemapWhen::idle a worker remaps only when neither direction has a copy
// in flight and, while a gate is closed, neither issues new copies: copies run back to back at the
// link's speed and remaps in batches at the idle cost. A remap cannot wait when something waits for
// it: a training thread in ensure_resident() for one of the batch's groups, a prefetch parked for
// device memory (evictions give it back only when remapped), the allocator's pressure handler,
// drain(), or a chunk ready for longer than `remap_max_delay`; those gates are closed at once and
// counted as busy when copies were in flight (MoverCounters::busy_gates). RemapWhen::eager remaps
// as soon as any copy is done (the earlier behaviour). Copies can also be issued in pieces of
// `copy_piece` bytes; with eager remaps that changed neither the remap time nor the compute held
// (GPT-2 large, 4-16 MiB pieces: bench/results/gpu-h200-2026-11-30-4, call 4).
// What a remap waits for (bench/results/gpu-h200-2026-11-30): the driver's calls finish after the
// copy running on the copy engines, about one 64 MiB copy per chunk remapped, not the whole queue
// (BM_RemapBehindCopies: 256 MiB of device chunks 0.19 ms idle, 1.4 ms behind one 64 MiB copy, ~4.2
// ms behind 256 MiB or more); copies done by kernels instead are waited for as well (host chunks
// longer: 35 ms behind 1 GiB of kernel copies). A copy window (each worker issuing its copies piece
// by piece with a bound on the bytes in flight, commit a822471) cut the compute held behind gates
// on GPT-2 large at 60% from 462 to 234-354 ms per step, but every window tried was slower overall
// (803-1322 ms against 759): the worker that issues a direction's copies is the one that remaps, so
// the link idled while it did. It was removed. Idle remaps still cost ~12.7 ms per GiB each way
// (12 of it mapping host memory, with or without huge pages), which bounds any remapping mover.
// Deadlocks: gates on several streams can form a cycle with the streams' own cross-stream waits
// (stream A waits for an event that stream B records after B's gate, enqueued while the gates were
// being closed one by one), and two sets of gates closed at once can interleave in opposite orders.
// So only one worker holds gates at a time (the other keeps copying and retries), and gates not all
// reached within `gate_timeout` are opened again (counted) and closed anew later: a cycle
// dissolves, a legitimately long stream queue just costs a retry. Not covered: streams the allocator never saw (a
// stream that only reads tensors allocated on another stream without record_stream: PyTorch
// requires record_stream there anyway) and streams under CUDA graph capture.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "alloc/gpu/gpu_allocator.hpp"
#include "core/config.hpp"
#include "migrate/mover.hpp"

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
  double remap_ns = 0;           ///< driver time spent in unmap+map on the workers
  std::uint64_t gates = 0;       ///< remap batches behind a gate (Note [Remap gate])
  double gate_wait_ns = 0;       ///< gate closed -> every gated stream reached it
  double gate_hold_ns = 0;       ///< streams held at a gate (reached -> opened): compute stall bound
  std::uint64_t gate_timeouts = 0;  ///< gates reopened unreached (see Note [Remap gate])
  /// Gates closed while copies were in flight (Note [When to remap]): either direction's with
  /// RemapWhen::idle, the gate's own direction's with eager (which tracks no other, to keep its
  /// workers from querying events all the time).
  std::uint64_t busy_gates = 0;
  std::uint64_t verified_chunks = 0;  ///< chunks checked behind a gate (Note [Verified remaps])
  std::uint64_t rewrites = 0;         ///< of those, found written after their copy and copied again
  double verify_ns = 0;               ///< time behind gates spent checking and copying again

  MoverCounters& operator+=(const MoverCounters& o);
};

// Verify (which moves are checked behind the gate) and RemapWhen (when ready chunks are remapped) are settings:
// core/config.hpp.
inline constexpr std::size_t kPrefetchSampleStride = std::size_t{1} << 20;

/// A chunk found written between its copy and its remap (and copied again).
struct RewriteReport {
  ArenaId arena = 0;
  std::uintptr_t va = 0;
  std::size_t bytes = 0;
  Residence to = Residence::host;
};

struct MoverOptions {
  std::chrono::microseconds poll{50};  ///< worker's poll interval while copies run
  std::chrono::microseconds gate_poll{5};  ///< poll interval while waiting for a gate to be reached
  std::chrono::milliseconds gate_timeout{200};  ///< reopen gates not all reached by then (a cycle)
  int remap_threads = 1;  ///< threads sharing one gated batch's unmap/map calls
  bool gate = true;  ///< gate the allocator's streams around remaps (off only to show the fault in tests)
  Verify verify = Verify::sampled;
  RemapWhen remap_when = RemapWhen::eager;
  std::chrono::milliseconds remap_max_delay{20};  ///< RemapWhen::idle: a ready chunk waits at most this long
  std::size_t copy_piece = 0;  ///< a chunk's copy is issued in pieces of this many bytes (0: one copy)
  /// Called on a mover thread, no lock held, gates open, for every rewrite (diagnostics).
  std::function<void(const RewriteReport&)> on_rewrite;
};

class GroupMover final : public Mover {
 public:
  GroupMover(GpuAllocator& allocator, MoverOptions options = {});
  ~GroupMover();  ///< finishes queued work first
  GroupMover(const GroupMover&) = delete;
  GroupMover& operator=(const GroupMover&) = delete;

  /// Moves `arena` to the host once the work enqueued on `after` so far has run. Returns the
  /// request's number among `arena`'s requests (1, 2, ...: see request_done).
  std::uint64_t evict(ArenaId arena, StreamHandle after);
  /// Moves `arena` to the device; copies start after the work enqueued on `after` so far. Returns
  /// the request's number, as evict().
  std::uint64_t prefetch(ArenaId arena, StreamHandle after);
  /// Whether `arena`'s request number `n` is over (moved, given up or failed): requests of one arena
  /// complete in order.
  bool request_done(ArenaId arena, std::uint64_t n) const;
  /// Waits until `arena`'s queued moves are done (a stall when it has to wait; `waited` says whether
  /// it did). Returns true when the arena is then entirely on the device.
  bool ensure_resident(ArenaId arena, bool* waited = nullptr);
  /// Waits for every queued move.
  void drain();
  /// Pressure handler for the allocator: waits for one eviction to complete; false when none is
  /// queued or in flight.
  bool wait_for_eviction();
  /// True when `arena` has no queued or running move.
  bool idle(ArenaId arena) const;
  /// Verifies every later move of `arena`, both directions, whatever `verify` says (a group found
  /// written behind the plan's back once: Note [Verified remaps]).
  void verify_always(ArenaId arena);

  /// The Mover interface speaks of a plan's page groups: each lives in its own arena, bound here once
  /// (the training thread, before a schedule runs).
  void bind_groups(const std::unordered_map<GroupId, ArenaId>& arenas);
  /// Whether `group` is bound to an arena.
  bool moves(GroupId group) const override { return arenas_.count(group) != 0; }
  /// evict() or prefetch() of the group's arena, as m.kind says, after the work so far on `order`.
  std::uint64_t submit(const Move& m, MoveOrder order) override;
  /// request_done() of the group's arena.
  bool done(GroupId group, std::uint64_t request) const override;
  /// ensure_resident() of the group's arena: waits (bounded) for its moves.
  Landing land(const Move& m) override;

  MoverCounters counters() const;
  MoverCounters take_counters();

 private:
  struct Job {
    ArenaId arena = 0;
    Residence to = Residence::host;
    EventHandle after = 0;
    MigrationTicket ticket;
    std::vector<EventHandle> chunk_events;  // one per move, recorded after its copy
    std::vector<std::uint64_t*> sums;       // per move: checksum after the copy, behind the gate (2 slots), or null
    std::size_t verify_stride = 0;          // 0: full checksums, else sampled (Verify::sampled)
    std::size_t remapped = 0;               // moves [0, remapped) are done
    bool moved = false;
    bool failed = false;
    bool parked = false;     // waiting for destination memory
    bool cancelled = false;  // given up by ensure_resident
    bool continued = false;  // a rest job carries on the request: it completes when the rest does
    std::uint64_t evictions_seen = 0;
  };

  void run(Residence dir);
  bool try_issue(std::unique_lock<std::mutex>& lk, Job& job);
  void remap_ready(std::unique_lock<std::mutex>& lk, Residence dir);
  enum class GateResult { closed, busy, failed };
  GateResult close_gates(Residence dir);
  bool gates_reached(Residence dir);
  void open_gates(Residence dir) noexcept;
  void finish(Job& job);
  void retire_moves(Job& job, std::size_t end);
  EventHandle take_event();
  /// evict() and prefetch(): queues the job moving `arena` to `to` after the work on `after` so far.
  std::uint64_t queue_job(ArenaId arena, Residence to, StreamHandle after);
  void give_event(EventHandle e);
  /// How a move of `arena` towards `to` is verified: -1 not at all, 0 in full, else the sample stride.
  std::int64_t verify_stride(Residence to, ArenaId arena);
  std::uint64_t* take_sum_slots();  // two checksums' words (lock not needed)
  void give_sum_slots(std::uint64_t* p);
  /// Behind the gate: checks the batch's verified chunks and copies changed ones again. Returns per
  /// item 0 (remap), 1 (rewritten, remap), 2 (could not be checked: keep the old handle).
  std::vector<char> check_batch(Residence dir, std::vector<Job>& running,
                                const std::vector<std::pair<std::size_t, std::size_t>>& items);
  bool busy_locked(ArenaId arena) const;
  /// Whether `running` still has copies in flight (the last chunk event of some job not reached).
  bool copying(const std::vector<Job>& running);
  /// Note [When to remap]: whether ready chunks of `dir` may be remapped now. Lock held.
  bool remap_due_locked(Residence dir, const std::vector<Job>& running);
  void copy_chunk(std::uintptr_t dst, std::uintptr_t src, std::size_t bytes, StreamHandle s);
  std::uint64_t evictions_pending_locked() const;
  std::uint64_t prefetches_pending_locked() const;
  bool any_outstanding_locked() const;

  GpuAllocator& alloc_;
  VmmBackend& backend_;
  std::unordered_map<GroupId, ArenaId> arenas_;  // bind_groups(); the training thread's only
  MoverOptions options_;
  StreamHandle copy_stream_[kResidenceCount] = {0, 0};  // indexed by destination
  StreamHandle verify_stream_[kResidenceCount] = {0, 0};
  EventHandle verify_event_[kResidenceCount] = {0, 0};
  std::mutex slots_mutex_;
  std::vector<std::uint64_t*> free_slots_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> queue_;     // not yet issued, FIFO
  std::vector<Job> running_[kResidenceCount];  // copies issued, by destination; only its worker touches it
  struct GateState {
    std::vector<GateHandle> gates;
    std::chrono::steady_clock::time_point closed_at;
    bool closed = false;
  };
  GateState gate_[kResidenceCount];
  std::vector<ArenaId> issuing_;  // arenas whose job a worker is issuing (out of queue_ and running_)
  std::atomic<bool> copying_[kResidenceCount] = {false, false};  // published by each worker
  std::atomic<int> gates_closed_{0};
  bool ready_seen_[kResidenceCount] = {false, false};
  std::chrono::steady_clock::time_point ready_since_[kResidenceCount];
  std::unordered_map<ArenaId, int> ensure_waiting_;  // arenas a training thread waits for
  int drain_waiters_ = 0;
  int pressure_waiters_ = 0;
  std::mutex gate_owner_;  // held by the worker whose gates are closed
  std::vector<EventHandle> events_;
  std::unordered_map<ArenaId, int> outstanding_;  // queued + running jobs per arena
  std::unordered_map<ArenaId, std::uint64_t> requests_made_, requests_done_;  // evict/prefetch calls per arena
  std::unordered_set<ArenaId> verify_always_;
  std::uint64_t evictions_done_ = 0;
  std::uint64_t eviction_progress_ = 0;  // chunks batches evicted (device handles given back)
  std::uint64_t eviction_jobs_ = 0;  // eviction jobs not yet completed (parked ones included)
  std::uint64_t prefetch_jobs_ = 0;  // prefetch jobs not yet completed (parked ones included)
  MoverCounters counters_;
  bool stop_ = false;
  std::thread workers_[kResidenceCount];
};

}  // namespace tierpack::gpu

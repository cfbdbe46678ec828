// HostMover: moves page groups of a HostArenaAllocator between NUMA nodes on a worker thread, with
// move_pages (batched, per-page status) or mbind(MPOL_MF_MOVE) per group range: the Mover of the host tier
// pairs (DRAM <-> far NUMA / CXL, DRAM <-> DRAM; migrate/mover.hpp). The schedule executor submits the
// plan's moves at op boundaries; the worker executes them while compute goes on.
//
// Note [Host move outcomes]
// The kernel copies a page before it remaps it, so a failed move never loses data: the page stays
// where it was and is still correct. Per page, move_pages answers:
//  - the target node: moved (or already there);
//  - -ENOENT: never touched; it will fault in on the target, because after moving a range the mover
//    re-mbinds it to the target (Note [Purged pages refault] in alloc/host/host_arena.hpp);
//  - -EFAULT: the shared zero page (read but never written; Linux 6.12 reports it so, newer kernels
//    report the node) or an unmapped page: there is no data to move; a later write faults a page in
//    on the target (the range is re-bound). Counted as pages_zero, not as a failure;
//  - -EBUSY / -EAGAIN (pinned, under I/O, locked, or not yet on an LRU list because it was just
//    faulted or migrated on another CPU): retried later, up to max_retries, by requeueing
//    the leftover pages behind the other queued moves; a newer move of the same group supersedes it;
//  - any other -errno (-EACCES shared with another process, -ENOMEM target full, ...):
//    left where it is and counted by errno.
// A move whose pages all reached the target (or were absent) is complete and the group's blocks are
// re-charged to the target tier; otherwise it is partial and the charge stays on the source tier.
//
// Note [Prefetches respect the budget]
// A prefetch re-charges its group to the fast tier; if the evictions the plan put before it are late
// (still queued, or not done for lack of room themselves) it would lift the fast
// tier above its budget. So a prefetch runs only when the group fits under the target tier's budget;
// otherwise it goes behind the queued moves (the evictions) up to max_deferrals times, and when still
// nothing makes room it is not done: the group stays on the slow tier, which is correct (host memory is
// always accessible), only slower. Counted as moves_over_budget. The room is reserved when the move
// starts (HostArenaAllocator::reserve) and becomes the group's charge when it lands, so allocations
// made while it is in flight see it taken and go to the slow tier instead of lifting the fast tier
// over its budget (they did: ~2% over on two DDP ranks before the reservation).
//
// Note [Moves carry foreign pages]
// With a ForeignPages registry, a move of group G also moves the whole pages of the tensors
// registered in G that are not on the target yet (Note [Foreign pages] in foreign_pages.hpp): the
// same move_pages batches, per-page outcomes, retries, counters and late marks as the group's own
// blocks; a prefetch reserves their bytes too. When the move is complete their charge follows them.
// A move that finds neither blocks nor foreign pages is empty.
//
// Note [Transparent huge pages and moves]
// move_pages on any address inside a THP moves the whole 2 MiB page. With huge_page_stride the
// mover passes one address per 2 MiB-aligned chunk that a range covers fully, then queries every
// base page of those chunks and moves the stragglers (chunks the kernel had not backed by a THP)
// one by one. A range that covers a THP only partly drags its neighbours along: the placer rounds
// THP groups to 2 MiB (and THP arenas align large blocks to 2 MiB) so that this does not happen.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "alloc/host/host_arena_allocator.hpp"
#include "core/plan.hpp"
#include "migrate/host/foreign_pages.hpp"
#include "migrate/host/move_counters.hpp"
#include "migrate/mover.hpp"

namespace tierpack::host {

struct MoverOptions {
  enum class Method : unsigned char { move_pages, mbind };
  Method method = Method::move_pages;
  std::size_t batch_pages = 4096;  ///< base pages per move_pages call
  int max_retries = 3;             ///< for -EBUSY / EAGAIN
  bool huge_page_stride = false;   ///< see Note [Transparent huge pages and moves]
  bool worker = true;              ///< false: submit() runs the move on the caller's thread
  int max_deferrals = 8;           ///< prefetches waiting for room (Note [Prefetches respect the budget])
};

/// What one execution of a move did (tests and benchmarks look at it).
/// A page of a foreign tensor left to retry, with the tensor it belongs to (Note [Foreign pages]).
struct ForeignPage {
  std::uint64_t id = 0;
  std::uintptr_t owner = 0;
  void* page = nullptr;
};

struct MoveResult {
  MoveCounters counters;
  std::vector<void*> busy_pages;  ///< pages to retry later
  std::vector<ForeignPage> foreign_busy;  ///< foreign pages to retry later
  bool complete = false;
  std::vector<PageRange> ranges;  ///< the group's pages a first attempt covered (group_ranges())
  std::vector<ForeignPages::Entry> foreign;  ///< the foreign tensors a first attempt covered
  bool has_busy() const { return !busy_pages.empty() || !foreign_busy.empty(); }
};

class HostMover final : public Mover {
 public:
  /// `foreign` (optional, must outlive the mover): tensors the groups' moves carry besides the
  /// allocator's blocks (Note [Moves carry foreign pages]).
  explicit HostMover(HostArenaAllocator& alloc, MoverOptions options = {}, ForeignPages* foreign = nullptr);
  /// Drops queued moves (counted as dropped), lets the running one finish, joins the worker.
  ~HostMover();
  HostMover(const HostMover&) = delete;
  HostMover& operator=(const HostMover&) = delete;

  /// Every group: its blocks are tagged with it (a group without blocks makes an empty move).
  bool moves(GroupId /*group*/) const override { return true; }
  /// Queues a move of m.group to m.to (m.kind says which direction the bytes count for); host moves
  /// have no stream to follow (`order` is ignored). Returns the request's number among the group's.
  std::uint64_t submit(const Move& m, MoveOrder order = 0) override;
  /// No move of the group numbered `request` or before it is queued or running.
  bool done(GroupId group, std::uint64_t request) const override;
  /// Op `now` begins: counts a late move for every queued or running prefetch whose needed_by <= now
  /// (once each). Never waits: a late group is still correct where it is, only slower.
  void reached(std::int64_t now) override;
  /// Never waits (reached() counted it late): landed when no move of the group is queued or running.
  Landing land(const Move& prefetch) override { return {false, !in_flight(prefetch.group)}; }
  /// Whether a move of the group is queued or running.
  bool in_flight(GroupId group) const;
  /// Waits until nothing is queued or running (iteration end in tests; never on the hot path).
  void wait_idle();

  /// Runs one move on the calling thread, retrying busy pages inline (tests, benchmarks).
  MoveResult move_now(GroupId group, TierId to, MoveKind kind);

  MoveCounters counters() const;
  /// Returns the counters and resets them (per-iteration reporting).
  MoveCounters take_counters();
  const MoverOptions& options() const noexcept { return options_; }

 private:
  struct Job {
    Move move;
    int attempt = 0;
    std::uint64_t generation = 0;
    std::vector<void*> pages;  ///< retry (attempt > 0): only these pages
    std::vector<ForeignPage> foreign_pages;  ///< ... and these foreign ones
    bool late = false;
    bool failed = false;       ///< some attempt left pages behind
    int deferrals = 0;         ///< times put back for lack of room on the target tier
    std::uint64_t reserved = 0;  ///< target-tier budget held while the move is in flight
    std::vector<PageRange> ranges;  ///< what the first attempt covered: only those blocks change tier
    std::vector<ForeignPages::Entry> foreign;  ///< ... and only those foreign tensors
  };

  /// For a prefetch's first attempt: reserves its group's bytes on the target tier, false when they
  /// do not fit under its budget now. Always true for evictions and retries (they hold what they
  /// reserved): Note [Prefetches respect the budget].
  bool reserve_room(Job& job);
  /// Gives back what a job reserved and did not turn into its group's charge.
  void release_room(Job& job) noexcept;

  void run();
  /// Executes one job; the returned busy pages are what is left to retry.
  MoveResult execute(const Job& job);
  void move_page_list(const std::vector<void*>& pages, int node, MoveResult& out);
  /// Moves foreign pages (sorted by owner) batch by batch, each under the registry's lock while its
  /// tensor is registered; busy ones go to out.foreign_busy.
  void move_foreign_pages(const std::vector<ForeignPage>& pages, int node, MoveResult& out);
  MoveCounters finish(Job& job, MoveResult& r);

  HostArenaAllocator& alloc_;
  ForeignPages* foreign_;
  HostOs& os_;
  MoverOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<Job> queue_;
  bool running_job_ = false;
  Job current_;  // valid while running_job_
  bool stop_ = false;
  std::unordered_map<GroupId, std::uint64_t> generation_;
  MoveCounters counters_;
  std::thread worker_;
};

}  // namespace tierpack::host

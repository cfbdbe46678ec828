// ScheduleExecutor: runs a Plan's migration schedule against a clock of the iteration (op indices,
// or the allocator's event count when no op observer is attached), through a GroupMover.
//
// At each clock value c it first makes sure every prefetch with needed_by <= c has landed (a stall
// when it has not; see GroupMover::ensure_resident), then issues every move with issue_after < c in
// schedule order. A move is issued once per iteration; end_iteration() issues what is left.
// It also logs what it did in the iteration (take_log): each move's issue and completion time and
// each prefetch the clock had to wait for, in nanoseconds from begin_iteration().
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/plan.hpp"
#include "migrate/gpu/group_mover.hpp"

namespace tierpack::gpu {

/// A move as it ran: issued at start_ns, over by end_ns (the first clock tick at most ~0.2 ms after the
/// mover finished it, or the log's taking when it was not over by then; `done` says which).
struct ExecutedMove {
  Move move;
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  bool done = false;
};

/// A clock tick that waited for a prefetch (a stall).
struct ExecutedStall {
  std::int64_t clock = 0;
  GroupId group = 0;
  std::uint64_t start_ns = 0;
  std::uint64_t duration_ns = 0;
};

struct ExecutionLog {
  std::vector<ExecutedMove> moves;
  std::vector<ExecutedStall> stalls;
};

class ScheduleExecutor {
 public:
  ScheduleExecutor(GroupMover& mover, std::vector<Move> schedule, std::unordered_map<GroupId, ArenaId> arenas);

  /// Resets the clock to 0 and acts on it (moves issued "before the iteration", prefetches needed at 0).
  void begin_iteration(StreamHandle stream);
  /// The clock reached `now` (monotonic within an iteration); `stream` is the compute stream whose
  /// work so far orders the copies.
  void advance(std::int64_t now, StreamHandle stream);
  /// Issues every move not issued yet in this iteration.
  void end_iteration(StreamHandle stream);
  /// Note [Away when the plan starts]: evicts now every group the schedule has on the host when an
  /// iteration begins (its last eviction comes after its last prefetch, or it has none). Call once,
  /// between the traced iteration and the first planned one. Returns how many evictions it issued.
  std::size_t evict_away_at_start(StreamHandle stream);

  /// Note [Repairing the schedule]: a verified remap of `group` found a write the plan did not know
  /// of, seen by clock `at`, during a move of `kind`. Postpones the eviction whose window held it
  /// past `at`, or drops that round trip (the group then stays on the device) when postponing would
  /// reach its prefetch. Call between iterations. Returns what changed, for the log ("" if nothing).
  std::string repair(GroupId group, MoveKind kind, std::int64_t at);

  std::size_t moves() const { return by_issue_.size(); }
  /// The schedule as it runs now (repairs included), in issue order.
  const std::vector<Move>& schedule() const { return by_issue_; }
  std::uint64_t ensured_misses() const { return misses_; }
  /// This iteration's log so far (moves not over yet end now); clears it.
  ExecutionLog take_log();

 private:
  void issue(const Move& m, StreamHandle stream);
  void index();  // sorts by_issue_ and rebuilds prefetch_need_ and issued_
  std::uint64_t now_ns() const;
  void poll_done(bool force);  // marks logged moves the mover has finished

  struct Pending {
    std::size_t log_index;
    ArenaId arena;
    std::uint64_t request;
  };

  GroupMover& mover_;
  std::vector<Move> by_issue_;             // sorted by issue_after
  std::vector<std::size_t> prefetch_need_; // indices into by_issue_ of prefetches, by needed_by
  std::unordered_map<GroupId, ArenaId> arenas_;
  std::vector<bool> issued_;
  std::size_t next_issue_ = 0;
  std::size_t next_need_ = 0;
  std::uint64_t misses_ = 0;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_poll_ = t0_;
  ExecutionLog log_;
  std::vector<Pending> pending_;
};

}  // namespace tierpack::gpu

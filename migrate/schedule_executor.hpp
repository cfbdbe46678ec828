// ScheduleExecutor: runs a Plan's migration schedule against a clock of the iteration, through a Mover
// (migrate/mover.hpp): the GPU tier's GroupMover and the host runtime's HostMover alike. Two clocks drive it.
//
// A tick clock (advance(); the GPU runtime: op indices, or the allocator's event count when no op observer
// is attached), where every value ends before the next begins. At each clock value c it first makes sure
// every prefetch with needed_by <= c has landed (Mover::land; a prefetch the plan issues too late is issued
// then), then issues every move with issue_after < c in schedule order. A move is issued once per
// iteration; end_iteration() issues what is left.
//
// Op events (op_begin() / op_end(); the host runtime): ops nest, so an op's end is its own issue point.
// When op o begins, the mover hears of it (Mover::reached: the host mover counts its late prefetches) and
// the prefetches needed by o land; when o ends, the moves with issue_after == o are issued, and only those:
// an outer op's moves wait for its end, and a prefetch needed before its op ended is not issued at the need
// (the host mover counts it late when it is still moving as a later op begins). begin_op_iteration()
// issues the moves due before the iteration (issue_after -1).
//
// It also logs what it did in the iteration (take_log): each move's issue and completion time and
// each prefetch the clock had to wait for, in nanoseconds from the iteration's beginning.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/plan.hpp"
#include "migrate/mover.hpp"

namespace tierpack {

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
  /// The clock's zero: when the iteration began for the executor (begin_iteration, begin_op_iteration).
  std::chrono::steady_clock::time_point began;
};

class ScheduleExecutor {
 public:
  /// Throws logic_error when the schedule moves a group the mover cannot move (Mover::moves).
  ScheduleExecutor(Mover& mover, std::vector<Move> schedule);

  /// Tick clock: resets the clock to 0 and acts on it (moves issued "before the iteration", prefetches
  /// needed at 0).
  void begin_iteration(MoveOrder stream);
  /// Tick clock: the clock reached `now` (monotonic within an iteration); `stream` is the compute stream
  /// whose work so far orders the copies.
  void advance(std::int64_t now, MoveOrder stream);
  /// Tick clock: issues every move not issued yet in this iteration.
  void end_iteration(MoveOrder stream);

  /// Op events: a new iteration's ops start; issues the moves due before the iteration.
  void begin_op_iteration();
  /// Op events: op `op` begins (the mover hears of it; the prefetches needed by it land).
  void op_begin(OpIndex op);
  /// Op events: op `op` ended; issues the moves with issue_after == op.
  void op_end(OpIndex op);
  /// Note [Away when the plan starts]: evicts now every group the schedule has on the host when an
  /// iteration begins (its last eviction comes after its last prefetch, or it has none). Call once,
  /// between the traced iteration and the first planned one. Returns how many evictions it issued.
  std::size_t evict_away_at_start(MoveOrder stream);

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
  /// This iteration's log so far, left in place: each move's `done` as of now (moves not over yet keep
  /// end_ns == start_ns).
  ExecutionLog log_so_far();

 private:
  void issue(const Move& m, MoveOrder stream);
  void restart();  // a new iteration: clock, log and what was issued start over
  /// Lands every prefetch needed by `now` not landed yet; `late_issue`: issues first one not issued yet.
  void land_needed(std::int64_t now, bool late_issue, MoveOrder stream);
  void index();  // sorts by_issue_ and rebuilds prefetch_need_ and issued_
  std::uint64_t now_ns() const;
  void poll_done(bool force);  // marks logged moves the mover has finished

  struct Pending {
    std::size_t log_index;
    GroupId group;
    std::uint64_t request;
  };

  Mover& mover_;
  std::vector<Move> by_issue_;             // sorted by issue_after
  std::vector<std::size_t> prefetch_need_; // indices into by_issue_ of prefetches, by needed_by
  std::vector<bool> issued_;
  std::size_t next_issue_ = 0;
  std::size_t next_need_ = 0;
  std::uint64_t misses_ = 0;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_poll_ = t0_;
  ExecutionLog log_;
  std::vector<Pending> pending_;
};

}  // namespace tierpack

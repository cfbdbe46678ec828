// Runs a migration schedule on an iteration clock through a Mover (see schedule_executor.hpp).
#include "migrate/schedule_executor.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace tierpack {

ScheduleExecutor::ScheduleExecutor(Mover& mover, std::vector<Move> schedule)
    : mover_(mover), by_issue_(std::move(schedule)) {
  for (const Move& m : by_issue_)
    TIERPACK_EXPECTS(mover_.moves(m.group),
                     "schedule moves group " + std::to_string(m.group) + " its mover cannot move");
  index();
}

void ScheduleExecutor::index() {
  std::stable_sort(by_issue_.begin(), by_issue_.end(),
                   [](const Move& a, const Move& b) { return a.issue_after < b.issue_after; });
  prefetch_need_.clear();
  for (std::size_t i = 0; i < by_issue_.size(); ++i)
    if (by_issue_[i].kind == MoveKind::prefetch) prefetch_need_.push_back(i);
  std::stable_sort(prefetch_need_.begin(), prefetch_need_.end(),
                   [&](std::size_t a, std::size_t b) { return by_issue_[a].needed_by < by_issue_[b].needed_by; });
  issued_.assign(by_issue_.size(), false);
  next_issue_ = next_need_ = 0;
}

// Note [Repairing the schedule]
// The plan's clock of a missed use is unknown, but bounded: the writer's kernel was enqueued before
// the gate that found its write, so by the time the report arrives the training thread's clock `at`
// is past it. The same use comes back at the same clock every iteration (the allocation sequence is
// the same), so an eviction issued after `at` copies after it. A round trip is the eviction of a
// group and its next prefetch (wrapping around the iteration end). For a write seen by an eviction:
// the eviction with the latest issue point before `at` moves to `at` unless that is at or past its
// prefetch's issue point; for one seen by a prefetch, the use came before the group was needed: the
// round trip holding it goes. Dropping keeps the group resident from then on: more device memory
// (the allocator spills over the budget if it must), never a lost write.
std::string ScheduleExecutor::repair(GroupId group, MoveKind kind, std::int64_t at) {
  std::vector<std::size_t> ev, pf;  // this group's moves in issue order
  for (std::size_t i = 0; i < by_issue_.size(); ++i) {
    if (by_issue_[i].group != group) continue;
    (by_issue_[i].kind == MoveKind::evict ? ev : pf).push_back(i);
  }
  if (ev.empty()) return "";
  // The round trip whose window holds `at`: the last eviction issued before it (or, wrapping, the
  // last of the iteration), and the first prefetch issued after that eviction (or, wrapping, the first).
  std::size_t e = ev.back();
  for (std::size_t i : ev)
    if (by_issue_[i].issue_after < at) e = i;
  std::size_t p = by_issue_.size();
  for (std::size_t i : pf)
    if (by_issue_[i].issue_after >= by_issue_[e].issue_after) {
      p = i;
      break;
    }
  if (p == by_issue_.size() && !pf.empty()) p = pf.front();
  const bool wraps = p == by_issue_.size() || by_issue_[p].issue_after < by_issue_[e].issue_after;
  const std::string name = "group " + std::to_string(group);
  if (kind == MoveKind::evict && by_issue_[e].issue_after < at && (wraps || at < by_issue_[p].issue_after)) {
    const std::int64_t was = by_issue_[e].issue_after;
    by_issue_[e].issue_after = static_cast<OpIndex>(at);
    index();
    return "the eviction of " + name + " now starts after clock " + std::to_string(at) + " (was " +
           std::to_string(was) + "): a use the plan missed";
  }
  std::vector<std::size_t> drop{e};
  if (p != by_issue_.size()) drop.push_back(p);
  std::sort(drop.rbegin(), drop.rend());
  for (std::size_t i : drop) by_issue_.erase(by_issue_.begin() + static_cast<std::ptrdiff_t>(i));
  index();
  return "the round trip of " + name + " around clock " + std::to_string(at) +
         " is dropped (it stays on the device): a use the plan missed";
}

std::uint64_t ScheduleExecutor::now_ns() const {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_).count());
}

void ScheduleExecutor::issue(const Move& m, MoveOrder stream) {
  const std::uint64_t request = mover_.submit(m, stream);
  ExecutedMove e;
  e.move = m;
  e.start_ns = e.end_ns = now_ns();
  pending_.push_back({log_.moves.size(), m.group, request});
  log_.moves.push_back(e);
}

// Asks the mover about pending moves at most every 0.2 ms (each question takes its lock).
void ScheduleExecutor::poll_done(bool force) {
  if (pending_.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_poll_ < std::chrono::microseconds(200)) return;
  last_poll_ = now;
  const std::uint64_t t = now_ns();
  std::erase_if(pending_, [&](const Pending& p) {
    if (!mover_.done(p.group, p.request)) return false;
    log_.moves[p.log_index].end_ns = t;
    log_.moves[p.log_index].done = true;
    return true;
  });
}

ExecutionLog ScheduleExecutor::take_log() {
  poll_done(true);
  const std::uint64_t t = now_ns();
  for (const Pending& p : pending_) log_.moves[p.log_index].end_ns = t;
  pending_.clear();  // what is still moving is not followed into the next iteration's log
  ExecutionLog out = std::move(log_);
  out.began = t0_;
  log_ = {};
  return out;
}

ExecutionLog ScheduleExecutor::log_so_far() {
  poll_done(true);
  ExecutionLog out = log_;
  out.began = t0_;
  return out;
}

void ScheduleExecutor::restart() {
  t0_ = last_poll_ = std::chrono::steady_clock::now();
  log_ = {};
  pending_.clear();
  std::fill(issued_.begin(), issued_.end(), false);
  next_issue_ = 0;
  next_need_ = 0;
}

void ScheduleExecutor::land_needed(std::int64_t now, bool late_issue, MoveOrder stream) {
  while (next_need_ < prefetch_need_.size() && by_issue_[prefetch_need_[next_need_]].needed_by <= now) {
    const std::size_t i = prefetch_need_[next_need_++];
    if (late_issue && !issued_[i]) {  // the plan asked for it too late: issue now, the landing below stalls
      issue(by_issue_[i], stream);
      issued_[i] = true;
    }
    const std::uint64_t t = now_ns();
    const Landing l = mover_.land(by_issue_[i]);
    if (!l.landed) ++misses_;
    if (l.waited) log_.stalls.push_back({now, by_issue_[i].group, t, now_ns() - t});
  }
}

void ScheduleExecutor::begin_iteration(MoveOrder stream) {
  restart();
  advance(0, stream);
}

void ScheduleExecutor::begin_op_iteration() {
  restart();
  op_end(kBeforeIteration);
}

void ScheduleExecutor::op_begin(OpIndex op) {
  mover_.reached(op);
  land_needed(op, false, 0);
  poll_done(false);
}

// Every move issued after `op`, each time it ends (an op index ends once an iteration).
void ScheduleExecutor::op_end(OpIndex op) {
  auto it = std::partition_point(by_issue_.begin(), by_issue_.end(), [&](const Move& m) { return m.issue_after < op; });
  for (; it != by_issue_.end() && it->issue_after == op; ++it) issue(*it, 0);
}

void ScheduleExecutor::advance(std::int64_t now, MoveOrder stream) {
  mover_.reached(now);
  land_needed(now, true, stream);
  poll_done(false);
  while (next_issue_ < by_issue_.size() && by_issue_[next_issue_].issue_after < now) {
    if (!issued_[next_issue_]) {
      issue(by_issue_[next_issue_], stream);
      issued_[next_issue_] = true;
    }
    ++next_issue_;
  }
}

// Note [Away when the plan starts]
// The plan describes a steady state: groups of persistent tensors leave after the optimizer has used
// them and come back in the next iteration's forward (their time away wraps around the iteration's end),
// and groups kept in host memory leave once for good. When the plan takes over, those have not left
// yet; left where they are, the first planned iteration starts with them on the device, well over
// the budget, and everything it allocates at first spills (GPT-2 large at 35% on the twin: ~1200 chunks
// of the first planned iteration). So they leave at once, before that iteration's first allocation.
std::size_t ScheduleExecutor::evict_away_at_start(MoveOrder stream) {
  std::unordered_map<GroupId, const Move*> last_evict;
  std::unordered_map<GroupId, std::int64_t> last_prefetch;
  for (const Move& m : by_issue_) {  // in issue order: the last one of a group wins
    if (m.kind == MoveKind::evict) {
      last_evict[m.group] = &m;
      continue;
    }
    auto [it, fresh] = last_prefetch.emplace(m.group, m.issue_after);
    if (!fresh) it->second = std::max<std::int64_t>(it->second, m.issue_after);
  }
  std::size_t n = 0;
  for (const auto& [group, evict] : last_evict) {
    auto pf = last_prefetch.find(group);
    // On the device when an iteration starts.
    if (pf != last_prefetch.end() && pf->second > evict->issue_after) continue;
    mover_.submit(*evict, stream);
    ++n;
  }
  return n;
}

void ScheduleExecutor::end_iteration(MoveOrder stream) {
  for (std::size_t i = 0; i < by_issue_.size(); ++i)
    if (!issued_[i]) {
      issue(by_issue_[i], stream);
      issued_[i] = true;
    }
  next_issue_ = by_issue_.size();
}

}  // namespace tierpack

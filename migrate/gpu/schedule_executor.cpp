// Runs a migration schedule on an iteration clock (see schedule_executor.hpp).
#include "migrate/gpu/schedule_executor.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace tierpack::gpu {

ScheduleExecutor::ScheduleExecutor(GroupMover& mover, std::vector<Move> schedule,
                                   std::unordered_map<GroupId, ArenaId> arenas)
    : mover_(mover), by_issue_(std::move(schedule)), arenas_(std::move(arenas)) {
  std::stable_sort(by_issue_.begin(), by_issue_.end(),
                   [](const Move& a, const Move& b) { return a.issue_after < b.issue_after; });
  for (const Move& m : by_issue_)
    TIERPACK_EXPECTS(arenas_.count(m.group) != 0, "schedule moves group " + std::to_string(m.group) + " with no arena");
  for (std::size_t i = 0; i < by_issue_.size(); ++i)
    if (by_issue_[i].kind == MoveKind::prefetch) prefetch_need_.push_back(i);
  std::stable_sort(prefetch_need_.begin(), prefetch_need_.end(),
                   [&](std::size_t a, std::size_t b) { return by_issue_[a].needed_by < by_issue_[b].needed_by; });
  issued_.assign(by_issue_.size(), false);
}

void ScheduleExecutor::issue(const Move& m, StreamHandle stream) {
  const ArenaId arena = arenas_.at(m.group);
  if (m.kind == MoveKind::evict) mover_.evict(arena, stream);
  else mover_.prefetch(arena, stream);
}

void ScheduleExecutor::begin_iteration(StreamHandle stream) {
  std::fill(issued_.begin(), issued_.end(), false);
  next_issue_ = 0;
  next_need_ = 0;
  advance(0, stream);
}

void ScheduleExecutor::advance(std::int64_t now, StreamHandle stream) {
  while (next_need_ < prefetch_need_.size() && by_issue_[prefetch_need_[next_need_]].needed_by <= now) {
    const std::size_t i = prefetch_need_[next_need_++];
    if (!issued_[i]) {  // the plan asked for it too late: issue now, the ensure below stalls
      issue(by_issue_[i], stream);
      issued_[i] = true;
    }
    if (!mover_.ensure_resident(arenas_.at(by_issue_[i].group))) ++misses_;
  }
  while (next_issue_ < by_issue_.size() && by_issue_[next_issue_].issue_after < now) {
    if (!issued_[next_issue_]) {
      issue(by_issue_[next_issue_], stream);
      issued_[next_issue_] = true;
    }
    ++next_issue_;
  }
}

void ScheduleExecutor::end_iteration(StreamHandle stream) {
  for (std::size_t i = 0; i < by_issue_.size(); ++i)
    if (!issued_[i]) {
      issue(by_issue_[i], stream);
      issued_[i] = true;
    }
  next_issue_ = by_issue_.size();
}

}  // namespace tierpack::gpu

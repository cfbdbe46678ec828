// The op timeline of a profiled iteration, as the placer and the simulator read it: when each op
// begins and ends (profile time, ns from the iteration's start), which ops are leaves (no op nested
// in them), and searches such as "the first op that begins after t". Nested ops (RecordFunction scopes
// such as Optimizer.step) overlap their children, so "ended by t" uses the running maximum of end times.
#pragma once

#include <cstdint>
#include <vector>

#include "core/profile.hpp"

namespace tierpack::placer {

/// The profile with every time in it (ops, tensors, the iteration) scaled so that the iteration lasts
/// `iteration_ns`: for profiles whose op times were stretched by the profiling itself (an op observer
/// in a GPU run times CPU-side launches), when the real step time is known (`--compute-time`). Op
/// order and every op's share of the iteration stay as profiled. Throws logic_error for ns <= 0 or a
/// profile without an iteration time.
Profile with_iteration_time(Profile profile, double iteration_ns);

class Timeline {
 public:
  explicit Timeline(const Profile& profile);

  OpIndex size() const { return static_cast<OpIndex>(begin_.size()); }
  double begin(OpIndex i) const { return begin_[static_cast<std::size_t>(i)]; }
  double end(OpIndex i) const { return end_[static_cast<std::size_t>(i)]; }
  double duration(OpIndex i) const { return end(i) - begin(i); }
  bool leaf(OpIndex i) const { return leaf_[static_cast<std::size_t>(i)]; }
  /// Length of the iteration: the profile's iteration_ns, or the last end when that is larger.
  double iteration_ns() const { return iteration_ns_; }

  /// The first op i >= from that begins at or after t; size() when there is none.
  OpIndex first_beginning_at(double t, OpIndex from) const;
  /// The last op p such that every op <= p has ended by t; -1 when none has.
  OpIndex last_ended_by(double t) const;
  /// Time at which op p and every op before it have ended (0 for p < 0).
  double ended_by(OpIndex p) const { return p < 0 ? 0.0 : ended_by_[static_cast<std::size_t>(p)]; }

 private:
  std::vector<double> begin_, end_, started_by_, ended_by_;
  std::vector<bool> leaf_;
  double iteration_ns_ = 0;
};

}  // namespace tierpack::placer

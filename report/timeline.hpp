// The report's time axis: maps op steps of the profiled iteration to nanoseconds, gives each
// tensor its live interval and its idle stretches (time between uses), and turns +/- byte events
// into stacked step series small enough to embed in a web page. See Note [Report time axis].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/profile.hpp"

namespace tierpack::report {

// Note [Report time axis]
// Every chart of the report uses op steps: step k (0 <= k < ops) runs from ops[k].begin_ns to
// ops[k+1].begin_ns; step -1 (before the first op) starts at 0 and the iteration ends at end_ns().
// A tensor is live from the start of its birth_op's step to the end of its death_op's step, the
// same rule Profile::peak_bytes() uses, so the peaks in the charts equal the profile's peaks.
// (A profile's birth_ns/death_ns are finer, but charts that disagree with the peak would mislead.)
class TimeAxis {
 public:
  explicit TimeAxis(const Profile& profile);

  OpIndex ops() const { return static_cast<OpIndex>(begin_.size()); }
  /// Start of step k, k in [-1, ops()]; step ops() starts (and ends) at end_ns().
  double step_begin(OpIndex k) const;
  double step_end(OpIndex k) const { return step_begin(k + 1); }
  double end_ns() const { return end_; }
  /// Live interval of a tensor (see the note above).
  double tensor_begin(const TensorRecord& t) const { return step_begin(clamp(t.birth_op)); }
  double tensor_end(const TensorRecord& t) const;
  /// Time window of op k itself (its begin to its end).
  double op_begin(OpIndex k) const;
  double op_end(OpIndex k) const;
  /// Step containing time t (the last step whose begin is <= t), in [-1, ops()-1].
  OpIndex step_at(double t) const;

 private:
  OpIndex clamp(OpIndex k) const;
  std::vector<double> begin_;  ///< monotone begin of each op
  std::vector<double> op_end_;
  double end_ = 0;
};

/// A stretch in which a live tensor is not used by any op.
struct IdleGap {
  double begin_ns = 0;
  double end_ns = 0;
  double length_ns = 0;   ///< for a wrap-around gap: tail + head of the iteration
  bool wraps = false;     ///< persistent tensor: last use -> end of iteration -> first use
  bool ends_in_death = false;
};

/// Idle gaps of one tensor, in time order. A tensor alive across the iteration boundary has one
/// wrap-around gap (from its last use to its first use in the next iteration), reported twice:
/// once for its head part and once for its tail part, both with the full length.
std::vector<IdleGap> idle_gaps(const TensorRecord& t, const TimeAxis& axis);

/// Stacked step series: one value per series at each point; point i holds from t[i] to t[i+1].
struct StackedSeries {
  std::vector<std::string> names;
  std::vector<double> t;                          ///< ns
  double end_ns = 0;                              ///< where the last point ends
  std::vector<std::vector<std::uint64_t>> values; ///< values[series][point]

  /// Highest sum over series at any point.
  std::uint64_t peak_total() const;
  std::uint64_t peak_of(std::size_t series) const;
};

/// Builds a StackedSeries from +/- events. Events with the same (time, order) land in one point;
/// different orders at the same time stay separate points (zero-width op steps keep their peaks).
class SeriesBuilder {
 public:
  explicit SeriesBuilder(std::vector<std::string> names) : names_(std::move(names)) {}
  void add(double t_ns, std::int64_t order, std::size_t series, std::int64_t delta);
  /// Absolute value of one series from this time on (for sampled counters).
  void set(double t_ns, std::int64_t order, std::size_t series, std::uint64_t value);
  StackedSeries build(double end_ns) const;

 private:
  struct Event {
    double t;
    std::int64_t order;
    std::size_t series;
    std::int64_t delta;
    bool absolute;
  };
  std::vector<std::string> names_;
  std::vector<Event> events_;
};

/// Reduces a series to at most max_points points, keeping in each bucket the point with the
/// largest total (so the stacked peak survives).
StackedSeries downsample(const StackedSeries& s, std::size_t max_points);

}  // namespace tierpack::report

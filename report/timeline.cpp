// Time axis, idle gaps and stacked step series for the report (see timeline.hpp).
#include "report/timeline.hpp"

#include <algorithm>
#include <numeric>

namespace tierpack::report {

TimeAxis::TimeAxis(const Profile& profile) {
  begin_.reserve(profile.ops.size());
  op_end_.reserve(profile.ops.size());
  double running = 0;
  for (const auto& op : profile.ops) {
    // Ops are recorded in begin order; a clock hiccup must not make the axis run backwards.
    running = std::max(running, static_cast<double>(op.begin_ns));
    begin_.push_back(running);
    op_end_.push_back(std::max(running, static_cast<double>(op.end_ns)));
    end_ = std::max(end_, op_end_.back());
  }
  end_ = std::max(end_, static_cast<double>(profile.iteration_ns));
}

OpIndex TimeAxis::clamp(OpIndex k) const { return std::clamp<OpIndex>(k, -1, ops()); }

double TimeAxis::step_begin(OpIndex k) const {
  k = clamp(k);
  if (k < 0) return 0;
  if (k >= ops()) return end_;
  return begin_[static_cast<std::size_t>(k)];
}

double TimeAxis::tensor_end(const TensorRecord& t) const {
  if (t.death_op == kAfterIteration) return end_;
  return step_end(clamp(t.death_op));
}

double TimeAxis::op_begin(OpIndex k) const { return step_begin(k); }

double TimeAxis::op_end(OpIndex k) const {
  k = clamp(k);
  if (k < 0) return 0;
  if (k >= ops()) return end_;
  return op_end_[static_cast<std::size_t>(k)];
}

OpIndex TimeAxis::step_at(double t) const {
  auto it = std::upper_bound(begin_.begin(), begin_.end(), t);
  return static_cast<OpIndex>(it - begin_.begin()) - 1;
}

std::vector<IdleGap> idle_gaps(const TensorRecord& t, const TimeAxis& axis) {
  std::vector<IdleGap> gaps;
  const double born = axis.tensor_begin(t), dies = axis.tensor_end(t);
  const bool across = t.birth_op == kBeforeIteration && t.death_op == kAfterIteration;
  const bool dies_inside = t.death_op != kAfterIteration;
  std::vector<OpIndex> uses;
  uses.reserve(t.uses.size());
  for (OpIndex u : t.uses)
    if ((t.birth_op == kBeforeIteration || u >= t.birth_op) && (!dies_inside || u <= t.death_op) &&
        (uses.empty() || uses.back() != u))
      uses.push_back(u);
  auto push = [&](double b, double e, double len, bool wraps, bool death) {
    if (len > 0 && e >= b) gaps.push_back({b, e, len, wraps, death});
  };
  if (uses.empty()) {
    push(born, dies, dies - born, across, dies_inside);
    return gaps;
  }
  const double head = axis.op_begin(uses.front()) - born;
  const double tail = dies - axis.op_end(uses.back());
  const double wrap = head + tail;
  push(born, axis.op_begin(uses.front()), across ? wrap : head, across, false);
  for (std::size_t i = 1; i < uses.size(); ++i) {
    const double b = axis.op_end(uses[i - 1]), e = axis.op_begin(uses[i]);
    push(b, e, e - b, false, false);
  }
  push(axis.op_end(uses.back()), dies, across ? wrap : tail, across, dies_inside);
  return gaps;
}

std::uint64_t StackedSeries::peak_total() const {
  std::uint64_t peak = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    std::uint64_t sum = 0;
    for (const auto& v : values) sum += v[i];
    peak = std::max(peak, sum);
  }
  return peak;
}

std::uint64_t StackedSeries::peak_of(std::size_t series) const {
  const auto& v = values.at(series);
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

void SeriesBuilder::add(double t_ns, std::int64_t order, std::size_t series, std::int64_t delta) {
  events_.push_back({t_ns, order, series, delta, false});
}

void SeriesBuilder::set(double t_ns, std::int64_t order, std::size_t series, std::uint64_t value) {
  events_.push_back({t_ns, order, series, static_cast<std::int64_t>(value), true});
}

StackedSeries SeriesBuilder::build(double end_ns) const {
  std::vector<std::size_t> idx(events_.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    const auto &x = events_[a], &y = events_[b];
    return x.t != y.t ? x.t < y.t : x.order < y.order;
  });
  StackedSeries s;
  s.names = names_;
  s.end_ns = end_ns;
  s.values.assign(names_.size(), {});
  std::vector<std::int64_t> cur(names_.size(), 0);
  auto emit = [&](double t) {
    s.t.push_back(t);
    for (std::size_t k = 0; k < cur.size(); ++k) s.values[k].push_back(static_cast<std::uint64_t>(std::max<std::int64_t>(cur[k], 0)));
  };
  if (idx.empty() || events_[idx.front()].t > 0) emit(0);
  for (std::size_t i = 0; i < idx.size();) {
    const auto& head = events_[idx[i]];
    std::size_t j = i;
    for (; j < idx.size() && events_[idx[j]].t == head.t && events_[idx[j]].order == head.order; ++j) {
      const auto& e = events_[idx[j]];
      if (e.absolute) cur[e.series] = e.delta;
      else cur[e.series] += e.delta;
    }
    emit(head.t);
    i = j;
  }
  return s;
}

StackedSeries downsample(const StackedSeries& s, std::size_t max_points) {
  if (s.t.size() <= max_points || max_points < 2) return s;
  StackedSeries out;
  out.names = s.names;
  out.end_ns = s.end_ns;
  out.values.assign(s.values.size(), {});
  const double t0 = s.t.front(), span = std::max(s.end_ns - t0, 1.0);
  const double width = span / static_cast<double>(max_points);
  std::size_t i = 0;
  while (i < s.t.size()) {
    const auto bucket = static_cast<std::size_t>((s.t[i] - t0) / width);
    std::size_t best = i;
    std::uint64_t best_sum = 0;
    std::size_t j = i;
    for (; j < s.t.size() && static_cast<std::size_t>((s.t[j] - t0) / width) == bucket; ++j) {
      std::uint64_t sum = 0;
      for (const auto& v : s.values) sum += v[j];
      if (j == i || sum > best_sum) best = j, best_sum = sum;
    }
    out.t.push_back(s.t[i]);  // the bucket starts where its first point starts
    for (std::size_t k = 0; k < s.values.size(); ++k) out.values[k].push_back(s.values[k][best]);
    i = j;
  }
  return out;
}

}  // namespace tierpack::report

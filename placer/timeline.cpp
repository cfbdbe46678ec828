// Op timeline queries (see timeline.hpp).
#include "placer/timeline.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace tierpack::placer {

Profile with_iteration_time(Profile p, double iteration_ns) {
  TIERPACK_EXPECTS(iteration_ns > 0, "the iteration time must be positive");
  if (p.iteration_ns == 0) throw logic_error("the profile has no iteration time to scale");
  const double f = iteration_ns / static_cast<double>(p.iteration_ns);
  auto scale = [f](std::uint64_t& t) { t = static_cast<std::uint64_t>(static_cast<double>(t) * f + 0.5); };
  for (OpRecord& op : p.ops) {
    scale(op.begin_ns);
    scale(op.end_ns);
  }
  for (TensorRecord& t : p.tensors) {
    scale(t.birth_ns);
    scale(t.death_ns);
  }
  for (IterationInfo& it : p.iterations) scale(it.duration_ns);
  scale(p.iteration_ns);
  return p;
}

Timeline::Timeline(const Profile& profile) {
  const std::size_t n = profile.ops.size();
  begin_.resize(n);
  end_.resize(n);
  started_by_.resize(n);
  ended_by_.resize(n);
  leaf_.assign(n, true);
  double sb = 0, eb = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& op = profile.ops[i];
    begin_[i] = static_cast<double>(op.begin_ns);
    end_[i] = static_cast<double>(op.end_ns);
    sb = std::max(sb, begin_[i]);
    eb = std::max(eb, end_[i]);
    started_by_[i] = sb;
    ended_by_[i] = eb;
    if (op.parent >= 0 && static_cast<std::size_t>(op.parent) < n) leaf_[static_cast<std::size_t>(op.parent)] = false;
  }
  iteration_ns_ = std::max(static_cast<double>(profile.iteration_ns), eb);
}

OpIndex Timeline::first_beginning_at(double t, OpIndex from) const {
  if (from >= size()) return size();
  const auto it = std::lower_bound(started_by_.begin() + std::max<OpIndex>(from, 0), started_by_.end(), t);
  return static_cast<OpIndex>(it - started_by_.begin());
}

OpIndex Timeline::last_ended_by(double t) const {
  const auto it = std::upper_bound(ended_by_.begin(), ended_by_.end(), t);
  return static_cast<OpIndex>(it - ended_by_.begin()) - 1;
}

}  // namespace tierpack::placer

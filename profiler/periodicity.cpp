// Iteration period detection (see periodicity.hpp, Note [Periodicity]).
#include "profiler/periodicity.hpp"

#include <algorithm>

namespace tierpack {
namespace {
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

PeriodDetector::PeriodDetector(Options options) : options_(options) {}

std::uint64_t PeriodDetector::backward_run(std::uint64_t i, std::uint64_t p, std::uint64_t limit) const {
  std::uint64_t r = 0;
  for (std::uint64_t j = i; j >= p && r < limit; --j) {
    if (values_[j] != values_[j - p]) break;
    ++r;
    if (j == p) break;
  }
  return r;
}

bool PeriodDetector::feed(std::uint64_t key, std::uint64_t live_before) {
  if (found_ || gave_up_) return false;
  if (values_.size() >= options_.max_history) {
    gave_up_ = true;
    values_ = {};
    live_ = {};
    last_ = {};
    return false;
  }
  const std::uint64_t i = values_.size();
  const std::uint64_t v = mix(key ^ mix(live_before));
  values_.push_back(v);
  live_.push_back(live_before);
  if (candidate_ > 0) {
    if (values_[i - candidate_] == v) {
      ++run_;
    } else {
      candidate_ = 0;
      run_ = 0;
    }
  }
  auto it = last_.find(v);
  if (candidate_ == 0 && it != last_.end()) {
    const std::uint64_t p = i - it->second;
    if (p >= options_.min_period) {
      candidate_ = p;
      // Enough to decide now; the count keeps growing one by one afterwards.
      run_ = backward_run(i, p, std::max<std::uint64_t>(2 * p, (i + 1) / 2) + 1);
    }
  }
  if (it != last_.end()) it->second = i;
  else last_.emplace(v, i);

  if (candidate_ == 0 || run_ < 2 * candidate_ || run_ < (i + 1) / 2) return false;
  // Accepted. The periodic stretch covers [i - run_ + 1 - P, i]; put the boundary at the point of
  // least live memory within its first period.
  const std::uint64_t p = candidate_;
  const std::uint64_t start = i + 1 - run_ - p;
  std::uint64_t best = start;
  for (std::uint64_t q = start; q < start + p; ++q)
    if (live_[q] < live_[best]) best = q;
  period_ = p;
  boundary_ = best;
  found_ = true;
  values_ = {};
  live_ = {};
  last_ = {};
  return true;
}

}  // namespace tierpack

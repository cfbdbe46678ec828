// Fluid simulation of the copy engine (see copy_engine.hpp).
#include "placer/copy_engine.hpp"

#include <algorithm>

namespace tierpack::placer {

CopyEngine::CopyEngine(const CostModel& cost, Hooks hooks) : cost_(cost), hooks_(std::move(hooks)) {}

void CopyEngine::submit(std::size_t job, bool to_fast, std::uint64_t bytes) {
  queue_[channel_of(to_fast)].push_back({job, to_fast, bytes});
}

bool CopyEngine::idle() const {
  return queue_[0].empty() && queue_[1].empty() && !active_[0].busy && !active_[1].busy;
}

void CopyEngine::start_ready() {
  for (std::size_t ch = 0; ch < 2; ++ch) {
    while (!active_[ch].busy && !queue_[ch].empty()) {
      auto& q = queue_[ch];
      auto pick = q.begin();
      if (pick->to_fast && !force_ && !hooks_.can_start(pick->id)) {
        // Copies to the fast tier wait in order for memory. On a shared (half-duplex) queue an
        // eviction behind them may go first: it is what frees the memory they wait for.
        pick = std::find_if(q.begin(), q.end(), [](const Job& j) { return !j.to_fast; });
        if (pick == q.end()) break;
      }
      const Job j = *pick;
      if (j.to_fast) force_ = false;
      q.erase(pick);
      active_[ch] = {true, j, cost_.move_overhead_ns, static_cast<double>(j.bytes)};
      hooks_.started(j.id, now_);
      if (j.bytes == 0 && active_[ch].setup_left <= 0) {
        active_[ch].busy = false;
        hooks_.finished(j.id, now_);
      }
    }
  }
}

double CopyEngine::rate(std::size_t ch) const {
  const bool to_fast = active_[ch].job.to_fast;
  const std::size_t other = 1 - ch;
  const bool both = cost_.full_duplex && active_[other].busy && active_[other].setup_left <= 0;
  return both ? cost_.shared_rate(to_fast) : (to_fast ? cost_.to_fast_bytes_per_ns : cost_.to_slow_bytes_per_ns);
}

double CopyEngine::time_to_event(std::size_t ch) const {
  const auto& a = active_[ch];
  if (!a.busy) return kNever;
  if (a.setup_left > 0) return a.setup_left;
  return a.bytes_left / rate(ch);
}

double CopyEngine::next_event() {
  start_ready();
  const double dt = std::min(time_to_event(0), time_to_event(1));
  return dt == kNever ? kNever : now_ + dt;
}

bool CopyEngine::force_next() {
  for (auto& q : queue_)
    if (!q.empty() && q.front().to_fast) {
      force_ = true;
      return true;
    }
  return false;
}

void CopyEngine::advance_to(double t) {
  for (;;) {
    start_ready();
    const double dt = std::min(time_to_event(0), time_to_event(1));
    if (dt == kNever) {
      if (t != kNever) now_ = std::max(now_, t);
      return;
    }
    // Compare event times, not step lengths: at large times now_ + dt can round to now_.
    const bool reaches_event = t == kNever || now_ + dt <= t;
    const double step = reaches_event ? dt : std::max(0.0, t - now_);
    // Rates are fixed between events; compute them before anything changes.
    const double r0 = active_[0].busy && active_[0].setup_left <= 0 ? rate(0) : 0;
    const double r1 = active_[1].busy && active_[1].setup_left <= 0 ? rate(1) : 0;
    const double rates[2] = {r0, r1};
    for (std::size_t ch = 0; ch < 2; ++ch) {
      auto& a = active_[ch];
      if (!a.busy) continue;
      if (a.setup_left > 0) a.setup_left = std::max(0.0, a.setup_left - step);
      else a.bytes_left = std::max(0.0, a.bytes_left - rates[ch] * step);
    }
    now_ = reaches_event ? now_ + dt : std::max(now_, t);
    if (!reaches_event) return;  // reached t before the next event
    for (std::size_t ch = 0; ch < 2; ++ch) {
      auto& a = active_[ch];
      if (a.busy && a.setup_left <= 0 && a.bytes_left <= 1e-6 + 1e-9 * static_cast<double>(a.job.bytes)) {
        a.busy = false;
        hooks_.finished(a.job.id, now_);
      }
    }
  }
}

}  // namespace tierpack::placer

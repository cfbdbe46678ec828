// Iterations in the event recorder: where one ends (explicit marks, optimizer steps, or a period
// found in the allocation sequence: Note [Iteration boundaries] in event_recorder.hpp), the
// per-iteration signature, and the checks that tell a later iteration apart from the profiled one
// (Note [Tensor identity]).
#include <string>

#include "profiler/detail/event_recorder_impl.hpp"

namespace tierpack {
using namespace detail;

namespace {

std::string device_name(int device) { return device < 0 ? "host" : "cuda:" + std::to_string(device); }

}  // namespace

std::uint64_t EventRecorder::Impl::iteration_signature() const {
  std::uint64_t h = kSeed;
  for (const auto& [dev, s] : seqs) h = mix(h ^ mix(static_cast<std::uint64_t>(dev + 2) ^ s.hash ^ mix(s.count)));
  return h;
}

// ---- divergence against the profiled iteration ----
void EventRecorder::Impl::check_alloc(int device, std::int64_t seq, std::uint64_t bytes, std::uint32_t name) {
  if (profiled < 0 || !recorded || iteration <= profiled || iter_diverged) return;
  const auto& seq_ref = ref[device];
  std::string reason;
  if (static_cast<std::size_t>(seq) >= seq_ref.size()) {
    reason = "extra allocation of " + std::to_string(bytes) + " B at seq " + std::to_string(seq) + " on " +
             device_name(device) + " (" + names[name] + "); the profiled iteration had " +
             std::to_string(seq_ref.size());
  } else {
    const auto& [rb, rn] = seq_ref[static_cast<std::size_t>(seq)];
    if (rb != bytes)
      reason = "size " + std::to_string(bytes) + " != " + std::to_string(rb) + " at seq " + std::to_string(seq) +
               " on " + device_name(device) + " (" + names[name] + ")";
    else if (rn != name && rn != 0 && name != 0)
      reason = "op " + names[name] + " != " + names[rn] + " at seq " + std::to_string(seq) + " on " + device_name(device);
  }
  if (!reason.empty()) diverge(seq, std::move(reason));
}

void EventRecorder::Impl::check_counts() {
  if (profiled < 0 || !recorded || iteration <= profiled || iter_diverged) return;
  for (const auto& [dev, r] : ref) {
    const auto it = seqs.find(dev);
    const std::int64_t n = it == seqs.end() ? 0 : it->second.count;
    if (static_cast<std::size_t>(n) < r.size()) {
      diverge(n, std::to_string(n) + " allocations on " + device_name(dev) + ", the profiled iteration had " +
                     std::to_string(r.size()));
      return;
    }
  }
}

void EventRecorder::Impl::diverge(std::int64_t seq, std::string reason) {
  iter_diverged = true;
  ++divergent;
  if (divergences.size() < 1000) divergences.push_back(Divergence{iteration, seq, std::move(reason)});
}

// ---- iteration boundaries ---------------------------------------------------------------------

void EventRecorder::end_iteration() {
  Impl& m = *impl_;
  const std::uint64_t now = now_ns();
  IterationInfo info;
  info.index = m.iteration;
  info.duration_ns = now - m.iter_start;
  info.allocations = m.iter_allocs;
  info.signature = m.iteration_signature();
  if (state_.load() == kRecording) {
    stop_recording(false);
  } else {
    m.check_counts();
  }
  info.matches_profiled = !m.iter_diverged;
  if (m.infos.size() < 100000) m.infos.push_back(info);
  ++m.iteration;
  iterations_.store(m.iteration, std::memory_order_relaxed);
  if (m.source) last_source_.store(static_cast<std::uint8_t>(*m.source), std::memory_order_relaxed);
  m.iter_start = now;
  m.seqs.clear();
  m.iter_allocs = 0;
  m.iter_diverged = false;
  if (m.profiled < 0 && m.iteration >= options_.warmup_iterations) start_recording();
  if (m.profiled >= 0 && m.recorded && m.iteration >= m.profiled + options_.profile_iterations)
    ready_.store(true, std::memory_order_release);
  if (options_.max_iterations > 0 && m.iteration >= options_.max_iterations && state_.load() != kRecording)
    state_.store(kDone);
}

void EventRecorder::mark_iteration(IterationSource source) noexcept {
  if (!active()) return;
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  const auto st = state_.load();
  if (st == kIdle || st == kDone) return;
  try {
    if (m.period > 0 || (source == IterationSource::optimizer_step && m.explicit_seen)) {
      ++m.ignored_marks;
      return;
    }
    if (source == IterationSource::explicit_mark) m.explicit_seen = true;
    m.any_mark = true;
    m.detector.reset();
    m.history = {};
    m.source = source;
    end_iteration();
  } catch (const std::exception& e) {
    m.warn(std::string("iteration mark dropped: ") + e.what());
  }
}

/// Periodicity found: the detector says where iterations start. Reconstruct the iterations seen so
/// far from the allocation history and continue counting from there.
void EventRecorder::adopt_period() {
  Impl& m = *impl_;
  const std::uint64_t p = m.detector->period();
  const std::uint64_t b = m.detector->boundary();
  const std::uint64_t pos = m.total_allocs;  // allocations so far, including the current one
  m.period = p;
  m.source = IterationSource::periodicity;
  // Iteration 0 is [0, b) (setup) when b > 0; then one iteration per period.
  std::vector<std::uint64_t> starts;
  if (b > 0) starts.push_back(0);
  for (std::uint64_t s = b; s < pos; s += p) starts.push_back(s);
  m.infos.clear();
  for (std::size_t k = 0; k + 1 < starts.size(); ++k) {
    std::map<int, Impl::DevSeq> seqs;
    for (std::uint64_t i = starts[k]; i < starts[k + 1]; ++i) {
      auto& s = seqs[m.history[i].device];
      s.hash = mix(s.hash ^ mix(m.history[i].bytes));
      ++s.count;
    }
    std::swap(seqs, m.seqs);
    IterationInfo info;
    info.index = static_cast<std::int32_t>(k);
    info.duration_ns = m.history[starts[k + 1]].t - m.history[starts[k]].t;
    info.allocations = static_cast<std::uint32_t>(starts[k + 1] - starts[k]);
    info.signature = m.iteration_signature();
    m.infos.push_back(info);
    std::swap(seqs, m.seqs);
  }
  // The current iteration: from the last start to now.
  m.iteration = static_cast<std::int32_t>(starts.size() - 1);
  iterations_.store(m.iteration, std::memory_order_relaxed);
  last_source_.store(static_cast<std::uint8_t>(IterationSource::periodicity), std::memory_order_relaxed);
  m.seqs.clear();
  for (std::uint64_t i = starts.back(); i < pos; ++i) {
    auto& s = m.seqs[m.history[i].device];
    s.hash = mix(s.hash ^ mix(m.history[i].bytes));
    ++s.count;
  }
  m.iter_allocs = static_cast<std::uint32_t>(pos - starts.back());
  m.iter_start = m.history[starts.back()].t;
  m.next_boundary = starts.back() + p;
  m.detector.reset();
  m.history = {};
}

}  // namespace tierpack

// The event recorder (see event_recorder.hpp for the states, tensor identity and iteration sources):
// construction, start, and the results (snapshot, finish, stats). Its state is
// detail/event_recorder_impl.hpp, which lists the files of the rest.
#include "profiler/event_recorder.hpp"

#include <unistd.h>

#include <ctime>

#include "core/discovery/topology_discovery.hpp"
#include "core/error.hpp"
#include "core/version.hpp"
#include "profiler/detail/event_recorder_impl.hpp"

namespace tierpack {
using namespace detail;

std::string_view to_string(IterationSource s) {
  switch (s) {
    case IterationSource::optimizer_step: return "optimizer-step";
    case IterationSource::explicit_mark: return "explicit";
    case IterationSource::periodicity: return "periodicity";
  }
  return "?";
}

namespace {

/// Records nothing: used when no tracer is given, so pages still get counted, shared pages found from
/// the layout, and residency read.
class NullTracer final : public PageTracer {
 public:
  std::string_view name() const override { return "none"; }
  bool sees_reads() const override { return false; }
  void track(void*, std::size_t) override {}
  void untrack(void*, std::size_t) noexcept override {}
  void end_window(std::vector<PageTouch>&) override {}
};

}  // namespace

EventRecorder::EventRecorder(RecorderOptions options, std::unique_ptr<PageTracer> tracer)
    : options_(std::move(options)), impl_(std::make_unique<Impl>()) {
  TIERPACK_EXPECTS(options_.warmup_iterations >= 0, "warmup_iterations must be >= 0");
  TIERPACK_EXPECTS(options_.profile_iterations >= 1, "profile_iterations must be >= 1");
  impl_->tracer = tracer ? std::move(tracer) : std::make_unique<NullTracer>();
  const long ps = ::sysconf(_SC_PAGESIZE);
  impl_->page_size = ps > 0 ? static_cast<std::size_t>(ps) : 4096;
}

EventRecorder::~EventRecorder() {
  state_.store(kDone);
  std::lock_guard lock(impl_->mu);
  impl_->join.reset();  // untracks whatever is still watched
}

void EventRecorder::start() {
  std::lock_guard lock(impl_->mu);
  if (state_.load() != kIdle) return;
  impl_->iter_start = now_ns();
  // With no warm-up the recording starts now and runs until the first mark (or the end).
  if (options_.detect_periodicity && options_.warmup_iterations > 0) impl_->detector = std::make_unique<PeriodDetector>();
  state_.store(kObserving);
  if (options_.warmup_iterations == 0) start_recording();
}

// ---- results ------------------------------------------------------------------------------------

Profile EventRecorder::snapshot() {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  if (state_.load() == kRecording) {
    // The run ends inside the profiled iteration: close it where it is.
    IterationInfo info;
    info.index = m.iteration;
    info.duration_ns = now_ns() - m.iter_start;
    info.allocations = m.iter_allocs;
    info.signature = m.iteration_signature();
    stop_recording(true);
    m.infos.push_back(info);
    ++m.iteration;
    iterations_.store(m.iteration, std::memory_order_relaxed);
    m.seqs.clear();
    m.iter_allocs = 0;
  }
  if (!m.recorded) {
    throw logic_error("no iteration was profiled: " + std::to_string(m.iteration) + " iteration(s) ended, warm-up is " +
                      std::to_string(options_.warmup_iterations) +
                      (m.any_mark || m.period > 0
                           ? std::string(" (run more iterations or lower the warm-up)")
                           : std::string(" and no iteration boundary was seen (no optimizer step, no tierpack.step(), "
                                         "no periodic allocation pattern): call tierpack.step() after each "
                                         "iteration, or use --warmup 0 to profile the whole run")));
  }
  build_profile();
  if (!m.finalized) {
    // First snapshot after the recording: the topology (for page residency -> tier) and the join.
    if (options_.discover_topology) {
      try {
        m.built.topology = discover_topology();
      } catch (const std::exception& e) {
        m.warn(std::string("topology discovery failed: ") + e.what());
      }
    } else {
      m.built.topology = options_.topology;
    }
    finalize_pages(m.built);
    m.finalized = true;
  }
  Profile p = m.built;
  if (p.meta.page_tracer.empty()) p.meta.page_tracer = std::string(m.tracer->name());
  for (auto& t : p.tensors) {
    if (t.device >= 0) {
      for (const auto& tier : p.topology.tiers)
        if (tier.kind == TierKind::gpu && tier.device == t.device) t.tier = tier.id;
    } else if (t.tier != kNoTier && t.tier >= p.topology.tiers.size()) {
      t.tier = kNoTier;
    }
  }
  if (m.profile_id.empty()) m.profile_id = new_profile_id();
  p.meta.id = m.profile_id;
  p.meta.tool_version = TIERPACK_VERSION;
  p.meta.command = options_.command;
  p.meta.framework = options_.framework;
  p.meta.host_page_size = m.page_size;
  p.meta.created_unix = static_cast<std::int64_t>(std::time(nullptr));
  p.meta.iterations_observed = m.iteration;
  p.meta.profiled_iteration = m.profiled;
  p.meta.iteration_source = !m.source ? "whole-run" : std::string(to_string(*m.source));
  p.iterations = m.infos;
  for (auto& info : p.iterations)
    if (info.index < m.profiled) info.matches_profiled = info.signature == m.profiled_signature;
  p.divergences = m.divergences;
  return p;
}

Profile EventRecorder::finish() {
  {
    std::lock_guard lock(impl_->mu);
    if (state_.load() != kRecording) state_.store(kDone);
  }
  Profile p = snapshot();
  state_.store(kDone);
  return p;
}

RecorderStats EventRecorder::stats() const {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  RecorderStats s;
  s.iterations = m.iteration;
  s.profiled_iteration = m.profiled;
  s.recording = state_.load() == kRecording;
  s.profile_ready = ready_.load();
  s.iteration_source = m.source ? std::string(to_string(*m.source)) : std::string();
  s.recorded_ops = s.recording ? m.ops.size() : m.build_pending ? m.done_ops.size() : m.built.ops.size();
  s.recorded_tensors = s.recording ? m.tensors.size() : m.build_pending ? m.done_tensors.size() : m.built.tensors.size();
  s.live_allocations = m.live.size();
  s.ignored_marks = m.ignored_marks;
  s.divergent_iterations = m.divergent;
  s.page_windows = m.join ? m.join->windows() : m.page_windows;
  s.watched_bytes = m.join ? m.join->watched_bytes() : m.watched_bytes;
  s.tracer = m.tracer->stats();
  s.warnings = m.warnings;
  return s;
}

}  // namespace tierpack

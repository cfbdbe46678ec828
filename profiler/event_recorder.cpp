// The event recorder (see event_recorder.hpp for the states, tensor identity and iteration sources).
#include "profiler/event_recorder.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <ctime>
#include <map>
#include <optional>
#include <thread>
#include <unordered_map>

#include "core/discovery/topology_discovery.hpp"
#include "core/error.hpp"
#include "core/version.hpp"
#include "profiler/page_join.hpp"
#include "profiler/periodicity.hpp"
#include "profiler/tensor_lifetime.hpp"

namespace tierpack {

std::string_view to_string(IterationSource s) {
  switch (s) {
    case IterationSource::optimizer_step: return "optimizer-step";
    case IterationSource::explicit_mark: return "explicit";
    case IterationSource::periodicity: return "periodicity";
  }
  return "?";
}

namespace {

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

constexpr std::uint64_t kSeed = 0x7469657270616b31ull;  // "tierpak1"

std::string device_name(int device) { return device < 0 ? "host" : "cuda:" + std::to_string(device); }

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

struct NameHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

SourceRef as_ref(const SourceLocation& s) { return {s.file, s.line, s.function}; }
const SourceRef& as_ref(const SourceRef& s) { return s; }

/// Allocation sources keyed by content; lookups with a SourceRef build no string.
struct SourceHash {
  using is_transparent = void;
  template <class S>
  std::size_t operator()(const S& s) const {
    const SourceRef r = as_ref(s);
    return std::hash<std::string_view>{}(r.file) ^ (std::hash<std::string_view>{}(r.function) * 31) ^
           (static_cast<std::size_t>(r.line) * 0x9e3779b97f4a7c15ull);
  }
};
struct SourceEq {
  using is_transparent = void;
  template <class A, class B>
  bool operator()(const A& a, const B& b) const {
    const SourceRef x = as_ref(a), y = as_ref(b);
    return x.line == y.line && x.file == y.file && x.function == y.function;
  }
};
constexpr std::size_t kMaxSources = 1u << 20;  // distinct sources kept; more are recorded as unknown

}  // namespace

struct EventRecorder::Impl {
  // ---- everything below is guarded by mu ----
  std::mutex mu;
  std::unique_ptr<PageTracer> tracer;
  std::unique_ptr<PageJoin> join;
  std::size_t page_size = 4096;

  // Op names, interned: id 0 is "" (no op).
  std::unordered_map<std::string, std::uint32_t, NameHash, std::equal_to<>> name_ids;
  std::vector<std::string> names{""};
  std::vector<std::uint64_t> name_hashes{0};

  // Allocation sources, interned: index into `sources` (-1 unknown). Kept for the whole run (live
  // tensors born in warm-up refer to them); build_profile() copies the ones the profile uses.
  std::unordered_map<SourceLocation, std::int32_t, SourceHash, SourceEq> source_ids;
  std::vector<SourceLocation> sources;

  struct Live {
    std::uint64_t bytes = 0;
    int device = -1;
    std::uint64_t stream = 0;
    std::uint32_t name = 0;
    std::int32_t source = -1;
    std::uint32_t flags = 0;
    std::int64_t tensor = -1;  ///< id in the recorded iteration, -1 if not part of it
    bool trackable = false;
  };
  std::map<std::uintptr_t, Live> live;
  std::map<int, std::uint64_t> live_bytes;

  struct Frame {
    OpToken token = kNoOp;
    std::string_view name;
    std::int32_t op = -1;  ///< recorded op index, -1 outside recording
    Phase phase = Phase::forward;
  };
  struct Thread {
    std::vector<Frame> stack;
    std::int32_t number = -1;  ///< small number in the recorded iteration
  };
  std::unordered_map<std::thread::id, Thread> threads;
  OpToken next_token = 1;

  // Current iteration.
  std::int32_t iteration = 0;
  std::uint64_t iter_start = 0;
  struct DevSeq {
    std::int64_t count = 0;
    std::uint64_t hash = kSeed;
  };
  std::map<int, DevSeq> seqs;
  std::uint32_t iter_allocs = 0;
  bool iter_diverged = false;
  std::vector<IterationInfo> infos;
  std::optional<IterationSource> source;
  bool explicit_seen = false;
  bool any_mark = false;
  std::uint64_t ignored_marks = 0;
  std::uint64_t total_allocs = 0;

  // Periodicity (Note [Iteration boundaries]).
  std::unique_ptr<PeriodDetector> detector;
  struct HistEntry {
    int device;
    std::uint64_t bytes;  ///< hashed into the per-device signature
    std::uint64_t t;
  };
  std::vector<HistEntry> history;
  std::uint64_t period = 0;
  std::uint64_t next_boundary = 0;

  // The profiled iteration, and what later iterations are compared with.
  std::int32_t profiled = -1;
  std::uint64_t rec_start = 0;
  struct OpBuild {
    std::uint32_t name = 0;
    std::uint64_t begin = 0, end = 0;
    std::uint32_t thread = 0;
    std::int32_t parent = -1;
    Phase phase = Phase::unknown;
    std::vector<std::uint32_t> in, out;
    std::vector<std::uint32_t> made;  ///< tensors allocated while it ran (top-level ops only; windows)
  };
  std::vector<OpBuild> ops;
  std::vector<TensorRecord> tensors;
  std::vector<std::uint32_t> tensor_names;
  std::vector<std::uint32_t> window_used;  ///< used by ops (any depth) and allocated since the last window
  std::vector<std::uint32_t> used;  // scratch
  std::int32_t last_op = -1;
  std::int32_t thread_count = 0;
  bool recorded = false;
  bool partial = false;
  bool finalized = false;  ///< topology and page join applied to `built`
  Profile built;
  std::uint64_t profiled_signature = 0;
  std::string profile_id;  ///< drawn at the first snapshot, kept for every later one (Note [Profile identity])
  // The recorded iteration between stop_recording() and the first snapshot() (build_profile()).
  std::vector<OpBuild> done_ops;
  std::vector<TensorRecord> done_tensors;
  std::vector<std::uint32_t> done_names;
  std::uint64_t iteration_end = 0;
  bool build_pending = false;
  std::map<int, std::vector<std::pair<std::uint64_t, std::uint32_t>>> ref;  ///< device -> seq -> (bytes, op)
  std::vector<Divergence> divergences;
  std::uint32_t divergent = 0;
  std::vector<std::string> warnings;
  std::uint64_t page_windows = 0, watched_bytes = 0;

  void warn(std::string text) {
    if (warnings.size() < 32) warnings.push_back(std::move(text));
  }

  std::uint32_t intern(std::string_view name) {
    if (name.empty()) return 0;
    if (auto it = name_ids.find(name); it != name_ids.end()) return it->second;
    const auto id = static_cast<std::uint32_t>(names.size());
    names.emplace_back(name);
    name_hashes.push_back(fnv1a(name));
    name_ids.emplace(std::string(name), id);
    return id;
  }

  std::int32_t intern_source(const SourceRef& s) {
    if (s.empty()) return -1;
    if (auto it = source_ids.find(s); it != source_ids.end()) return it->second;
    if (sources.size() >= kMaxSources) return -1;
    const auto id = static_cast<std::int32_t>(sources.size());
    sources.push_back(SourceLocation{std::string(s.file), s.line, std::string(s.function)});
    source_ids.emplace(sources.back(), id);
    return id;
  }

  /// The calling thread's state; a thread-local cache saves the map lookup on every event (keyed by
  /// this recorder's serial number, so a new recorder at the same address never sees stale entries).
  Thread& this_thread() {
    thread_local struct {
      std::uint64_t owner = 0;
      Thread* state = nullptr;
    } cache;
    if (cache.owner != serial) {
      cache.state = &threads[std::this_thread::get_id()];
      cache.owner = serial;
    }
    return *cache.state;
  }
  const std::uint64_t serial = next_serial();
  static std::uint64_t next_serial() {
    static std::atomic<std::uint64_t> n{0};
    return ++n;
  }

  std::uint64_t alloc_key(std::uint64_t bytes, std::uint32_t name) const { return mix(bytes * 0x9e37ull ^ name_hashes[name]); }

  /// The live allocation containing p (views point inside their base tensor).
  Live* find_containing(const void* p) {
    const auto addr = reinterpret_cast<std::uintptr_t>(p);
    auto it = live.upper_bound(addr);
    if (it == live.begin()) return nullptr;
    --it;
    if (addr >= it->first + std::max<std::uint64_t>(it->second.bytes, 1)) return nullptr;
    return &it->second;
  }

  void resolve(std::span<const void* const> ptrs, std::vector<std::uint32_t>& out) {
    for (const void* p : ptrs) {
      if (!p) continue;
      Live* l = find_containing(p);
      if (!l || l->tensor < 0) continue;
      const auto id = static_cast<std::uint32_t>(l->tensor);
      if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
    }
  }

  /// Tensors used in the window now closing: by the ops running now, and by ops that ran and allocations
  /// made since the last window boundary (nested ops below the window depth open no window of their own).
  std::vector<std::uint32_t>& active_set() {
    used.swap(window_used);
    window_used.clear();
    for (auto& [id, th] : threads)
      for (const Frame& f : th.stack) {
        if (f.op < 0) continue;
        const OpBuild& op = ops[static_cast<std::size_t>(f.op)];
        used.insert(used.end(), op.in.begin(), op.in.end());
        used.insert(used.end(), op.out.begin(), op.out.end());
        used.insert(used.end(), op.made.begin(), op.made.end());
      }
    return used;
  }

  void close_window() {
    if (!join) return;
    try {
      join->end_window(active_set());
    } catch (const std::exception& e) {
      warn(std::string("page data dropped: ") + e.what());
      join.reset();
    }
  }

  std::uint64_t iteration_signature() const {
    std::uint64_t h = kSeed;
    for (const auto& [dev, s] : seqs) h = mix(h ^ mix(static_cast<std::uint64_t>(dev + 2) ^ s.hash ^ mix(s.count)));
    return h;
  }

  // ---- divergence against the profiled iteration ----
  void check_alloc(int device, std::int64_t seq, std::uint64_t bytes, std::uint32_t name) {
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

  void check_counts() {
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

  void diverge(std::int64_t seq, std::string reason) {
    iter_diverged = true;
    ++divergent;
    if (divergences.size() < 1000) divergences.push_back(Divergence{iteration, seq, std::move(reason)});
  }
};

// ------------------------------------------------------------------------------------------------

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

// ---- recording start / stop -------------------------------------------------------------------

void EventRecorder::start_recording() {
  Impl& m = *impl_;
  m.profiled = m.iteration;
  m.rec_start = m.iter_start;
  m.ops.clear();
  m.tensors.clear();
  m.tensor_names.clear();
  m.window_used.clear();
  m.last_op = -1;
  m.thread_count = 0;
  // Ops open at the boundary belong to the new iteration too (a periodic boundary falls inside the op
  // that makes its first allocation; an explicit mark may sit inside a user scope): record them as
  // beginning at the iteration's start, without the inputs they were given before it.
  for (auto& [id, th] : m.threads) {
    th.number = th.stack.empty() ? -1 : m.thread_count++;
    std::int32_t parent = -1;
    for (auto& f : th.stack) {
      Impl::OpBuild op;
      op.name = m.intern(f.name);
      op.thread = static_cast<std::uint32_t>(th.number);
      op.parent = parent;
      op.phase = f.phase;
      f.op = parent = static_cast<std::int32_t>(m.ops.size());
      m.last_op = f.op;
      m.ops.push_back(std::move(op));
    }
  }
  try {
    m.join = std::make_unique<PageJoin>(*m.tracer, m.page_size, options_.page_nodes, options_.page_extents);
  } catch (const std::exception& e) {
    m.warn(std::string("no page data: ") + e.what());
  }
  // Everything alive now belongs to the iteration too (parameters, optimizer state, data).
  for (auto& [addr, l] : m.live) {
    TensorRecord t;
    t.id = static_cast<std::uint32_t>(m.tensors.size());
    t.seq = -1;
    t.bytes = l.bytes;
    t.device = l.device;
    t.stream = l.stream;
    t.address = addr;
    t.birth_op = kBeforeIteration;
    t.flags = l.flags;
    t.source = l.source;
    l.tensor = t.id;
    m.tensors.push_back(std::move(t));
    m.tensor_names.push_back(l.name);
    if (m.join && l.trackable && l.device < 0) m.join->add(static_cast<std::uint32_t>(l.tensor), addr, l.bytes);
  }
  state_.store(kRecording);
}

void EventRecorder::stop_recording(bool partial) {
  Impl& m = *impl_;
  const std::uint64_t end = now_ns() - m.rec_start;
  for (auto& [id, th] : m.threads)
    for (auto& f : th.stack) {
      if (f.op >= 0) m.ops[static_cast<std::size_t>(f.op)].end = end;
      f.op = -1;
    }
  if (m.join) {
    try {
      m.join->stop(m.active_set());
    } catch (const std::exception& e) {
      m.warn(std::string("page data dropped: ") + e.what());
      m.join.reset();
    }
  }
  m.partial = partial;
  m.finalized = false;
  m.profiled_signature = m.iteration_signature();
  // Keep the raw records; the Profile is built by the first snapshot() (Note [Profile write] in
  // integrations/session: off the training thread). Only the reference sequence is needed now.
  m.iteration_end = end;
  m.done_ops.swap(m.ops);
  m.done_tensors.swap(m.tensors);
  m.done_names.swap(m.tensor_names);
  m.ops.clear();
  m.tensors.clear();
  m.tensor_names.clear();
  m.build_pending = true;
  m.ref.clear();
  for (const auto& t : m.done_tensors) {
    if (t.seq < 0) continue;
    auto& r = m.ref[t.device];
    if (r.size() <= static_cast<std::size_t>(t.seq)) r.resize(static_cast<std::size_t>(t.seq) + 1);
    r[static_cast<std::size_t>(t.seq)] = {t.bytes, m.done_names[t.id]};
  }
  m.recorded = true;
  recorded_.store(true, std::memory_order_relaxed);
  state_.store(kObserving);
}

/// Turns the raw records of the recorded iteration into m.built (ops, tensors with uses).
void EventRecorder::build_profile() {
  Impl& m = *impl_;
  if (!m.build_pending) return;
  m.build_pending = false;
  Profile& p = m.built;
  p = Profile{};
  p.iteration_ns = m.iteration_end;
  p.ops.reserve(m.done_ops.size());
  for (std::size_t i = 0; i < m.done_ops.size(); ++i) {
    auto& b = m.done_ops[i];
    OpRecord r;
    r.index = static_cast<OpIndex>(i);
    r.name = m.names[b.name];
    r.begin_ns = b.begin;
    r.end_ns = std::max(b.end, b.begin);
    r.thread = b.thread;
    r.parent = b.parent;
    r.phase = b.phase;
    for (auto t : b.in) m.done_tensors[t].uses.push_back(r.index);
    for (auto t : b.out) m.done_tensors[t].uses.push_back(r.index);
    r.inputs = std::move(b.in);
    r.outputs = std::move(b.out);
    p.ops.push_back(std::move(r));
  }
  for (std::size_t i = 0; i < m.done_tensors.size(); ++i) {
    auto& t = m.done_tensors[i];
    std::sort(t.uses.begin(), t.uses.end());
    t.uses.erase(std::unique(t.uses.begin(), t.uses.end()), t.uses.end());
    t.alloc_op = m.names[m.done_names[i]];
  }
  // The sources the recorded tensors name, in order of first use.
  std::vector<std::int32_t> remap(m.sources.size(), -1);
  for (auto& t : m.done_tensors) {
    if (t.source < 0) continue;
    auto& to = remap[static_cast<std::size_t>(t.source)];
    if (to < 0) {
      to = static_cast<std::int32_t>(p.sources.size());
      p.sources.push_back(m.sources[static_cast<std::size_t>(t.source)]);
    }
    t.source = to;
  }
  p.tensors = std::move(m.done_tensors);
  m.done_tensors = {};
  m.done_ops = {};
}

void EventRecorder::finalize_pages(Profile& p) {
  Impl& m = *impl_;
  p.meta.page_tracer = std::string(m.tracer->name());
  if (!m.join) return;
  const auto classes = estimate_classes(p.tensors, p.ops);
  const Topology& topo = p.topology;
  auto node_to_tier = [&topo](int node) -> TierId {
    for (const auto& tier : topo.tiers)
      if (tier.kind != TierKind::gpu && tier.numa_node == node) return tier.id;
    return kNoTier;
  };
  p.pages.clear();
  m.join->apply(p.tensors, classes, node_to_tier, p.pages);
  m.page_windows = m.join->windows();
  m.watched_bytes = m.join->watched_bytes();
  for (const auto& w : m.join->warnings()) m.warn(w);
  m.join.reset();
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

// ---- allocation events ------------------------------------------------------------------------

void EventRecorder::alloc(const void* ptr, std::size_t bytes, int device, std::uint64_t stream,
                          bool page_trackable, SourceRef source) noexcept {
  if (!active() || !ptr) return;
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  if (state_.load() == kIdle || state_.load() == kDone) return;
  try {
    auto& th = m.this_thread();
    const std::uint32_t name = th.stack.empty() ? 0 : m.intern(th.stack.back().name);
    if (m.period > 0 && m.total_allocs == m.next_boundary) {
      end_iteration();
      m.next_boundary += m.period;
    }
    auto& ds = m.seqs[device];
    const std::int64_t seq = ds.count++;
    const std::uint64_t key = m.alloc_key(bytes, name);
    ds.hash = mix(ds.hash ^ mix(bytes));  // sizes only: comparable with or without op events
    ++m.iter_allocs;
    m.check_alloc(device, seq, bytes, name);
    const std::uint64_t live_before = m.live_bytes[device];
    if (m.detector) {
      m.history.push_back({device, bytes, now_ns()});
      ++m.total_allocs;
      if (m.detector->feed(mix(key ^ static_cast<std::uint64_t>(device + 2)), live_before)) adopt_period();
      else if (m.detector->gave_up()) {
        m.detector.reset();
        m.history = {};
        m.warn("no iteration period found in the first allocations; call tierpack.step() to mark iterations");
      }
    } else {
      ++m.total_allocs;
    }
    const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
    if (auto old = m.live.find(addr); old != m.live.end()) {
      // The framework re-used an address we never saw freed: treat the old allocation as gone.
      m.live_bytes[old->second.device] -= old->second.bytes;
      m.live.erase(old);
    }
    Impl::Live l;
    l.bytes = bytes;
    l.device = device;
    l.stream = stream;
    l.name = name;
    l.source = m.intern_source(source);
    l.trackable = page_trackable;
    if (state_.load() == kRecording) {
      TensorRecord t;
      t.id = static_cast<std::uint32_t>(m.tensors.size());
      t.seq = seq;
      t.bytes = bytes;
      t.device = device;
      t.stream = stream;
      t.address = addr;
      t.source = l.source;
      const std::int32_t cur = th.stack.empty() ? -1 : th.stack.back().op;
      t.birth_op = cur >= 0 ? cur : static_cast<OpIndex>(m.ops.size());
      t.birth_ns = now_ns() - m.rec_start;
      l.tensor = t.id;
      m.tensors.push_back(std::move(t));
      m.tensor_names.push_back(name);
      m.window_used.push_back(static_cast<std::uint32_t>(l.tensor));
      // An op writes what it allocates, often long after the allocation (after nested view ops, before
      // its outputs are known): the outermost running op on this thread vouches for it until it ends.
      if (!th.stack.empty() && th.stack.front().op >= 0)
        m.ops[static_cast<std::size_t>(th.stack.front().op)].made.push_back(static_cast<std::uint32_t>(l.tensor));
      if (m.join && page_trackable && device < 0) m.join->add(static_cast<std::uint32_t>(l.tensor), addr, bytes);
    }
    m.live.emplace(addr, l);
    m.live_bytes[device] += bytes;
  } catch (const std::exception& e) {
    m.warn(std::string("allocation event dropped: ") + e.what());
  }
}

void EventRecorder::free(const void* ptr) noexcept {
  if (!active() || !ptr) return;
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  auto it = m.live.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == m.live.end()) return;
  const Impl::Live& l = it->second;
  m.live_bytes[l.device] -= l.bytes;
  if (state_.load() == kRecording && l.tensor >= 0 && static_cast<std::size_t>(l.tensor) < m.tensors.size()) {
    auto& t = m.tensors[static_cast<std::size_t>(l.tensor)];
    auto th = m.threads.find(std::this_thread::get_id());
    std::int32_t cur = -1;
    if (th != m.threads.end() && !th->second.stack.empty()) cur = th->second.stack.back().op;
    if (cur < 0) cur = m.last_op;
    t.death_op = std::max<OpIndex>(cur, t.birth_op);
    t.death_ns = now_ns() - m.rec_start;
    if (m.join) m.join->remove(t.id);
  }
  m.live.erase(it);
}

void EventRecorder::mark(TensorRole role, const void* ptr) noexcept {
  if (!active() || !ptr) return;
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  Impl::Live* l = m.find_containing(ptr);
  if (!l) return;
  std::uint32_t flag = 0;
  switch (role) {
    case TensorRole::saved_for_backward: flag = kTensorSavedForBackward; break;
    case TensorRole::parameter: flag = kTensorParameter; break;
    case TensorRole::gradient: flag = kTensorGradient; break;
    case TensorRole::optimizer_state: flag = kTensorOptimizerState; break;
  }
  l->flags |= flag;
  if (l->tensor < 0) return;
  const auto id = static_cast<std::size_t>(l->tensor);
  if (state_.load() == kRecording && id < m.tensors.size()) m.tensors[id].flags |= flag;
  else if (m.recorded && m.build_pending && id < m.done_tensors.size()) m.done_tensors[id].flags |= flag;
  else if (m.recorded && id < m.built.tensors.size()) m.built.tensors[id].flags |= flag;
}

// ---- ops ----------------------------------------------------------------------------------------

EventRecorder::OpToken EventRecorder::op_begin(std::string_view name, std::span<const void* const> inputs,
                                               Phase phase) noexcept {
  if (!active()) return kNoOp;
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  const auto st = state_.load();
  if (st == kIdle || st == kDone) return kNoOp;
  try {
    auto& th = m.this_thread();
    if (phase == Phase::unknown) phase = th.stack.empty() ? Phase::forward : th.stack.back().phase;
    Impl::Frame f;
    f.token = m.next_token++;
    f.name = name;
    f.phase = phase;
    if (st == kRecording) {
      if (m.ops.size() >= options_.max_recorded_ops) {
        m.warn("more than " + std::to_string(options_.max_recorded_ops) +
               " ops in the profiled iteration: recording stopped early");
        stop_recording(true);
      } else {
        // Note [Window depth]: only ops near the top open page windows; deeper ones add to the current one.
        if (th.stack.size() < options_.window_depth) m.close_window();  // the window before this op
        if (th.number < 0) th.number = m.thread_count++;
        Impl::OpBuild op;
        op.name = m.intern(name);
        op.begin = now_ns() - m.rec_start;
        op.thread = static_cast<std::uint32_t>(th.number);
        op.parent = th.stack.empty() ? -1 : th.stack.back().op;
        op.phase = phase;
        m.resolve(inputs, op.in);
        m.window_used.insert(m.window_used.end(), op.in.begin(), op.in.end());
        f.op = static_cast<std::int32_t>(m.ops.size());
        m.last_op = f.op;
        m.ops.push_back(std::move(op));
      }
    }
    th.stack.push_back(f);
    return f.token;
  } catch (const std::exception& e) {
    m.warn(std::string("op event dropped: ") + e.what());
    return kNoOp;
  }
}

void EventRecorder::op_end(OpToken token, std::span<const void* const> outputs) noexcept {
  if (token == kNoOp || !active()) return;
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  try {
    auto it = m.threads.find(std::this_thread::get_id());
    if (it == m.threads.end()) return;
    auto& stack = it->second.stack;
    auto f = std::find_if(stack.rbegin(), stack.rend(), [token](const Impl::Frame& x) { return x.token == token; });
    if (f == stack.rend()) return;
    const bool recording = state_.load() == kRecording;
    const std::uint64_t end = now_ns() - m.rec_start;
    // Frames above it never ended (an exception unwound through them): close them with it.
    const auto keep = static_cast<std::size_t>(stack.rend() - f) - 1;  // index of the frame
    if (recording) {
      for (std::size_t i = keep; i < stack.size(); ++i)
        if (stack[i].op >= 0) m.ops[static_cast<std::size_t>(stack[i].op)].end = end;
      const std::int32_t op = stack[keep].op;
      if (op >= 0) {
        auto& out = m.ops[static_cast<std::size_t>(op)].out;
        m.resolve(outputs, out);
        m.window_used.insert(m.window_used.end(), out.begin(), out.end());
      }
      if (keep < options_.window_depth) m.close_window();  // the op's own window, with its outputs
    }
    stack.resize(keep);
  } catch (const std::exception& e) {
    m.warn(std::string("op event dropped: ") + e.what());
  }
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

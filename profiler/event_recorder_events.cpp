// The framework's events, as the event recorder takes them (Note [Recorder states] in
// event_recorder.hpp): allocations and frees (the live allocations, interned op names and allocation
// sources), role marks, and op begin/end on each thread's op stack, which open and close page windows
// (Note [Window depth]).
#include <algorithm>
#include <string>

#include "profiler/detail/event_recorder_impl.hpp"

namespace tierpack {
using namespace detail;

namespace {

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

constexpr std::size_t kMaxSources = 1u << 20;  // distinct sources kept; more are recorded as unknown

}  // namespace

std::uint32_t EventRecorder::Impl::intern(std::string_view name) {
  if (name.empty()) return 0;
  if (auto it = name_ids.find(name); it != name_ids.end()) return it->second;
  const auto id = static_cast<std::uint32_t>(names.size());
  names.emplace_back(name);
  name_hashes.push_back(fnv1a(name));
  name_ids.emplace(std::string(name), id);
  return id;
}

std::int32_t EventRecorder::Impl::intern_source(const SourceRef& s) {
  if (s.empty()) return -1;
  if (auto it = source_ids.find(s); it != source_ids.end()) return it->second;
  if (sources.size() >= kMaxSources) return -1;
  const auto id = static_cast<std::int32_t>(sources.size());
  sources.push_back(SourceLocation{std::string(s.file), s.line, std::string(s.function), std::string(s.module)});
  source_ids.emplace(sources.back(), id);
  return id;
}

/// The calling thread's state; a thread-local cache saves the map lookup on every event (keyed by
/// this recorder's serial number, so a new recorder at the same address never sees stale entries).
EventRecorder::Impl::Thread& EventRecorder::Impl::this_thread() {
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

std::uint64_t EventRecorder::Impl::next_serial() {
  static std::atomic<std::uint64_t> n{0};
  return ++n;
}

std::uint64_t EventRecorder::Impl::alloc_key(std::uint64_t bytes, std::uint32_t name) const {
  return mix(bytes * 0x9e37ull ^ name_hashes[name]);
}

/// The live allocation containing p (views point inside their base tensor).
EventRecorder::Impl::Live* EventRecorder::Impl::find_containing(const void* p) {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  auto it = live.upper_bound(addr);
  if (it == live.begin()) return nullptr;
  --it;
  if (addr >= it->first + std::max<std::uint64_t>(it->second.bytes, 1)) return nullptr;
  return &it->second;
}

void EventRecorder::Impl::resolve(std::span<const void* const> ptrs, std::vector<std::uint32_t>& out) {
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
std::vector<std::uint32_t>& EventRecorder::Impl::active_set() {
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

void EventRecorder::Impl::close_window() {
  if (!join) return;
  try {
    join->end_window(active_set());
  } catch (const std::exception& e) {
    warn(std::string("page data dropped: ") + e.what());
    join.reset();
  }
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

}  // namespace tierpack

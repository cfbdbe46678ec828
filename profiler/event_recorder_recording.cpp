// The profiled iteration in the event recorder: starting the recording (ops open at the boundary and
// tensors alive then belong to it), stopping it (the raw records kept, the reference sequence later
// iterations are compared with), and turning the records into the Profile (ops, tensors with their
// uses and sources, page data from the PageJoin).
#include <algorithm>
#include <string>

#include "profiler/detail/event_recorder_impl.hpp"
#include "profiler/tensor_lifetime.hpp"

namespace tierpack {
using namespace detail;

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
  // runtime/session: off the training thread). Only the reference sequence is needed now.
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

}  // namespace tierpack

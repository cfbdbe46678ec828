// memory_snapshot.json / .pickle (see memory_snapshot.hpp).
#include "report/memory_snapshot.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/version.hpp"
#include "report/detail/file_sink.hpp"
#include "report/detail/structured_writer.hpp"

namespace tierpack::report {

// Note [Memory snapshot from a profile]
// PyTorch's snapshot describes one CUDA caching allocator: "segments" (cudaMalloc'd ranges, each
// tiled by blocks that are active_allocated or inactive) at the moment of the snapshot, and per
// device a trace of actions. We map a profile onto it like this:
//  - one device trace per profile device, indexed by the CUDA ordinal; host tensors get the index
//    after the last GPU (extra key tierpack.devices says which index is which);
//  - every tensor gets an "alloc" at the start of its birth op's step (tensors born before the
//    iteration at time 0) and, if it dies in the iteration, "free_requested" + "free_completed" at
//    the end of its death op's step; frees at a time come before allocs at that time, so an address
//    is never allocated twice at once. Every free has an alloc; the trace ends with a "snapshot"
//    marker, the way torch records the moment _snapshot() ran;
//  - the snapshot moment is the end of the iteration: tensors alive then are the active blocks;
//  - addresses are the profiled ones when every tensor has one and live tensors never overlap;
//    otherwise a best-fit allocator with 512-byte rounding (like the caching allocator's) lays the
//    tensors out in one segment per device, and tierpack.devices[i].addresses says "synthetic";
//  - "frames" (innermost first) are the allocating op ("tierpack: op 12", line 12, "aten::empty") and,
//    when the profile knows it, where the program allocated the tensor (file, line, function: the
//    Python source line, Note [Python source] in integrations/torch/python_source.cpp; the function's
//    name followed by " in <module path>" when a module was running, Note [Module paths] there);
//  - "category" carries the lifetime class (memory_viz colours by it), extra keys tierpack_* the
//    tensor id and tier. memory_viz (some versions) mistypes 'categories' when no event has the
//    category "unknown", so the closing snapshot marker carries that category.
namespace {

constexpr std::uint64_t kRound = 512;
constexpr std::uint64_t kSegmentRound = 2ull << 20;
constexpr std::uint64_t kSyntheticBase = 0x7f0000000000ull;
constexpr std::uint64_t kMergeGap = 1ull << 20;  // profiled ranges closer than this share a segment

std::uint64_t round_up(std::uint64_t v, std::uint64_t to) { return (v + to - 1) / to * to; }

struct Event {
  std::int64_t boundary;  // step boundary index: slot of the step it happens at
  int kind;               // 0 free, 1 alloc
  TensorId tensor;
};

std::vector<Event> device_events(const ReportModel& m, const std::vector<TensorId>& ids) {
  const OpIndex n = m.axis.ops();
  std::vector<Event> ev;
  ev.reserve(ids.size() * 2);
  for (auto id : ids) {
    const auto& t = m.profile->tensors[id];
    const OpIndex born = std::clamp<OpIndex>(t.birth_op, -1, n);
    ev.push_back({born + 1, 1, id});
    if (t.death_op != kAfterIteration) ev.push_back({std::clamp<OpIndex>(t.death_op, born, n) + 2, 0, id});
  }
  std::sort(ev.begin(), ev.end(), [](const Event& a, const Event& b) {
    return a.boundary != b.boundary ? a.boundary < b.boundary : a.kind != b.kind ? a.kind < b.kind : a.tensor < b.tensor;
  });
  return ev;
}

// True when the profiled addresses can be shown as they are.
bool profiled_addresses_usable(const Profile& p, const std::vector<TensorId>& ids, const std::vector<Event>& ev) {
  for (auto id : ids)
    if (p.tensors[id].address == 0) return false;
  std::map<std::uint64_t, std::uint64_t> live;  // begin -> end
  for (const auto& e : ev) {
    const auto& t = p.tensors[e.tensor];
    if (e.kind == 0) {
      live.erase(t.address);
      continue;
    }
    const std::uint64_t b = t.address, end = t.address + t.bytes;
    auto it = live.lower_bound(b);
    if (it != live.end() && it->first < end) return false;
    if (it != live.begin() && std::prev(it)->second > b) return false;
    live[b] = end;
  }
  return true;
}

// Best-fit placement with coalescing frees; returns the high-water mark.
class BestFit {
 public:
  std::uint64_t alloc(std::uint64_t size) {
    auto it = by_size_.lower_bound({size, 0});
    if (it == by_size_.end()) {
      const auto a = top_;
      top_ += size;
      return a;
    }
    const auto [bsize, addr] = *it;
    by_size_.erase(it);
    by_addr_.erase(addr);
    if (bsize > size) insert(addr + size, bsize - size);
    return addr;
  }
  void free(std::uint64_t addr, std::uint64_t size) {
    auto next = by_addr_.find(addr + size);
    if (next != by_addr_.end()) {
      size += next->second;
      by_size_.erase({next->second, next->first});
      by_addr_.erase(next);
    }
    auto prev = by_addr_.lower_bound(addr);
    if (prev != by_addr_.begin() && (--prev)->first + prev->second == addr) {
      addr = prev->first;
      size += prev->second;
      by_size_.erase({prev->second, prev->first});
      by_addr_.erase(prev);
    }
    insert(addr, size);
  }
  std::uint64_t top() const { return top_; }

 private:
  void insert(std::uint64_t addr, std::uint64_t size) {
    by_addr_[addr] = size;
    by_size_.insert({size, addr});
  }
  std::map<std::uint64_t, std::uint64_t> by_addr_;
  std::set<std::pair<std::uint64_t, std::uint64_t>> by_size_;
  std::uint64_t top_ = 0;
};

std::int64_t to_us(double ns) { return static_cast<std::int64_t>(std::llround(ns / 1000.0)); }

// Tiles [begin, end) with the active blocks inside it and inactive blocks for the gaps.
SnapshotSegment make_segment(int index, std::uint64_t begin, std::uint64_t end, std::string tier,
                             const std::vector<SnapshotBlock>& active) {
  SnapshotSegment seg{index, begin, end - begin, std::move(tier), {}};
  std::uint64_t at = begin;
  for (const auto& b : active) {
    if (b.address < begin || b.address >= end) continue;
    if (b.address > at) seg.blocks.push_back({at, b.address - at, 0, false, -1});
    seg.blocks.push_back(b);
    at = b.address + b.size;
  }
  if (at < end) seg.blocks.push_back({at, end - at, 0, false, -1});
  return seg;
}

}  // namespace

MemorySnapshot build_snapshot(const ReportModel& m) {
  const Profile& p = *m.profile;
  MemorySnapshot snap;
  snap.address.assign(p.tensors.size(), 0);
  std::map<int, std::vector<TensorId>> by_device;
  for (const auto& t : p.tensors)
    if (t.bytes > 0) by_device[t.device].push_back(t.id);
  int max_gpu = -1;
  for (const auto& [d, ids] : by_device) max_gpu = std::max(max_gpu, d);
  const int host_index = max_gpu + 1;
  int n_index = 0;
  for (const auto& [d, ids] : by_device) n_index = std::max(n_index, (d < 0 ? host_index : d) + 1);
  snap.devices.resize(static_cast<std::size_t>(n_index));
  for (int i = 0; i < n_index; ++i) snap.devices[static_cast<std::size_t>(i)].index = i;

  for (const auto& [device, ids] : by_device) {
    const int index = device < 0 ? host_index : device;
    auto& dev = snap.devices[static_cast<std::size_t>(index)];
    dev.device = device;
    dev.name = device_name(device);
    const auto events = device_events(m, ids);
    dev.synthetic_addresses = !profiled_addresses_usable(p, ids, events);
    std::vector<std::uint64_t> size(p.tensors.size(), 0);
    BestFit fit;
    const std::uint64_t base = kSyntheticBase + static_cast<std::uint64_t>(index) * (1ull << 40);
    for (const auto& e : events) {
      const auto& t = p.tensors[e.tensor];
      if (!dev.synthetic_addresses) {
        size[t.id] = t.bytes;
        snap.address[t.id] = t.address;
      } else if (e.kind == 1) {
        size[t.id] = round_up(t.bytes, kRound);
        snap.address[t.id] = base + fit.alloc(size[t.id]);
      } else {
        fit.free(snap.address[t.id] - base, size[t.id]);
      }
      // Boundary b is where step b-1 begins: a birth step's start, or the step after a death step.
      const double when = m.axis.step_begin(static_cast<OpIndex>(e.boundary - 1));
      SnapshotEntry entry{SnapshotEntry::alloc, snap.address[t.id], size[t.id], t.stream, to_us(when), t.id};
      if (e.kind == 1) {
        dev.trace.push_back(entry);
      } else {
        entry.action = SnapshotEntry::free_requested;
        dev.trace.push_back(entry);
        entry.action = SnapshotEntry::free_completed;
        dev.trace.push_back(entry);
      }
    }
    dev.trace.push_back({SnapshotEntry::snapshot, 0, 0, 0, to_us(m.axis.end_ns()), -1});

    // Segments at the snapshot moment (end of the iteration).
    std::vector<SnapshotBlock> active;
    for (auto id : ids) {
      const auto& t = p.tensors[id];
      if (t.death_op == kAfterIteration) active.push_back({snap.address[id], size[id], t.bytes, true, static_cast<std::int64_t>(id)});
    }
    std::sort(active.begin(), active.end(), [](const auto& a, const auto& b) { return a.address < b.address; });
    const std::string tier = device_tier_name(p.topology, device);
    if (dev.synthetic_addresses) {
      snap.segments.push_back(make_segment(index, base, base + std::max(round_up(fit.top(), kSegmentRound), kSegmentRound), tier, active));
      continue;
    }
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
    for (auto id : ids) ranges.push_back({snap.address[id], snap.address[id] + size[id]});
    std::sort(ranges.begin(), ranges.end());
    std::vector<std::pair<std::uint64_t, std::uint64_t>> merged;
    for (const auto& r : ranges) {
      if (!merged.empty() && r.first <= merged.back().second + kMergeGap) merged.back().second = std::max(merged.back().second, r.second);
      else merged.push_back(r);
    }
    for (const auto& [b, e] : merged) snap.segments.push_back(make_segment(index, b, e, tier, active));
  }
  return snap;
}

namespace {

// Frames, innermost first: the allocating op, then where the program called it (when known).
void write_frame(detail::StructuredWriter& w, const Profile& p, const TensorRecord& t) {
  w.begin_array();
  w.begin_object();
  w.key("filename"), w.str(t.birth_op == kBeforeIteration ? "tierpack: before the iteration" : "tierpack: op " + std::to_string(t.birth_op));
  w.key("line"), w.i64(std::max<OpIndex>(t.birth_op, 0));
  std::string name = t.alloc_op;
  if (name.empty() && t.birth_op >= 0 && t.birth_op < static_cast<OpIndex>(p.ops.size())) name = p.ops[static_cast<std::size_t>(t.birth_op)].name;
  w.key("name"), w.str(name.empty() ? "(unknown op)" : name);
  w.end_object();
  if (const SourceLocation* src = p.source_of(t)) {
    w.begin_object();
    w.key("filename"), w.str(src->file);
    w.key("line"), w.i64(src->line);
    // The module next to the function: "forward in transformer.h.3.mlp.c_fc" (Note [Module paths]).
    std::string function = src->function.empty() ? "(unknown function)" : src->function;
    if (const std::string module = p.module_text(t); !module.empty()) function += " in " + module;
    w.key("name"), w.str(function);
    w.end_object();
  }
  w.end_array();
}

void write_snapshot(detail::StructuredWriter& w, const ReportModel& m, const MemorySnapshot& snap) {
  const Profile& p = *m.profile;
  static const char* const actions[] = {"alloc", "free_requested", "free_completed", "snapshot"};
  w.begin_object();
  w.key("segments");
  w.begin_array();
  for (const auto& seg : snap.segments) {
    std::uint64_t allocated = 0, requested = 0;
    for (const auto& b : seg.blocks)
      if (b.active) allocated += b.size, requested += b.requested_size;
    w.begin_object();
    w.key("device"), w.i64(seg.device);
    w.key("address"), w.u64(seg.address);
    w.key("total_size"), w.u64(seg.total_size);
    w.key("allocated_size"), w.u64(allocated);
    w.key("active_size"), w.u64(allocated);
    w.key("requested_size"), w.u64(requested);
    w.key("stream"), w.u64(0);
    w.key("segment_type"), w.str("large");
    w.key("segment_pool_id"), w.begin_array(), w.i64(0), w.i64(0), w.end_array();
    w.key("is_expandable"), w.boolean(false);
    w.key("frames"), w.begin_array(), w.end_array();
    w.key("tierpack_tier"), w.str(seg.tier);
    w.key("blocks");
    w.begin_array();
    for (const auto& b : seg.blocks) {
      w.begin_object();
      w.key("address"), w.u64(b.address);
      w.key("size"), w.u64(b.size);
      w.key("requested_size"), w.u64(b.requested_size);
      w.key("state"), w.str(b.active ? "active_allocated" : "inactive");
      w.key("frames");
      if (b.tensor >= 0) write_frame(w, p, p.tensors[static_cast<std::size_t>(b.tensor)]);
      else w.begin_array(), w.end_array();
      if (b.tensor >= 0) w.key("tierpack_tensor"), w.i64(b.tensor);
      w.end_object();
    }
    w.end_array();
    w.end_object();
  }
  w.end_array();

  w.key("device_traces");
  w.begin_array();
  for (const auto& dev : snap.devices) {
    w.begin_array();
    for (const auto& e : dev.trace) {
      w.begin_object();
      w.key("action"), w.str(actions[e.action]);
      w.key("addr"), w.u64(e.addr);
      w.key("size"), w.u64(e.size);
      w.key("stream"), w.u64(e.stream);
      w.key("time_us"), w.i64(e.time_us);
      if (e.action == SnapshotEntry::alloc) {
        const auto& t = p.tensors[static_cast<std::size_t>(e.tensor)];
        w.key("frames"), write_frame(w, p, t);
        w.key("category"), w.str(to_string(m.classes[t.id]));
        w.key("tierpack_tier"), w.str(tensor_tier_name(p.topology, t));
      } else if (e.action == SnapshotEntry::snapshot) {
        w.key("category"), w.str("unknown");
      }
      if (e.tensor >= 0) w.key("tierpack_tensor"), w.i64(e.tensor);
      w.end_object();
    }
    w.end_array();
  }
  w.end_array();

  w.key("allocator_settings"), w.begin_object(), w.end_object();
  w.key("tierpack");
  w.begin_object();
  w.key("generator"), w.str(std::string("tierpack ") + TIERPACK_VERSION);
  w.key("profile"), w.str(m.inputs.profile_path);
  w.key("snapshot_time"), w.str("end of the profiled iteration");
  w.key("iteration_us"), w.i64(to_us(m.axis.end_ns()));
  w.key("devices");
  w.begin_array();
  for (const auto& dev : snap.devices) {
    w.begin_object();
    w.key("index"), w.i64(dev.index);
    w.key("device"), w.i64(dev.device);
    w.key("name"), w.str(dev.name.empty() ? "(unused)" : dev.name);
    w.key("tier"), w.str(dev.name.empty() ? "" : device_tier_name(p.topology, dev.device));
    w.key("addresses"), w.str(dev.trace.empty() ? "none" : dev.synthetic_addresses ? "synthetic" : "profiled");
    w.end_object();
  }
  w.end_array();
  w.key("classes"), w.begin_array();
  for (int c = 0; c < kTensorClassCount; ++c) w.str(to_string(static_cast<TensorClass>(c)));
  w.end_array();
  w.end_object();
  w.end_object();
}

}  // namespace

std::string snapshot_json(const ReportModel& m, const MemorySnapshot& snap) {
  detail::JsonTextWriter w;
  write_snapshot(w, m, snap);
  return w.data() + "\n";
}

std::string snapshot_pickle(const ReportModel& m, const MemorySnapshot& snap) {
  detail::PickleWriter w;
  write_snapshot(w, m, snap);
  return w.data();
}

std::uint64_t write_snapshot_file(const ReportModel& m, const MemorySnapshot& snap, const std::string& path, bool pickle) {
  detail::AtomicFileWriter file(path);
  detail::JsonTextWriter json;
  detail::PickleWriter pick;
  detail::StructuredWriter& w = pickle ? static_cast<detail::StructuredWriter&>(pick) : json;
  w.stream_to(&file);
  write_snapshot(w, m, snap);
  w.finish();
  if (!pickle) file.write("\n");
  file.commit();
  return file.bytes();
}

}  // namespace tierpack::report

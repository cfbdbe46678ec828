// trace.json (see perfetto_trace.hpp). Written as a stream: a 100k-tensor profile gives a few
// hundred thousand events, too many to build as a JSON tree first.
#include "report/perfetto_trace.hpp"

#include <algorithm>
#include <map>

#include "core/version.hpp"
#include "report/detail/file_sink.hpp"
#include "report/detail/structured_writer.hpp"
#include "report/detail/text.hpp"

namespace tierpack::report {
namespace {

using detail::JsonTextWriter;

double us(double ns) { return ns / 1000.0; }

class TraceOut {
 public:
  explicit TraceOut(detail::AtomicFileWriter* sink) {
    w_.stream_to(sink);
    w_.begin_object();
    w_.key("traceEvents");
    w_.begin_array();
  }
  JsonTextWriter& w() { return w_; }

  void meta(const char* what, int pid, int tid, const std::string& name) {
    w_.begin_object();
    w_.key("name"), w_.str(what);
    w_.key("ph"), w_.str("M");
    w_.key("pid"), w_.i64(pid);
    w_.key("tid"), w_.i64(tid);
    w_.key("args"), w_.begin_object(), w_.key("name"), w_.str(name), w_.end_object();
    w_.end_object();
  }
  void sort_index(int pid, int index) {
    w_.begin_object();
    w_.key("name"), w_.str("process_sort_index");
    w_.key("ph"), w_.str("M");
    w_.key("pid"), w_.i64(pid);
    w_.key("args"), w_.begin_object(), w_.key("sort_index"), w_.i64(index), w_.end_object();
    w_.end_object();
  }
  /// Opens a complete slice; the caller adds args and closes it with end().
  void slice(const std::string& name, const char* cat, double begin_ns, double end_ns, int pid, int tid) {
    w_.begin_object();
    w_.key("name"), w_.str(name);
    w_.key("cat"), w_.str(cat);
    w_.key("ph"), w_.str("X");
    w_.key("ts"), w_.f64(us(begin_ns));
    w_.key("dur"), w_.f64(us(std::max(end_ns - begin_ns, 0.0)));
    w_.key("pid"), w_.i64(pid);
    w_.key("tid"), w_.i64(tid);
  }
  void end() { w_.end_object(); }

  std::string finish(const ReportModel& m) {
    w_.end_array();
    w_.key("displayTimeUnit"), w_.str("ms");
    w_.key("otherData");
    w_.begin_object();
    w_.key("generator"), w_.str(std::string("tierpack ") + TIERPACK_VERSION);
    w_.key("profile"), w_.str(m.inputs.profile_path);
    w_.key("command"), w_.str(m.profile->meta.command);
    w_.key("time_origin"), w_.str("start of the profiled iteration");
    w_.end_object();
    w_.end_object();
    w_.finish();
    return w_.data();
  }

 private:
  JsonTextWriter w_{3};
};

// Slices on one track must nest. Ops of one thread normally do (RecordFunction scopes); any op that
// would overlap an open one without fitting inside it goes to an overflow lane of its thread.
class Lanes {
 public:
  /// Returns the lane (0, 1, ...) on which [b, e] nests properly.
  int place(double b, double e) {
    for (std::size_t lane = 0;; ++lane) {
      if (lane == open_.size()) open_.emplace_back();
      auto& stack = open_[lane];
      while (!stack.empty() && stack.back() <= b) stack.pop_back();
      if (stack.empty() || e <= stack.back()) {
        stack.push_back(e);
        return static_cast<int>(lane);
      }
    }
  }

 private:
  std::vector<std::vector<double>> open_;  // per lane: ends of the open slices, innermost last
};

constexpr int kLaneStride = 1000;  // tid = thread + lane * kLaneStride

void write_ops(TraceOut& out, const ReportModel& m) {
  const Profile& p = *m.profile;
  out.meta("process_name", kTracePidOps, 0, "ops (profiled iteration)");
  out.sort_index(kTracePidOps, 0);
  std::map<std::uint32_t, Lanes> lanes;
  std::map<int, bool> named;
  for (const auto& op : p.ops) {
    const double b = m.axis.op_begin(op.index), e = m.axis.op_end(op.index);
    const int lane = lanes[op.thread].place(b, e);
    const int tid = static_cast<int>(op.thread) + lane * kLaneStride;
    if (!named[tid]) {
      named[tid] = true;
      out.meta("thread_name", kTracePidOps, tid,
               "thread " + std::to_string(op.thread) + (lane ? " (overlapping ops, lane " + std::to_string(lane) + ")" : ""));
    }
    out.slice(op.name, op.phase == Phase::unknown ? "op" : std::string(to_string(op.phase)).c_str(), b, e, kTracePidOps, tid);
    auto& w = out.w();
    w.key("args");
    w.begin_object();
    w.key("op"), w.i64(op.index);
    w.key("inputs"), w.u64(op.inputs.size());
    w.key("outputs"), w.u64(op.outputs.size());
    w.end_object();
    out.end();
  }
}

void write_tensors(TraceOut& out, const ReportModel& m) {
  const Profile& p = *m.profile;
  std::map<int, bool> named;
  auto& w = out.w();
  for (const auto& t : p.tensors) {
    const int pid = kTracePidTensorsBase + t.device + 1;
    if (!named[pid]) {
      named[pid] = true;
      out.meta("process_name", pid, 0, "tensors on " + device_name(t.device));
      out.sort_index(pid, 10 + t.device + 1);
    }
    const std::string name(to_string(m.classes[t.id]));
    char id[24];
    std::snprintf(id, sizeof id, "0x%x", t.id);
    for (int phase = 0; phase < 2; ++phase) {
      w.begin_object();
      w.key("name"), w.str(name);
      w.key("cat"), w.str("tensor");
      w.key("ph"), w.str(phase == 0 ? "b" : "e");
      w.key("id"), w.str(id);
      w.key("ts"), w.f64(us(phase == 0 ? m.axis.tensor_begin(t) : m.axis.tensor_end(t)));
      w.key("pid"), w.i64(pid);
      w.key("tid"), w.i64(0);
      if (phase == 0) {
        w.key("args");
        w.begin_object();
        w.key("tensor"), w.u64(t.id);
        w.key("bytes"), w.u64(t.bytes);
        w.key("seq"), w.i64(t.seq);
        w.key("alloc_op"), w.str(t.alloc_op);
        if (const SourceLocation* src = m.profile->source_of(t)) w.key("source"), w.str(src->short_text());
        if (const std::string module = m.profile->module_text(t); !module.empty()) w.key("module"), w.str(module);
        w.key("uses"), w.u64(t.uses.size());
        w.key("flags"), w.u64(t.flags);
        w.end_object();
      }
      w.end_object();
    }
  }
}

void write_counters(TraceOut& out, const ReportModel& m) {
  out.meta("process_name", kTracePidMemory, 0, "resident bytes per tier");
  out.sort_index(kTracePidMemory, 1);
  auto& w = out.w();
  for (const auto& chart : m.memory) {
    const auto& s = chart.full;
    for (std::size_t k = 0; k < s.names.size(); ++k) {
      const std::string name = s.names[k] + " (" + chart.source + ")";
      for (std::size_t i = 0; i < s.t.size(); ++i) {
        if (i > 0 && s.values[k][i] == s.values[k][i - 1]) continue;
        w.begin_object();
        w.key("name"), w.str(name);
        w.key("ph"), w.str("C");
        w.key("ts"), w.f64(us(s.t[i]));
        w.key("pid"), w.i64(kTracePidMemory);
        w.key("args"), w.begin_object(), w.key("bytes"), w.u64(s.values[k][i]), w.end_object();
        w.end_object();
      }
    }
  }
}

struct MoveSlice {
  double b, e;
  std::uint64_t bytes;
  std::uint32_t group;
  std::string from, to;
  std::int64_t op = -1;
};

void write_migrations(TraceOut& out, const ReportModel& m) {
  std::vector<std::pair<std::string, std::vector<MoveSlice>>> rows;
  auto tier_name = [](const Topology& topo, TierId id) {
    return id < topo.tiers.size() ? topo.tiers[id].name : "tier " + std::to_string(id);
  };
  if (m.plan) {
    std::vector<MoveSlice> ev, pf;
    for (const auto& mv : m.plan->schedule)
      (mv.kind == MoveKind::evict ? ev : pf)
          .push_back({mv.predicted_start_ns, std::max(mv.predicted_end_ns, mv.predicted_start_ns), mv.bytes, mv.group,
                      tier_name(m.plan->topology, mv.from), tier_name(m.plan->topology, mv.to)});
    rows.push_back({"predicted evictions", std::move(ev)});
    rows.push_back({"predicted prefetches", std::move(pf)});
  }
  if (m.run) {
    const Topology& topo = m.plan ? m.plan->topology : m.profile->topology;
    std::vector<MoveSlice> ev, pf, st;
    for (const auto& mv : m.run->moves)
      (mv.kind == MoveKind::evict ? ev : pf)
          .push_back({static_cast<double>(mv.start_ns), static_cast<double>(mv.end_ns), mv.bytes, mv.group,
                      tier_name(topo, mv.from), tier_name(topo, mv.to)});
    for (const auto& s : m.run->stalls)
      st.push_back({static_cast<double>(s.start_ns), static_cast<double>(s.start_ns + s.duration_ns), 0, s.group, "", "", s.op});
    rows.push_back({"measured evictions", std::move(ev)});
    rows.push_back({"measured prefetches", std::move(pf)});
    rows.push_back({"measured stalls", std::move(st)});
  }
  if (rows.empty()) return;
  out.meta("process_name", kTracePidMigrations, 0, "migrations");
  out.sort_index(kTracePidMigrations, 2);
  auto& w = out.w();
  for (std::size_t r = 0; r < rows.size(); ++r) {
    auto& [name, slices] = rows[r];
    std::sort(slices.begin(), slices.end(), [](const auto& a, const auto& b) { return a.b != b.b ? a.b < b.b : a.e > b.e; });
    // Concurrent copies overlap; each row gets as many lanes as it needs (lanes never nest here).
    std::vector<double> lane_end;
    std::map<int, bool> named;
    for (const auto& s : slices) {
      std::size_t lane = 0;
      while (lane < lane_end.size() && lane_end[lane] > s.b) ++lane;
      if (lane == lane_end.size()) lane_end.push_back(0);
      lane_end[lane] = std::max(s.e, s.b + 1e-3);
      const int tid = static_cast<int>(r + 1) * kLaneStride + static_cast<int>(lane);
      if (!named[tid]) {
        named[tid] = true;
        out.meta("thread_name", kTracePidMigrations, tid, lane ? name + " (" + std::to_string(lane + 1) + ")" : name);
      }
      const bool stall = name == "measured stalls";
      out.slice(stall ? "stall" : "group " + std::to_string(s.group), stall ? "stall" : "migration", s.b, s.e,
                kTracePidMigrations, tid);
      w.key("args");
      w.begin_object();
      w.key("group"), w.u64(s.group);
      if (!stall) {
        w.key("bytes"), w.u64(s.bytes);
        w.key("from"), w.str(s.from);
        w.key("to"), w.str(s.to);
      } else {
        w.key("op"), w.i64(s.op);
      }
      w.end_object();
      out.end();
    }
  }
}

std::string write_all(const ReportModel& m, detail::AtomicFileWriter* sink) {
  TraceOut out(sink);
  write_ops(out, m);
  write_tensors(out, m);
  write_counters(out, m);
  write_migrations(out, m);
  return out.finish(m);
}

}  // namespace

std::string render_trace(const ReportModel& m) { return write_all(m, nullptr); }

std::uint64_t write_trace(const ReportModel& m, const std::string& path) {
  detail::AtomicFileWriter file(path);
  write_all(m, &file);
  file.commit();
  return file.bytes();
}

}  // namespace tierpack::report

// RunStats JSON form, validation and file I/O (see run_stats.hpp, docs/report.md).
#include "core/run_stats.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/file_envelope.hpp"
#include "core/input_file.hpp"

namespace tierpack {
namespace {

constexpr std::string_view kFormat = "tierpack-run-stats";

template <class T>
void get_or(const nlohmann::json& j, const char* key, T& v) {
  if (auto it = j.find(key); it != j.end() && !it->is_null()) it->get_to(v);
}

MoveKind parse_kind(const std::string& s) {
  if (s == "evict") return MoveKind::evict;
  if (s == "prefetch") return MoveKind::prefetch;
  throw format_error("unknown move kind '" + s + "' (accepted: evict, prefetch)");
}

}  // namespace

void RunStats::validate() const {
  for (std::size_t i = 1; i < occupancy.size(); ++i)
    if (occupancy[i].t_ns < occupancy[i - 1].t_ns)
      throw format_error("occupancy sample " + std::to_string(i) + " is earlier than the one before it");
  for (std::size_t i = 0; i < moves.size(); ++i)
    if (moves[i].end_ns < moves[i].start_ns) throw format_error("move " + std::to_string(i) + " ends before it starts");
}

void to_json(nlohmann::json& j, const RunStats& s) {
  nlohmann::json iters = nlohmann::json::array();
  for (const auto& it : s.iterations)
    iters.push_back({{"index", it.index},
                     {"step_ns", it.step_ns},
                     {"bytes_to_fast", it.bytes_to_fast},
                     {"bytes_to_slow", it.bytes_to_slow},
                     {"stalls", it.stalls},
                     {"stall_ns", it.stall_ns}});
  nlohmann::json occ = nlohmann::json::array();
  for (const auto& o : s.occupancy) occ.push_back({{"t_ns", o.t_ns}, {"tier", o.tier}, {"bytes", o.bytes}});
  nlohmann::json moves = nlohmann::json::array();
  for (const auto& m : s.moves)
    moves.push_back({{"group", m.group},
                     {"kind", to_string(m.kind)},
                     {"from", m.from},
                     {"to", m.to},
                     {"bytes", m.bytes},
                     {"start_ns", m.start_ns},
                     {"end_ns", m.end_ns}});
  nlohmann::json stalls = nlohmann::json::array();
  for (const auto& st : s.stalls)
    stalls.push_back({{"op", st.op}, {"group", st.group}, {"start_ns", st.start_ns}, {"duration_ns", st.duration_ns}});
  j = nlohmann::json{{"format", kFormat},
                     {"version", RunStats::kFormatVersion},
                     {"source", s.source},
                     {"fast_budget_bytes", s.fast_budget_bytes},
                     {"sampled_iteration", s.sampled_iteration},
                     {"iterations", iters},
                     {"occupancy", occ},
                     {"moves", moves},
                     {"stalls", stalls}};
}

void from_json(const nlohmann::json& j, RunStats& s) {
  s = RunStats{};
  get_or(j, "source", s.source);
  get_or(j, "fast_budget_bytes", s.fast_budget_bytes);
  get_or(j, "sampled_iteration", s.sampled_iteration);
  if (auto it = j.find("iterations"); it != j.end())
    for (const auto& ij : *it) {
      RunIteration r;
      ij.at("index").get_to(r.index);
      get_or(ij, "step_ns", r.step_ns);
      get_or(ij, "bytes_to_fast", r.bytes_to_fast);
      get_or(ij, "bytes_to_slow", r.bytes_to_slow);
      get_or(ij, "stalls", r.stalls);
      get_or(ij, "stall_ns", r.stall_ns);
      s.iterations.push_back(r);
    }
  if (auto it = j.find("occupancy"); it != j.end())
    for (const auto& oj : *it) {
      OccupancySample o;
      oj.at("t_ns").get_to(o.t_ns);
      oj.at("tier").get_to(o.tier);
      oj.at("bytes").get_to(o.bytes);
      s.occupancy.push_back(o);
    }
  if (auto it = j.find("moves"); it != j.end())
    for (const auto& mj : *it) {
      MeasuredMove m;
      get_or(mj, "group", m.group);
      m.kind = parse_kind(mj.at("kind").get<std::string>());
      get_or(mj, "from", m.from);
      get_or(mj, "to", m.to);
      get_or(mj, "bytes", m.bytes);
      mj.at("start_ns").get_to(m.start_ns);
      mj.at("end_ns").get_to(m.end_ns);
      s.moves.push_back(m);
    }
  if (auto it = j.find("stalls"); it != j.end())
    for (const auto& sj : *it) {
      MeasuredStall st;
      get_or(sj, "op", st.op);
      get_or(sj, "group", st.group);
      sj.at("start_ns").get_to(st.start_ns);
      get_or(sj, "duration_ns", st.duration_ns);
      s.stalls.push_back(st);
    }
}

RunStats read_run_stats(const std::string& path) {
  const std::string text = read_file(path, kMaxJsonFileBytes);
  RunStats s;
  try {
    const auto j = nlohmann::json::parse(text);
    if (!j.is_object() || j.value("format", std::string{}) != kFormat)
      throw format_error("not a " + std::string(kFormat) + " file");
    const int version = j.at("version").get<int>();
    if (version > RunStats::kFormatVersion)
      throw format_error("version " + std::to_string(version) + " is newer than this tierpack reads (" +
                         std::to_string(RunStats::kFormatVersion) + ")");
    from_json(j, s);
    s.validate();
  } catch (const nlohmann::json::exception& e) {
    throw format_error(path + ": invalid run statistics: " + e.what());
  } catch (const format_error& e) {
    throw format_error(path + ": " + e.what());
  }
  return s;
}

void write_run_stats(const RunStats& s, const std::string& path) {
  write_file_atomic(path, nlohmann::json(s).dump(1) + "\n");
}

}  // namespace tierpack

// RunStats JSON form, validation and file I/O (see run_stats.hpp, docs/report.md).
#include "core/run_stats.hpp"

#include <algorithm>

#include "core/detail/json_util.hpp"
#include "core/error.hpp"
#include "core/file_envelope.hpp"
#include "core/input_file.hpp"
#include "core/units.hpp"

namespace tierpack {
namespace {

constexpr std::string_view kFormat = "tierpack-run-stats";

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
                     {"stall_ns", it.stall_ns},
                     {"budget_fallbacks", it.budget_fallbacks},
                     {"fast_peak_bytes", it.fast_peak_bytes}});
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
                     {"profile_id", s.profile_id},
                     {"fast_budget_bytes", s.fast_budget_bytes},
                     {"sampled_iteration", s.sampled_iteration},
                     {"stall_ns_measured", s.stall_ns_measured},
                     {"iterations", iters},
                     {"occupancy", occ},
                     {"moves", moves},
                     {"stalls", stalls}};
  if (!s.emulated_tiers.empty()) j["emulated_tiers"] = s.emulated_tiers;
}

void from_json(const nlohmann::json& j, RunIteration& r) {
  using namespace detail;
  check_keys(j, {"index", "step_ns", "bytes_to_fast", "bytes_to_slow", "stalls", "stall_ns", "budget_fallbacks",
                 "fast_peak_bytes"});
  get(j, "index", r.index, 0, std::numeric_limits<std::int32_t>::max());
  get_or(j, "step_ns", r.step_ns, std::uint64_t{0}, kMaxNs, kMaxNsText);
  get_or(j, "bytes_to_fast", r.bytes_to_fast, std::uint64_t{0}, kMaxTotalBytes, kMaxTotalBytesText);
  get_or(j, "bytes_to_slow", r.bytes_to_slow, std::uint64_t{0}, kMaxTotalBytes, kMaxTotalBytesText);
  get_or(j, "stalls", r.stalls);
  get_or(j, "stall_ns", r.stall_ns, std::uint64_t{0}, kMaxNs, kMaxNsText);
  get_or(j, "budget_fallbacks", r.budget_fallbacks);
  get_or(j, "fast_peak_bytes", r.fast_peak_bytes, std::uint64_t{0}, kMaxTotalBytes, kMaxTotalBytesText);
}

void from_json(const nlohmann::json& j, OccupancySample& o) {
  using namespace detail;
  check_keys(j, {"t_ns", "tier", "bytes"});
  get(j, "t_ns", o.t_ns, std::uint64_t{0}, kMaxNs, kMaxNsText);
  get(j, "tier", o.tier);
  get(j, "bytes", o.bytes, std::uint64_t{0}, kMaxTotalBytes, kMaxTotalBytesText);
}

void from_json(const nlohmann::json& j, MeasuredMove& m) {
  using namespace detail;
  check_keys(j, {"group", "kind", "from", "to", "bytes", "start_ns", "end_ns"});
  get_or(j, "group", m.group);
  m.kind = get_parsed(j, "kind", parse_move_kind);
  get_or(j, "from", m.from);
  get_or(j, "to", m.to);
  get_or(j, "bytes", m.bytes, std::uint64_t{0}, kMaxBytes, kMaxBytesText);
  get(j, "start_ns", m.start_ns, std::uint64_t{0}, kMaxNs, kMaxNsText);
  get(j, "end_ns", m.end_ns, std::uint64_t{0}, kMaxNs, kMaxNsText);
}

void from_json(const nlohmann::json& j, MeasuredStall& st) {
  using namespace detail;
  check_keys(j, {"op", "group", "start_ns", "duration_ns"});
  get_or(j, "op", st.op, kBeforeIteration, kAfterIteration);
  get_or(j, "group", st.group);
  get(j, "start_ns", st.start_ns, std::uint64_t{0}, kMaxNs, kMaxNsText);
  get_or(j, "duration_ns", st.duration_ns, std::uint64_t{0}, kMaxNs, kMaxNsText);
}

void from_json(const nlohmann::json& j, RunStats& s) {
  using namespace detail;
  s = RunStats{};
  get_or(j, "source", s.source);
  get_or(j, "profile_id", s.profile_id);
  check_profile_id("profile_id", s.profile_id);
  get_or(j, "fast_budget_bytes", s.fast_budget_bytes, std::uint64_t{0}, kMaxTotalBytes, kMaxTotalBytesText);
  get_or(j, "sampled_iteration", s.sampled_iteration, -1, std::numeric_limits<std::int32_t>::max());
  // Files from before the key: `tierpack run` (the host runtime) never measured stall time.
  s.stall_ns_measured = s.source != "tierpack run";
  get_or(j, "stall_ns_measured", s.stall_ns_measured);
  get_records(j, "iterations", "iteration", s.iterations, false);
  get_records(j, "occupancy", "occupancy sample", s.occupancy, false);
  get_records(j, "moves", "move", s.moves, false);
  get_records(j, "stalls", "stall", s.stalls, false);
  // Older `tierpack run` files kept the list only in their tierpack_run object.
  const nlohmann::json* emulated = j.contains("emulated_tiers") ? &j["emulated_tiers"] : nullptr;
  if (!emulated && j.contains("tierpack_run") && j["tierpack_run"].is_object() && j["tierpack_run"].contains("emulated_tiers"))
    emulated = &j["tierpack_run"]["emulated_tiers"];
  if (emulated) {
    if (!emulated->is_array()) throw format_error("field 'emulated_tiers': expected a list of tier names, got " + shown(*emulated));
    for (std::size_t i = 0; i < emulated->size(); ++i) {
      std::string name;
      try {
        read((*emulated)[i], name);
      } catch (const format_error& e) {
        throw format_error("field 'emulated_tiers' element " + std::to_string(i) + " " + e.what());
      }
      s.emulated_tiers.push_back(std::move(name));
    }
  }
}

RunCounters run_counters(const RunStats& s) {
  RunCounters c;
  c.iterations = s.iterations.size();
  c.stall_ns_measured = s.stall_ns_measured;
  c.budget_bytes = s.fast_budget_bytes;
  for (const RunIteration& it : s.iterations) {
    c.bytes_to_fast += it.bytes_to_fast;
    c.bytes_to_slow += it.bytes_to_slow;
    c.late_prefetches += it.stalls;
    c.stall_ns += it.stall_ns;
    c.budget_fallbacks += it.budget_fallbacks;
    c.fast_peak_bytes = std::max(c.fast_peak_bytes, it.fast_peak_bytes);
  }
  return c;
}

std::string RunCounters::late_text() const {
  return std::to_string(late_prefetches) + " late prefetch(es), " +
         (stall_ns_measured ? format_duration_ns(static_cast<double>(stall_ns)) + " waiting for them"
                            : std::string("stall time not measured (the runtime does not wait for moves)"));
}

RunStats read_run_stats(const std::string& path) {
  const std::string text = read_file(path, kMaxJsonFileBytes);
  RunStats s;
  try {
    const auto j = nlohmann::json::parse(text);
    if (!j.is_object() || j.value("format", std::string{}) != kFormat)
      throw format_error("not a " + std::string(kFormat) + " file");
    int version = 0;
    detail::get(j, "version", version);
    if (version > RunStats::kFormatVersion)
      throw format_error("version " + std::to_string(version) + " is newer than this tierpack reads (" +
                         std::to_string(RunStats::kFormatVersion) + ")");
    from_json(j, s);
    s.validate();
  } catch (const nlohmann::json::exception& e) {
    throw format_error(path + ": invalid run statistics: " + detail::json_error_text(e));
  } catch (const format_error& e) {
    throw format_error(path + ": invalid run statistics: " + e.what());
  }
  return s;
}

void write_run_stats(const RunStats& s, const std::string& path) {
  write_file_atomic(path, nlohmann::json(s).dump(1) + "\n");
}

}  // namespace tierpack

// JSON of SavedTrace and SavedPlan (see saved_trace.hpp). Every field is read by name and checked
// once here: a wrong type or an impossible value is a format_error naming the record and the field.
#include "core/saved_trace.hpp"

#include <cmath>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace tierpack {
namespace {

using nlohmann::json;

constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 50;  // 1 PiB: more than any device holds
constexpr double kMaxMs = 1e9;                              // ~11 days: no step is longer
constexpr std::size_t kMaxRecords = 10'000'000;

[[noreturn]] void bad(const std::string& where, const char* field, const std::string& why) {
  throw format_error(where + ": field '" + field + "' " + why);
}

const json& field(const json& j, const std::string& where, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) bad(where, name, "is missing");
  return *it;
}

std::uint64_t bytes_field(const json& j, const std::string& where, const char* name) {
  const json& v = field(j, where, name);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
    bad(where, name, "must be a whole number of bytes >= 0, got " + v.dump());
  const auto n = v.get<std::uint64_t>();
  if (n > kMaxBytes) bad(where, name, "= " + std::to_string(n) + " is out of range (at most 2^50)");
  return n;
}

double ms_field(const json& j, const std::string& where, const char* name) {
  const json& v = field(j, where, name);
  if (!v.is_number()) bad(where, name, "must be a number of milliseconds, got " + v.dump());
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < 0 || x > kMaxMs) bad(where, name, "= " + v.dump() + " is out of range (0 to 1e9 ms)");
  return x;
}

std::int32_t index_field(const json& j, const std::string& where, const char* name, std::int64_t lo, std::int64_t hi) {
  const json& v = field(j, where, name);
  if (!v.is_number_integer()) bad(where, name, "must be a whole number, got " + v.dump());
  const auto n = v.get<std::int64_t>();
  if (n < lo || n > hi)
    bad(where, name, "= " + std::to_string(n) + " is out of range (" + std::to_string(lo) + " to " + std::to_string(hi) + ")");
  return static_cast<std::int32_t>(n);
}

bool bool_field(const json& j, const std::string& where, const char* name) {
  const json& v = field(j, where, name);
  if (!v.is_boolean()) bad(where, name, "must be true or false, got " + v.dump());
  return v.get<bool>();
}

const json& array_field(const json& j, const std::string& where, const char* name) {
  const json& v = field(j, where, name);
  if (!v.is_array()) bad(where, name, "must be a list");
  if (v.size() > kMaxRecords) bad(where, name, "has " + std::to_string(v.size()) + " entries (at most 10^7)");
  return v;
}

json parse_object(const std::string& text, const char* what) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw format_error(std::string(what) + ": not JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw format_error(std::string(what) + ": not a JSON object");
  return j;
}

}  // namespace

std::string saved_trace_to_json(const SavedTrace& t) {
  json storages = json::array(), events = json::array();
  for (const auto& s : t.storages) storages.push_back({{"bytes", s.bytes}, {"movable", s.movable}});
  for (const auto& e : t.events)
    events.push_back({{"kind", e.kind == SavedEventKind::pack ? "pack" : "unpack"},
                      {"storage", e.storage},
                      {"t_ms", e.t_ms},
                      {"live", e.live},
                      {"window_peak", e.window_peak}});
  return json{{"storages", storages},
              {"events", events},
              {"step_ms", t.step_ms},
              {"optimizer_ms", t.optimizer_ms},
              {"context_bytes", t.context_bytes}}
      .dump();
}

SavedTrace saved_trace_from_json(const std::string& text) {
  const json j = parse_object(text, "saved-tensor trace");
  const std::string top = "saved-tensor trace";
  SavedTrace t;
  t.step_ms = ms_field(j, top, "step_ms");
  t.optimizer_ms = ms_field(j, top, "optimizer_ms");
  if (t.optimizer_ms > t.step_ms) bad(top, "optimizer_ms", "is longer than step_ms");
  t.context_bytes = bytes_field(j, top, "context_bytes");
  const json& storages = array_field(j, top, "storages");
  for (std::size_t i = 0; i < storages.size(); ++i) {
    const std::string where = top + ": storage " + std::to_string(i);
    if (!storages[i].is_object()) throw format_error(where + ": not an object");
    t.storages.push_back({bytes_field(storages[i], where, "bytes"), bool_field(storages[i], where, "movable")});
  }
  const json& events = array_field(j, top, "events");
  double last_t = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const std::string where = top + ": event " + std::to_string(i);
    const json& ej = events[i];
    if (!ej.is_object()) throw format_error(where + ": not an object");
    SavedEvent e;
    const json& kind = field(ej, where, "kind");
    if (kind == "pack")
      e.kind = SavedEventKind::pack;
    else if (kind == "unpack")
      e.kind = SavedEventKind::unpack;
    else
      bad(where, "kind", "must be \"pack\" or \"unpack\", got " + kind.dump());
    if (t.storages.empty()) bad(where, "storage", "refers to a storage, but 'storages' is empty");
    e.storage = index_field(ej, where, "storage", 0, static_cast<std::int64_t>(t.storages.size()) - 1);
    e.t_ms = ms_field(ej, where, "t_ms");
    if (e.t_ms + 1e-6 < last_t) bad(where, "t_ms", "goes back in time (" + std::to_string(e.t_ms) + " ms after " +
                                                       std::to_string(last_t) + " ms)");
    if (e.t_ms > t.step_ms + 1e-6) bad(where, "t_ms", "is after the step's end (step_ms)");
    last_t = e.t_ms;
    e.live = bytes_field(ej, where, "live");
    e.window_peak = bytes_field(ej, where, "window_peak");
    if (e.window_peak < e.live) bad(where, "window_peak", "is below 'live'");
    t.events.push_back(e);
  }
  return t;
}

SavedPlanOptions saved_plan_options_from_json(const std::string& text) {
  const json j = parse_object(text, "saved-tensor plan options");
  const std::string top = "saved-tensor plan options";
  SavedPlanOptions o;
  o.limit_bytes = bytes_field(j, top, "limit_bytes");
  for (auto [name, value] : {std::pair{"d2h_bytes_per_s", &o.d2h_bytes_per_s}, std::pair{"h2d_bytes_per_s", &o.h2d_bytes_per_s}}) {
    const json& v = field(j, top, name);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0 || v.get<double>() > 1e13)
      bad(top, name, "must be a bandwidth in bytes/s (> 0, at most 1e13), got " + v.dump());
    *value = v.get<double>();
  }
  if (j.contains("min_bytes")) o.min_bytes = bytes_field(j, top, "min_bytes");
  return o;
}

std::string saved_plan_to_json(const SavedPlan& p) {
  json moves = json::array();
  for (const auto& m : p.moves)
    moves.push_back({{"storage", m.storage},
                     {"copy_at", m.copy_at},
                     {"release_at", m.release_at},
                     {"fetch_at", m.fetch_at},
                     {"use_at", m.use_at}});
  return json{{"limit_bytes", p.limit_bytes},   {"moves", moves},
              {"bytes_out", p.bytes_out},       {"bytes_in", p.bytes_in},
              {"bytes_needed", p.bytes_needed}, {"planned_peak", p.planned_peak},
              {"fits", p.fits},                 {"over_at", p.over_at},
              {"predicted_ms", p.predicted_ms}, {"stall_ms", p.stall_ms},
              {"bound_ms", p.bound_ms}}
      .dump();
}

SavedPlan saved_plan_from_json(const std::string& text) {
  const json j = parse_object(text, "saved-tensor plan");
  const std::string top = "saved-tensor plan";
  SavedPlan p;
  constexpr std::int64_t kMaxIndex = std::numeric_limits<std::int32_t>::max();
  p.limit_bytes = bytes_field(j, top, "limit_bytes");
  p.bytes_out = bytes_field(j, top, "bytes_out");
  p.bytes_in = bytes_field(j, top, "bytes_in");
  p.bytes_needed = bytes_field(j, top, "bytes_needed");
  p.planned_peak = bytes_field(j, top, "planned_peak");
  p.fits = bool_field(j, top, "fits");
  p.over_at = index_field(j, top, "over_at", -1, kMaxIndex);
  p.predicted_ms = ms_field(j, top, "predicted_ms");
  p.stall_ms = ms_field(j, top, "stall_ms");
  p.bound_ms = ms_field(j, top, "bound_ms");
  const json& moves = array_field(j, top, "moves");
  for (std::size_t i = 0; i < moves.size(); ++i) {
    const std::string where = top + ": move " + std::to_string(i);
    const json& mj = moves[i];
    if (!mj.is_object()) throw format_error(where + ": not an object");
    SavedMove m;
    m.storage = index_field(mj, where, "storage", 0, kMaxIndex);
    m.copy_at = index_field(mj, where, "copy_at", 0, kMaxIndex);
    m.release_at = index_field(mj, where, "release_at", m.copy_at, kMaxIndex);
    m.fetch_at = index_field(mj, where, "fetch_at", -1, kMaxIndex);
    m.use_at = index_field(mj, where, "use_at", -1, kMaxIndex);
    if (m.fetch_at >= 0 && m.fetch_at <= m.release_at) bad(where, "fetch_at", "is not after 'release_at'");
    if (m.use_at >= 0 && (m.fetch_at < 0 || m.use_at < m.fetch_at)) bad(where, "use_at", "comes before 'fetch_at'");
    p.moves.push_back(m);
  }
  return p;
}

}  // namespace tierpack

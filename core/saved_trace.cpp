// JSON of SavedTrace and SavedPlan (see saved_trace.hpp). Every field is read by name and checked
// once here: a wrong type or an impossible value is a format_error naming the record and the field.
#include "core/saved_trace.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/detail/json_util.hpp"
#include "core/error.hpp"

namespace tierpack {
namespace {
constexpr double kMaxMs = 1e9;  // ~11 days: no step is longer
}  // namespace

// Readers of single records, used by detail::get_records (which names the record in errors).
void from_json(const nlohmann::json& j, SavedStorage& s) {
  detail::check_keys(j, {"bytes", "movable", "optimizer_state", "recompute_ms", "recompute_from", "recompute_group",
                         "held_in_forward", "block", "held_until"});
  detail::get(j, "bytes", s.bytes, std::uint64_t{0}, detail::kMaxBytes, detail::kMaxBytesText);
  detail::get(j, "movable", s.movable);
  if (j.contains("optimizer_state")) detail::get(j, "optimizer_state", s.optimizer_state);  // optional: false
  // Both optional (traces before Note [Recompute] have neither: nothing is recomputed).
  if (j.contains("recompute_ms")) detail::get(j, "recompute_ms", s.recompute_ms, 0.0, kMaxMs, "1e9 ms");
  if (j.contains("recompute_from")) {
    detail::get(j, "recompute_from", s.recompute_from);
    for (std::int32_t i : s.recompute_from) detail::check_range("recompute_from", i, 0, std::numeric_limits<std::int32_t>::max());
  }
  if (j.contains("recompute_group"))  // optional (traces before it: every recomputation its own)
    detail::get(j, "recompute_group", s.recompute_group, 0, std::numeric_limits<std::int32_t>::max(), "2^31 - 1");
  if (j.contains("held_in_forward")) detail::get(j, "held_in_forward", s.held_in_forward);  // optional: false
  if (j.contains("block"))  // optional (traces before Note [Block recompute]: no blocks)
    detail::get(j, "block", s.block, 0, std::numeric_limits<std::int32_t>::max(), "2^31 - 1");
  if (j.contains("held_until"))  // optional (traces before Note [Held storages]: nothing held)
    detail::get(j, "held_until", s.held_until, 0, std::numeric_limits<std::int32_t>::max(), "2^31 - 1");
}

void from_json(const nlohmann::json& j, SavedBlock& b) {
  detail::check_keys(j, {"ms", "from", "host_ms", "extra_bytes"});
  detail::get(j, "ms", b.ms, 0.0, kMaxMs, "1e9 ms");
  detail::get_or(j, "host_ms", b.host_ms, 0.0, kMaxMs, "1e9 ms");  // optional (before Note [Host time]: 0)
  // optional (before Note [Block run memory]: 0)
  detail::get_or(j, "extra_bytes", b.extra_bytes, std::uint64_t{0}, detail::kMaxBytes, detail::kMaxBytesText);
  detail::get(j, "from", b.from);
  for (std::int32_t i : b.from) detail::check_range("from", i, 0, std::numeric_limits<std::int32_t>::max());
}

void from_json(const nlohmann::json& j, SavedEvent& e) {
  detail::check_keys(j, {"kind", "storage", "t_ms", "live", "window_peak", "host_ms"});
  e.kind = detail::get_parsed(j, "kind", [](const std::string& k) {
    if (k == "pack") return SavedEventKind::pack;
    if (k == "unpack") return SavedEventKind::unpack;
    throw format_error("must be \"pack\" or \"unpack\", got \"" + k + "\"");
  });
  detail::get(j, "storage", e.storage, std::int32_t{0}, std::numeric_limits<std::int32_t>::max());
  detail::get(j, "t_ms", e.t_ms, 0.0, kMaxMs, "1e9 ms");
  detail::get(j, "live", e.live, std::uint64_t{0}, detail::kMaxTotalBytes, detail::kMaxTotalBytesText);
  detail::get(j, "window_peak", e.window_peak, std::uint64_t{0}, detail::kMaxTotalBytes, detail::kMaxTotalBytesText);
  if (e.window_peak < e.live) throw format_error("field 'window_peak' is below 'live'");
  if (j.contains("host_ms")) detail::get(j, "host_ms", e.host_ms, 0.0, kMaxMs, "1e9 ms");  // optional: not measured
}

void from_json(const nlohmann::json& j, SavedMove& m) {
  constexpr std::int32_t kMaxIndex = std::numeric_limits<std::int32_t>::max();
  detail::check_keys(j, {"storage", "copy_at", "release_at", "fetch_at", "use_at", "recompute", "by_block"});
  detail::get(j, "storage", m.storage, std::int32_t{0}, kMaxIndex);
  detail::get(j, "copy_at", m.copy_at, std::int32_t{0}, kMaxIndex);
  detail::get(j, "release_at", m.release_at, m.copy_at, kMaxIndex);
  detail::get(j, "fetch_at", m.fetch_at, std::int32_t{-1}, kMaxIndex);
  detail::get(j, "use_at", m.use_at, std::int32_t{-1}, kMaxIndex);
  if (j.contains("recompute")) detail::get(j, "recompute", m.recompute);
  if (j.contains("by_block")) detail::get(j, "by_block", m.by_block);
  if (m.by_block && !m.recompute) throw format_error("field 'by_block' is true for a storage that is not recomputed");
  if (m.recompute && m.use_at < 0) throw format_error("field 'use_at' of a recomputed storage is -1 (never used)");
  if (m.fetch_at >= 0 && m.fetch_at <= m.release_at) throw format_error("field 'fetch_at' is not after 'release_at'");
  if (m.use_at >= 0 && (m.fetch_at < 0 || m.use_at < m.fetch_at))
    throw format_error("field 'use_at' comes before 'fetch_at'");
}

namespace {

using nlohmann::json;

json parse_object(const std::string& text, const std::string& what) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw format_error(what + ": not JSON (" + detail::json_error_text(e) + ")");
  }
  if (!j.is_object()) throw format_error(what + ": not a JSON object");
  return j;
}

// Runs `read`; a format_error gets `what` in front ("saved-tensor trace: event 3: field 't_ms' ...").
template <class F>
void reading(const std::string& what, F&& read) {
  try {
    read();
  } catch (const format_error& e) {
    throw format_error(what + ": " + e.what());
  } catch (const json::exception& e) {
    throw format_error(what + ": " + detail::json_error_text(e));
  }
}

}  // namespace

std::string saved_trace_to_json(const SavedTrace& t) {
  json storages = json::array(), events = json::array();
  for (const auto& s : t.storages) {
    json st{{"bytes", s.bytes}, {"movable", s.movable}};
    if (s.recompute_ms >= 0) st["recompute_ms"] = s.recompute_ms, st["recompute_from"] = s.recompute_from;
    if (s.recompute_group >= 0) st["recompute_group"] = s.recompute_group;
    if (s.held_in_forward) st["held_in_forward"] = true;
    if (s.block >= 0) st["block"] = s.block;
    if (s.held_until >= 0) st["held_until"] = s.held_until;
    if (s.optimizer_state) st["optimizer_state"] = true;
    storages.push_back(st);
  }
  json blocks = json::array();
  for (const auto& b : t.blocks)
    blocks.push_back({{"ms", b.ms}, {"from", b.from}, {"host_ms", b.host_ms}, {"extra_bytes", b.extra_bytes}});
  for (const auto& e : t.events) {
    json ev{{"kind", e.kind == SavedEventKind::pack ? "pack" : "unpack"},
            {"storage", e.storage},
            {"t_ms", e.t_ms},
            {"live", e.live},
            {"window_peak", e.window_peak}};
    if (e.host_ms >= 0) ev["host_ms"] = e.host_ms;
    events.push_back(ev);
  }
  return json{{"storages", storages},
              {"events", events},
              {"blocks", blocks},
              {"step_ms", t.step_ms},
              {"optimizer_ms", t.optimizer_ms},
              {"context_bytes", t.context_bytes}}
      .dump();
}

SavedTrace saved_trace_from_json(const std::string& text) {
  const std::string what = "saved-tensor trace";
  const json j = parse_object(text, what);
  SavedTrace t;
  reading(what, [&] {
    detail::get(j, "step_ms", t.step_ms, 0.0, kMaxMs, "1e9 ms");
    detail::get(j, "optimizer_ms", t.optimizer_ms, 0.0, t.step_ms, "step_ms");
    detail::get(j, "context_bytes", t.context_bytes, std::uint64_t{0}, detail::kMaxBytes, detail::kMaxBytesText);
    detail::get_records(j, "storages", "storage", t.storages);
    detail::get_records(j, "events", "event", t.events);
    if (j.contains("blocks")) detail::get_records(j, "blocks", "block", t.blocks);  // optional: none
    for (std::size_t b = 0; b < t.blocks.size(); ++b)
      for (std::int32_t in : t.blocks[b].from)
        if (static_cast<std::size_t>(in) >= t.storages.size())
          throw format_error("block " + std::to_string(b) + ": field 'from' names storage " + std::to_string(in) + " (" +
                             std::to_string(t.storages.size()) + " storages)");
    for (std::size_t s = 0; s < t.storages.size(); ++s) {
      const std::int32_t b = t.storages[s].block;
      if (b >= 0 && static_cast<std::size_t>(b) >= t.blocks.size())
        throw format_error("storage " + std::to_string(s) + ": field 'block' = " + std::to_string(b) + " is out of range (" +
                           std::to_string(t.blocks.size()) + " blocks)");
      if (b >= 0) {
        const auto& from = t.blocks[static_cast<std::size_t>(b)].from;
        if (std::find(from.begin(), from.end(), static_cast<std::int32_t>(s)) != from.end())
          throw format_error("storage " + std::to_string(s) + ": field 'block' names block " + std::to_string(b) +
                             ", which reads it (a block's input is not made by it)");
      }
    }
    for (std::size_t s = 0; s < t.storages.size(); ++s)
      for (std::int32_t in : t.storages[s].recompute_from)
        if (static_cast<std::size_t>(in) >= t.storages.size() || static_cast<std::size_t>(in) == s)
          throw format_error("storage " + std::to_string(s) + ": field 'recompute_from' names storage " +
                             std::to_string(in) + " (" + std::to_string(t.storages.size()) +
                             " storages; not itself)");
    for (std::size_t s = 0; s < t.storages.size(); ++s)
      if (t.storages[s].held_until >= 0 && static_cast<std::size_t>(t.storages[s].held_until) > t.events.size())
        throw format_error("storage " + std::to_string(s) + ": field 'held_until' = " +
                           std::to_string(t.storages[s].held_until) + " is out of range (" +
                           std::to_string(t.events.size()) + " events)");
    double last = 0;
    for (std::size_t i = 0; i < t.events.size(); ++i) {
      const SavedEvent& e = t.events[i];
      const std::string where = "event " + std::to_string(i) + ": field ";
      if (static_cast<std::size_t>(e.storage) >= t.storages.size())
        throw format_error(where + "'storage' = " + std::to_string(e.storage) + " is out of range (" +
                           std::to_string(t.storages.size()) + " storages)");
      if (e.t_ms + 1e-6 < last) throw format_error(where + "'t_ms' goes back in time");
      if (e.t_ms > t.step_ms + 1e-6) throw format_error(where + "'t_ms' is after the step's end ('step_ms')");
      last = e.t_ms;
    }
  });
  return t;
}

SavedPlanOptions saved_plan_options_from_json(const std::string& text) {
  const std::string what = "saved-tensor plan options";
  const json j = parse_object(text, what);
  SavedPlanOptions o;
  reading(what, [&] {
    detail::check_keys(j, {"limit_bytes", "d2h_bytes_per_s", "h2d_bytes_per_s", "min_bytes", "recompute",
                           "host_ms_per_copy", "host_ms_per_remake", "stream_window_bytes", "both_ways_bytes_per_s"});
    detail::get(j, "limit_bytes", o.limit_bytes, std::uint64_t{0}, detail::kMaxTotalBytes, detail::kMaxTotalBytesText);
    detail::get(j, "d2h_bytes_per_s", o.d2h_bytes_per_s, 1.0, 1e13, "1e13 bytes/s");
    detail::get(j, "h2d_bytes_per_s", o.h2d_bytes_per_s, 1.0, 1e13, "1e13 bytes/s");
    detail::get_or(j, "min_bytes", o.min_bytes, std::uint64_t{0}, detail::kMaxBytes, detail::kMaxBytesText);
    if (j.contains("recompute")) detail::get(j, "recompute", o.recompute);
    detail::get_or(j, "host_ms_per_copy", o.host_ms_per_copy, 0.0, 1e3, "1000 ms");  // optional: not known
    detail::get_or(j, "host_ms_per_remake", o.host_ms_per_remake, 0.0, 1e3, "1000 ms");
    // optional (before Note [Streamed step]: 0, the step needs all its state)
    detail::get_or(j, "stream_window_bytes", o.stream_window_bytes, std::uint64_t{0}, detail::kMaxBytes,
                   detail::kMaxBytesText);
    detail::get_or(j, "both_ways_bytes_per_s", o.both_ways_bytes_per_s, 0.0, 1e13, "1e13 bytes/s");  // 0: not known
  });
  return o;
}

SavedRecord saved_record_from_json(const std::string& text) {
  const std::string what = "GPU tier's recorded iteration";
  const json j = parse_object(text, what);
  SavedRecord r;
  reading(what, [&] {
    detail::check_keys(j, {"format", "version", "budget", "fill", "trace", "options", "plan", "recomputations"});
    std::string format;
    detail::get(j, "format", format);
    if (format != "tierpack-gpu-saved")
      throw format_error("field 'format' is '" + format + "', not 'tierpack-gpu-saved' (the GPU tier's <stats>.gpu<N>.saved.json)");
    int version = 0;
    detail::get(j, "version", version, 1, 1, "1 (this tierpack reads version 1)");
    detail::get(j, "budget", r.budget, std::uint64_t{0}, detail::kMaxTotalBytes, detail::kMaxTotalBytesText);
    detail::get(j, "fill", r.fill, 0.01, 1.0, "1");
    if (!j.contains("trace") || !j["trace"].is_object()) throw format_error("field 'trace' is missing or not an object");
    if (!j.contains("options") || !j["options"].is_object())
      throw format_error("field 'options' is missing or not an object");
  });
  r.trace = saved_trace_from_json(j["trace"].dump());  // their own readers name their fields
  r.options = saved_plan_options_from_json(j["options"].dump());
  if (j.contains("recomputations")) {  // optional: written once the plan's first iteration was measured
    reading(what + ", field 'recomputations'", [&] {
      const json& m = j["recomputations"];
      if (!m.is_object()) throw format_error("not an object");
      detail::check_keys(m, {"iteration", "predicted_ms", "measured_ms", "storages"});
      detail::get(m, "iteration", r.measured_iteration, 0, std::numeric_limits<std::int32_t>::max(), "2^31 - 1");
      if (!m.contains("storages") || !m["storages"].is_array()) throw format_error("field 'storages' is missing or not a list");
      const auto n = static_cast<std::int32_t>(r.trace.storages.size());
      for (std::size_t k = 0; k < m["storages"].size(); ++k) {
        const json& e = m["storages"][k];
        const std::string at = "storages[" + std::to_string(k) + "]";
        if (!e.is_array() || e.size() != 3 || !e[0].is_number_integer() || !e[1].is_number() || !e[2].is_number())
          throw format_error(at + " is not [storage, predicted ms, measured ms]");
        SavedRecord::Measured x{e[0].get<std::int32_t>(), e[1].get<double>(), e[2].get<double>()};
        if (x.storage < 0 || x.storage >= n)
          throw format_error(at + " names storage " + std::to_string(x.storage) + " of " + std::to_string(n));
        if (!(x.predicted_ms >= 0 && x.predicted_ms <= kMaxMs) || !(x.measured_ms >= 0 && x.measured_ms <= kMaxMs))
          throw format_error(at + ": a time outside [0, 1e9] ms");
        r.measured.push_back(x);
      }
    });
  }
  return r;
}

std::string saved_plan_to_json(const SavedPlan& p) {
  json moves = json::array();
  for (const auto& m : p.moves)
    moves.push_back({{"storage", m.storage},
                     {"copy_at", m.copy_at},
                     {"release_at", m.release_at},
                     {"fetch_at", m.fetch_at},
                     {"use_at", m.use_at},
                     {"recompute", m.recompute},
                     {"by_block", m.by_block}});
  return json{{"limit_bytes", p.limit_bytes},
              {"moves", moves},
              {"bytes_out", p.bytes_out},
              {"bytes_in", p.bytes_in},
              {"bytes_recomputed", p.bytes_recomputed},
              {"bytes_needed", p.bytes_needed},
              {"planned_peak", p.planned_peak},
              {"fits", p.fits},
              {"over_at", p.over_at},
              {"predicted_ms", p.predicted_ms},
              {"stall_ms", p.stall_ms},
              {"bound_ms", p.bound_ms}}
      .dump();
}

SavedPlan saved_plan_from_json(const std::string& text) {
  const std::string what = "saved-tensor plan";
  const json j = parse_object(text, what);
  SavedPlan p;
  reading(what, [&] {
    const auto bytes = [&](const char* key, std::uint64_t& v) {
      detail::get(j, key, v, std::uint64_t{0}, detail::kMaxTotalBytes, detail::kMaxTotalBytesText);
    };
    bytes("limit_bytes", p.limit_bytes);
    bytes("bytes_out", p.bytes_out);
    bytes("bytes_in", p.bytes_in);
    if (j.contains("bytes_recomputed")) bytes("bytes_recomputed", p.bytes_recomputed);
    bytes("bytes_needed", p.bytes_needed);
    bytes("planned_peak", p.planned_peak);
    detail::get(j, "fits", p.fits);
    detail::get(j, "over_at", p.over_at, std::int32_t{-1}, std::numeric_limits<std::int32_t>::max());
    detail::get(j, "predicted_ms", p.predicted_ms, 0.0, kMaxMs, "1e9 ms");
    detail::get(j, "stall_ms", p.stall_ms, 0.0, kMaxMs, "1e9 ms");
    detail::get(j, "bound_ms", p.bound_ms, 0.0, kMaxMs, "1e9 ms");
    detail::get_records(j, "moves", "move", p.moves);
  });
  return p;
}

}  // namespace tierpack

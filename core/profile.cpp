// Profile queries, validation, JSON form and file I/O (see profile.hpp, docs/formats.md).
#include "core/profile.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <random>

#include "core/detail/json_util.hpp"
#include "core/file_envelope.hpp"

namespace tierpack {

namespace {
constexpr std::string_view kProfileFormat = "tierpack-profile";
}

std::uint64_t Profile::peak_bytes(int device) const {
  // Sweep births (+) and deaths (-) over op indices; a tensor dies after death_op.
  std::map<OpIndex, std::int64_t> delta;
  for (const auto& t : tensors) {
    if (t.device != device) continue;
    delta[t.birth_op] += static_cast<std::int64_t>(t.bytes);
    if (t.death_op != kAfterIteration) delta[t.death_op + 1] -= static_cast<std::int64_t>(t.bytes);
  }
  std::int64_t live = 0, peak = 0;
  for (const auto& [op, d] : delta) {
    live += d;
    peak = std::max(peak, live);
  }
  return static_cast<std::uint64_t>(peak);
}

std::string Profile::source_text(const TensorRecord& t) const {
  const SourceLocation* s = source_of(t);
  return s ? s->short_text() : std::string();
}

std::string Profile::module_text(const TensorRecord& t) const {
  const SourceLocation* s = source_of(t);
  if (!s) return {};
  if (!s->module.empty()) return s->module;
  const bool in_backward = t.birth_op >= 0 && static_cast<std::size_t>(t.birth_op) < ops.size() &&
                           ops[static_cast<std::size_t>(t.birth_op)].phase == Phase::backward;
  return in_backward ? "(backward)" : std::string();
}

void Profile::validate() const {
  const auto n_ops = static_cast<OpIndex>(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto& op = ops[i];
    if (op.index != static_cast<OpIndex>(i))
      throw format_error("op " + std::to_string(i) + " has index " + std::to_string(op.index));
    if (op.end_ns < op.begin_ns) throw format_error("op " + std::to_string(i) + " ends before it begins");
    if (op.parent >= static_cast<std::int32_t>(i)) throw format_error("op " + std::to_string(i) + " has a parent after it");
    for (auto t : op.inputs)
      if (t >= tensors.size()) throw format_error("op " + std::to_string(i) + " reads unknown tensor " + std::to_string(t));
    for (auto t : op.outputs)
      if (t >= tensors.size()) throw format_error("op " + std::to_string(i) + " writes unknown tensor " + std::to_string(t));
  }
  std::uint64_t total_bytes = 0;  // sums of tensor bytes downstream (peaks, sweeps) fit in an int64
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    const std::string where = "tensor " + std::to_string(i);
    if (t.bytes > detail::kMaxTotalBytes - total_bytes)
      throw format_error("the tensors add up to more than " + std::string(detail::kMaxTotalBytesText) +
                         " bytes (at tensor " + std::to_string(i) + ")");
    total_bytes += t.bytes;
    if (t.id != i) throw format_error(where + " has id " + std::to_string(t.id));
    if (t.birth_op != kBeforeIteration && (t.birth_op < 0 || t.birth_op > n_ops))
      throw format_error(where + ": birth op " + std::to_string(t.birth_op) + " out of range");
    if (t.death_op < t.birth_op)
      throw format_error(where + ": dies at op " + std::to_string(t.death_op) +
                         " (death_op), before it is born at op " + std::to_string(t.birth_op) + " (birth_op)");
    if (t.death_op != kAfterIteration && t.death_op > n_ops)
      throw format_error(where + ": death op " + std::to_string(t.death_op) + " out of range");
    if (!std::is_sorted(t.uses.begin(), t.uses.end())) throw format_error(where + ": uses not sorted");
    for (auto u : t.uses)
      if (u < 0 || u >= n_ops) throw format_error(where + ": use of op " + std::to_string(u) + " out of range");
    if (t.source >= 0 && static_cast<std::size_t>(t.source) >= sources.size())
      throw format_error(where + ": field 'source' = " + std::to_string(t.source) + " is out of range (the profile has " +
                         std::to_string(sources.size()) + " source(s))");
    if (t.tier != kNoTier && t.tier >= topology.tiers.size())
      throw format_error(where + ": tier " + std::to_string(t.tier) + " not in topology");
  }
  for (const auto& p : pages)
    for (auto t : p.tensors)
      if (t >= tensors.size()) throw format_error("page record refers to unknown tensor " + std::to_string(t));
}

void to_json(nlohmann::json& j, const Profile& p) {
  const auto& m = p.meta;
  nlohmann::json iters = nlohmann::json::array();
  for (const auto& it : p.iterations)
    iters.push_back({{"index", it.index},
                     {"duration_ns", it.duration_ns},
                     {"allocations", it.allocations},
                     {"signature", it.signature},
                     {"matches_profiled", it.matches_profiled}});
  nlohmann::json divs = nlohmann::json::array();
  for (const auto& d : p.divergences) divs.push_back({{"iteration", d.iteration}, {"seq", d.seq}, {"reason", d.reason}});
  j = nlohmann::json{{"format", kProfileFormat},
                     {"version", Profile::kFormatVersion},
                     {"meta",
                      {{"tool_version", m.tool_version},
                       {"command", m.command},
                       {"framework", m.framework},
                       {"page_tracer", m.page_tracer},
                       {"host_page_size", m.host_page_size},
                       {"created_unix", m.created_unix},
                       {"iterations_observed", m.iterations_observed},
                       {"profiled_iteration", m.profiled_iteration},
                       {"iteration_source", m.iteration_source}}},
                     {"topology", p.topology},
                     {"iteration_ns", p.iteration_ns},
                     {"ops", p.ops},
                     {"tensors", p.tensors},
                     {"pages", p.pages},
                     {"iterations", iters},
                     {"divergences", divs},
                     {"sources", p.sources}};
  // Only ranks of a distributed job carry these (older readers ignore unknown keys).
  if (m.rank >= 0) {
    j["meta"]["rank"] = m.rank;
    j["meta"]["world_size"] = m.world_size;
  }
  if (!m.id.empty()) j["meta"]["id"] = m.id;  // Note [Profile identity]
}

void from_json(const nlohmann::json& j, IterationInfo& info) {
  using namespace detail;
  check_keys(j, {"index", "duration_ns", "allocations", "signature", "matches_profiled"});
  get(j, "index", info.index, 0, std::numeric_limits<std::int32_t>::max());
  get_or(j, "duration_ns", info.duration_ns, std::uint64_t{0}, kMaxNs, kMaxNsText);
  get_or(j, "allocations", info.allocations);
  get_or(j, "signature", info.signature);
  get_or(j, "matches_profiled", info.matches_profiled);
}

void from_json(const nlohmann::json& j, Divergence& d) {
  using namespace detail;
  check_keys(j, {"iteration", "seq", "reason"});
  get(j, "iteration", d.iteration, 0, std::numeric_limits<std::int32_t>::max());
  get_or(j, "seq", d.seq, std::int64_t{-1}, std::numeric_limits<std::int64_t>::max());
  get_or(j, "reason", d.reason);
}

void from_json(const nlohmann::json& j, Profile& p) {
  using namespace detail;
  constexpr auto kMaxInt = std::numeric_limits<std::int32_t>::max();
  expect_object(j);
  if (!j.contains("meta")) throw format_error("missing field 'meta'");
  try {
    const auto& m = j.at("meta");
    check_keys(m, {"tool_version", "command", "framework", "page_tracer", "host_page_size", "created_unix",
                   "iterations_observed", "profiled_iteration", "iteration_source", "rank", "world_size", "id"});
    get_or(m, "id", p.meta.id);
    check_profile_id("id", p.meta.id);
    get_or(m, "tool_version", p.meta.tool_version);
    get_or(m, "command", p.meta.command);
    get_or(m, "framework", p.meta.framework);
    get_or(m, "page_tracer", p.meta.page_tracer);
    get_or(m, "host_page_size", p.meta.host_page_size, std::uint64_t{1}, kMaxPageSize, kMaxPageSizeText);
    check_page_size("host_page_size", p.meta.host_page_size);
    get_or(m, "created_unix", p.meta.created_unix, std::int64_t{0}, std::numeric_limits<std::int64_t>::max());
    get_or(m, "iterations_observed", p.meta.iterations_observed, 0, kMaxInt);
    get_or(m, "profiled_iteration", p.meta.profiled_iteration, -1, kMaxInt);
    get_or(m, "iteration_source", p.meta.iteration_source);
    get_or(m, "rank", p.meta.rank, -1, kMaxInt);
    get_or(m, "world_size", p.meta.world_size, 0, kMaxInt);
  } catch (const format_error& e) {
    rethrow_for_field("meta", e);
  }
  if (p.meta.rank >= 0 && p.meta.rank >= p.meta.world_size)
    throw format_error("meta.rank " + std::to_string(p.meta.rank) + " is outside meta.world_size " +
                       std::to_string(p.meta.world_size));
  get(j, "topology", p.topology);
  get_or(j, "iteration_ns", p.iteration_ns, std::uint64_t{0}, kMaxNs, kMaxNsText);
  get_records(j, "ops", "op", p.ops);
  get_records(j, "tensors", "tensor", p.tensors);
  get_records(j, "sources", "source", p.sources, false);  // version 2 (`module`: 3); absent in version 1 files
  get_records(j, "pages", "page record", p.pages, false);
  get_records(j, "iterations", "iteration", p.iterations, false);
  get_records(j, "divergences", "divergence", p.divergences, false);
}

std::string new_profile_id() {
  std::random_device rd;
  const std::uint64_t high = rd(), low = rd();
  const auto now = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return detail::hex16(((high << 32) | low) ^ (now * 0x9e3779b97f4a7c15ull));
}

std::string check_profile_identity(const Profile& profile, std::string_view profile_file, std::string_view made_from,
                                   std::string_view what, std::string_view file) {
  const std::string& id = profile.meta.id;
  if (!made_from.empty() && !id.empty()) {
    if (made_from == id) return {};
    throw logic_error(std::string(file) + " is the " + std::string(what) + " of profile " + std::string(made_from) +
                      ", not of " + std::string(profile_file) + " (profile " + id + "): give the " +
                      std::string(what) + " made from that profile");
  }
  return std::string(file) + ": identity unknown (" +
         (made_from.empty() ? std::string("written before files carried their profile's identity")
                            : std::string(profile_file) + " was written before profiles carried one") +
         "): not checked against " + std::string(profile_file);
}

void write_profile(const Profile& p, const std::string& path) {
  write_envelope(path, kProfileFormat, Profile::kFormatVersion, nlohmann::json(p).dump());
}

namespace {
Profile parse_payload(std::string_view payload, const std::string& path) {
  Profile p;
  try {
    from_json(nlohmann::json::parse(payload), p);
    p.validate();
  } catch (const nlohmann::json::exception& e) {
    throw format_error(path + ": invalid profile: " + detail::json_error_text(e));
  } catch (const format_error& e) {
    throw format_error(path + ": invalid profile: " + e.what());
  }
  return p;
}
}  // namespace

Profile read_profile(const std::string& path) {
  return parse_payload(read_envelope(path, kProfileFormat, Profile::kFormatVersion, nullptr, kMaxProfileBytes), path);
}

Profile parse_profile(std::string_view bytes, std::string_view name) {
  return parse_payload(parse_envelope(bytes, name, kProfileFormat, Profile::kFormatVersion), std::string(name));
}

}  // namespace tierpack

// Plan validation, JSON form and file I/O (see plan.hpp, docs/formats.md).
#include "core/plan.hpp"

#include <algorithm>

#include "core/detail/json_util.hpp"
#include "core/file_envelope.hpp"
#include "core/input_file.hpp"

namespace tierpack {
namespace {
constexpr std::string_view kPlanFormat = "tierpack-plan";
constexpr std::pair<std::string_view, MoveKind> kMoveKinds[] = {{"evict", MoveKind::evict},
                                                                {"prefetch", MoveKind::prefetch}};
}  // namespace

std::string_view to_string(MoveKind k) { return detail::enum_name(k, kMoveKinds); }
MoveKind parse_move_kind(std::string_view text) { return detail::enum_from_name("move kind", text, kMoveKinds); }

void Plan::validate() const {
  const auto n_tiers = topology.tiers.size();
  auto check_tier = [&](TierId t, const std::string& where) {
    if (t >= n_tiers) throw format_error(where + ": tier " + std::to_string(t) + " not in the plan's topology");
  };
  if (!groups.empty() || !schedule.empty()) {
    check_tier(fast_tier, "fast_tier");
    check_tier(slow_tier, "slow_tier");
  }
  std::uint64_t total_bytes = 0;  // sums of group bytes downstream (occupancy, replay) fit in an int64
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& g = groups[i];
    const std::string where = "group " + std::to_string(i);
    if (g.bytes > detail::kMaxTotalBytes - total_bytes)
      throw format_error("the groups add up to more than " + std::string(detail::kMaxTotalBytesText) + " bytes (at " +
                         where + ")");
    total_bytes += g.bytes;
    if (g.id != i) throw format_error(where + " has id " + std::to_string(g.id));
    check_tier(g.home, where);
    if (g.page_size == 0 || g.bytes % g.page_size != 0)
      throw format_error(where + ": size " + std::to_string(g.bytes) + " is not a multiple of its page size");
  }
  for (const auto& p : placements) {
    if (p.group >= groups.size())
      throw format_error("placement of seq " + std::to_string(p.seq) + " refers to unknown group " + std::to_string(p.group));
    if (p.offset_in_group + p.bytes > groups[p.group].bytes)
      throw format_error("placement of seq " + std::to_string(p.seq) + " overflows group " + std::to_string(p.group));
  }
  for (std::size_t i = 0; i < schedule.size(); ++i) {
    const auto& m = schedule[i];
    const std::string where = "move " + std::to_string(i);
    if (m.group >= groups.size()) throw format_error(where + " refers to unknown group " + std::to_string(m.group));
    check_tier(m.from, where);
    check_tier(m.to, where);
    if (m.from == m.to) throw format_error(where + " moves a group to the tier it is on");
  }
}

void to_json(nlohmann::json& j, const Plan& p) {
  nlohmann::json placements = nlohmann::json::array();
  for (const auto& t : p.placements)
    placements.push_back({{"tensor", t.tensor},
                          {"seq", t.seq},
                          {"address", t.address},
                          {"bytes", t.bytes},
                          {"class", to_string(t.cls)},
                          {"group", t.group},
                          {"offset", t.offset_in_group}});
  nlohmann::json schedule = nlohmann::json::array();
  for (const auto& m : p.schedule)
    schedule.push_back({{"group", m.group},
                        {"kind", to_string(m.kind)},
                        {"from", m.from},
                        {"to", m.to},
                        {"bytes", m.bytes},
                        {"issue_after", m.issue_after},
                        {"needed_by", m.needed_by},
                        {"predicted_start_ns", m.predicted_start_ns},
                        {"predicted_end_ns", m.predicted_end_ns}});
  const auto& pr = p.prediction;
  j = nlohmann::json{{"format", kPlanFormat},
                     {"version", Plan::kFormatVersion},
                     {"policy", p.policy},
                     {"profile_command", p.profile_command},
                     {"profile_signature", p.profile_signature},
                     {"profile_id", p.profile_id},
                     {"device", p.device},
                     {"fast_tier", p.fast_tier},
                     {"slow_tier", p.slow_tier},
                     {"fast_budget_bytes", p.fast_budget_bytes},
                     {"topology", p.topology},
                     {"groups", p.groups},
                     {"placements", placements},
                     {"schedule", schedule},
                     {"prediction",
                      {{"fast_peak_bytes", pr.fast_peak_bytes},
                       {"natural_peak_bytes", pr.natural_peak_bytes},
                       {"bytes_to_fast", pr.bytes_to_fast},
                       {"bytes_to_slow", pr.bytes_to_slow},
                       {"stall_ns", pr.stall_ns},
                       {"step_ns", pr.step_ns},
                       {"baseline_step_ns", pr.baseline_step_ns}}},
                     {"notes", p.notes}};
}

void from_json(const nlohmann::json& j, TensorPlacement& t) {
  using namespace detail;
  check_keys(j, {"tensor", "seq", "address", "bytes", "class", "group", "offset"});
  get(j, "tensor", t.tensor);
  get(j, "seq", t.seq, std::int64_t{-1}, std::numeric_limits<std::int64_t>::max());
  get_or(j, "address", t.address);
  get(j, "bytes", t.bytes, std::uint64_t{0}, kMaxBytes, kMaxBytesText);
  t.cls = get_parsed(j, "class", parse_tensor_class);
  get(j, "group", t.group);
  get(j, "offset", t.offset_in_group, std::uint64_t{0}, kMaxBytes, kMaxBytesText);
}

void from_json(const nlohmann::json& j, Move& m) {
  using namespace detail;
  check_keys(j, {"group", "kind", "from", "to", "bytes", "issue_after", "needed_by", "predicted_start_ns",
                 "predicted_end_ns"});
  get(j, "group", m.group);
  m.kind = get_parsed(j, "kind", parse_move_kind);
  get(j, "from", m.from);
  get(j, "to", m.to);
  get(j, "bytes", m.bytes, std::uint64_t{0}, kMaxBytes, kMaxBytesText);
  get(j, "issue_after", m.issue_after, kBeforeIteration, kAfterIteration);
  get(j, "needed_by", m.needed_by, kBeforeIteration, kAfterIteration);
  const double max_ns = static_cast<double>(kMaxNs);
  get_or(j, "predicted_start_ns", m.predicted_start_ns, 0.0, max_ns, kMaxNsText);
  get_or(j, "predicted_end_ns", m.predicted_end_ns, 0.0, max_ns, kMaxNsText);
}

void from_json(const nlohmann::json& j, PlanPrediction& pr) {
  using namespace detail;
  check_keys(j, {"fast_peak_bytes", "natural_peak_bytes", "bytes_to_fast", "bytes_to_slow", "stall_ns", "step_ns",
                 "baseline_step_ns"});
  const double max_ns = static_cast<double>(kMaxNs);
  get_or(j, "fast_peak_bytes", pr.fast_peak_bytes, std::uint64_t{0}, kMaxTotalBytes, kMaxTotalBytesText);
  get_or(j, "natural_peak_bytes", pr.natural_peak_bytes, std::uint64_t{0}, kMaxTotalBytes, kMaxTotalBytesText);
  get_or(j, "bytes_to_fast", pr.bytes_to_fast, std::uint64_t{0}, kMaxTotalBytes, kMaxTotalBytesText);
  get_or(j, "bytes_to_slow", pr.bytes_to_slow, std::uint64_t{0}, kMaxTotalBytes, kMaxTotalBytesText);
  get_or(j, "stall_ns", pr.stall_ns, 0.0, max_ns, kMaxNsText);
  get_or(j, "step_ns", pr.step_ns, 0.0, max_ns, kMaxNsText);
  get_or(j, "baseline_step_ns", pr.baseline_step_ns, 0.0, max_ns, kMaxNsText);
}

void from_json(const nlohmann::json& j, Plan& p) {
  using namespace detail;
  expect_object(j);
  if (j.value("format", std::string()) != kPlanFormat) throw format_error("not a tierpack plan (missing \"format\": \"tierpack-plan\")");
  int version = 0;
  get(j, "version", version);
  if (version > Plan::kFormatVersion)
    throw format_error("plan version " + std::to_string(version) + " is newer than this tierpack reads (up to " +
                       std::to_string(Plan::kFormatVersion) + "); upgrade tierpack");
  if (version < 1) throw format_error("invalid plan version " + std::to_string(version));
  get_or(j, "policy", p.policy);
  get_or(j, "profile_command", p.profile_command);
  get_or(j, "profile_signature", p.profile_signature);
  get_or(j, "profile_id", p.profile_id);
  check_profile_id("profile_id", p.profile_id);
  get_or(j, "device", p.device, -1, kMaxDevice);
  get(j, "fast_tier", p.fast_tier);
  get(j, "slow_tier", p.slow_tier);
  get(j, "fast_budget_bytes", p.fast_budget_bytes, std::uint64_t{0}, kMaxTotalBytes, kMaxTotalBytesText);
  get(j, "topology", p.topology);
  get_records(j, "groups", "group", p.groups);
  get_records(j, "placements", "placement", p.placements);
  get_records(j, "schedule", "move", p.schedule);
  get(j, "prediction", p.prediction);
  get_or(j, "notes", p.notes);
}

void write_plan(const Plan& p, const std::string& path) {
  write_file_atomic(path, nlohmann::json(p).dump(1) + "\n");
}

Plan read_plan(const std::string& path) { return parse_plan(read_file(path, kMaxJsonFileBytes), path); }

Plan parse_plan(std::string_view text, std::string_view name) {
  const std::string path(name);
  Plan p;
  try {
    from_json(nlohmann::json::parse(text), p);
    p.validate();
  } catch (const nlohmann::json::exception& e) {
    throw format_error(path + ": invalid plan: " + detail::json_error_text(e));
  } catch (const format_error& e) {
    throw format_error(path + ": invalid plan: " + e.what());
  }
  return p;
}

}  // namespace tierpack

// Predicted vs measured step times (see validation.hpp).
#include "experiment/validation.hpp"

#include <algorithm>
#include <cstdlib>

#include "core/error.hpp"
#include "core/units.hpp"
#include "placer/baselines.hpp"
#include "placer/replay.hpp"

namespace tierpack::experiment {
namespace {

double parse_duration_ns(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const std::string unit(end ? end : "");
  if (end == text.c_str() || !(v > 0)) throw logic_error("bad duration '" + text + "' (e.g. 145ms)");
  if (unit == "ns") return v;
  if (unit == "us") return v * 1e3;
  if (unit == "ms") return v * 1e6;
  if (unit == "s") return v * 1e9;
  throw logic_error("bad duration unit in '" + text + "' (ns, us, ms, s)");
}

}  // namespace

std::vector<Measurement> parse_measurements(const std::string& text) {
  std::vector<Measurement> out;
  for (std::size_t pos = 0; pos <= text.size();) {
    const std::size_t end = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, end - pos);
    pos = end + 1;
    const auto eq = item.find('=');
    if (eq == std::string::npos) throw logic_error("measurement '" + item + "' is not POLICY[@BUDGET]=DURATION");
    Measurement m;
    const std::string key = item.substr(0, eq);
    const auto at = key.find('@');
    m.policy = key.substr(0, at);
    if (at != std::string::npos) m.budget = key.substr(at + 1);
    if (m.policy != "all-fast" && m.policy != "page-aware" && m.policy != "page-agnostic")
      throw logic_error("measurement '" + item + "': policy must be all-fast, page-aware or page-agnostic");
    if (m.policy != "all-fast" && m.budget.empty()) throw logic_error("measurement '" + item + "' needs @BUDGET");
    if (!m.budget.empty()) (void)parse_budget(m.budget);
    m.measured_ns = parse_duration_ns(item.substr(eq + 1));
    out.push_back(m);
  }
  return out;
}

std::vector<ValidationRow> validate(const Profile& profile, const TierModel& model, const placer::PlanOptions& base,
                                    const std::vector<Measurement>& measured, const std::string& source) {
  std::vector<ValidationRow> rows;
  for (const Measurement& m : measured) {
    ValidationRow v;
    v.measured_ns = m.measured_ns;
    v.source = source;
    placer::PlanOptions o = base;
    if (m.policy == "all-fast") {
      v.what = "all-fast (no offloading)";
      const auto setup = placer::make_baseline_setup(model, o.device, UINT64_MAX);
      v.predicted_ns = placer::replay_all_fast(profile, setup).step_ns;
    } else {
      o.fast_budget = parse_budget(m.budget);
      o.policy = m.policy;
      const std::uint64_t budget = placer::resolve_budget(profile, model, o);
      v.what = m.policy + " at " + m.budget + " (" + format_bytes(budget) + ")";
      const Plan plan = placer::make_plan(profile, model, o);
      v.predicted_ns = placer::replay_plan(profile, plan, model).step_ns;
    }
    rows.push_back(v);
  }
  return rows;
}

}  // namespace tierpack::experiment

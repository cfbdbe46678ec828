// Placer flags for the CLI (see placer_args.hpp).
#include "integrations/cli/placer_args.hpp"

#include <algorithm>
#include <charconv>

#include "core/error.hpp"
#include "core/units.hpp"

namespace tierpack::cli {

PlannerInputs planner_inputs(const Args& args, const Profile& profile, const Plan* plan) {
  PlannerInputs in;
  if (auto tiers = args.get("--tiers")) {
    try {
      in.model = load_tier_model(*tiers);
    } catch (const format_error&) {
      throw;  // a tier-model file that cannot be read is a failure, not a usage error
    } catch (const logic_error& e) {
      throw usage_error(std::string("--tiers: ") + e.what());
    }
  } else if (plan) {
    in.model = plan->topology;
  } else {
    in.model = profile.topology;
    if (in.model.tiers.empty()) throw usage_error("--tiers is needed: the profile records no tiers");
    try {
      validate_tier_model(in.model);
    } catch (const logic_error& e) {
      throw usage_error(std::string("the profile's tiers cannot be used (") + e.what() + "); pass --tiers");
    }
  }
  auto& o = in.options;
  o.device = plan ? plan->device : placer::main_device(profile);
  if (auto d = args.get("--device")) {
    if (*d == "host") {
      o.device = -1;
    } else {
      int v = -1;
      auto [p, ec] = std::from_chars(d->data(), d->data() + d->size(), v);
      if (ec != std::errc{} || p != d->data() + d->size() || v < 0)
        throw usage_error("--device: '" + *d + "' is not a GPU ordinal or 'host'");
      o.device = v;
    }
  }
  if (args.has("--gpu-budget") && args.has("--fast-budget"))
    throw usage_error("give either --gpu-budget or --fast-budget, not both");
  for (const char* flag : {"--gpu-budget", "--fast-budget"}) {
    const auto text = args.get(flag);
    if (!text) continue;
    try {
      o.fast_budget = parse_budget(*text);
    } catch (const logic_error& e) {
      throw usage_error(std::string(flag) + ": " + e.what());
    }
    if (std::string_view(flag) == "--gpu-budget" && o.device < 0)
      throw usage_error("--gpu-budget: the tensors planned are host tensors (use --fast-budget, or --device N)");
  }
  if (auto policy = args.get("--policy")) {
    const auto policies = placer::plan_policies();
    if (std::find(policies.begin(), policies.end(), *policy) == policies.end())
      throw usage_error("--policy: unknown policy '" + *policy + "' (accepted: page-aware, page-agnostic)");
    o.policy = *policy;
  } else if (plan) {
    o.policy = plan->policy;
  }
  if (auto size = args.get("--group-size")) {
    try {
      o.group_bytes = parse_bytes(*size);
    } catch (const logic_error& e) {
      throw usage_error(std::string("--group-size: ") + e.what());
    }
    if (o.group_bytes == 0) throw usage_error("--group-size must be positive");
  }
  return in;
}

}  // namespace tierpack::cli

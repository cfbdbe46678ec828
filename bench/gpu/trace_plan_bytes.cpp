// What the GPU runtime's built-in planner (placer/vmm_plan.hpp) would move for a profile,
// by budget: bytes each way per iteration against the least any plan must move (natural peak minus
// the budget the plan fills), and the predicted device peak. No GPU needed: it plans from the
// profile's tensors with op indices as the clock (the runtime plans on its allocator's event clock,
// so its figures differ somewhat; the runtime logs its own plan at startup).
//   build/bench/gpu/trace_plan_bytes run.tpk [--chunk 64M] [--headroom 0.85] [--budgets 100,75,60,45,35]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/profile.hpp"
#include "core/units.hpp"
#include "placer/vmm_plan.hpp"

namespace {

using namespace tierpack;

gpu::IterationTrace trace_of(const Profile& p) {
  gpu::IterationTrace tr;
  const auto n = static_cast<std::int64_t>(p.ops.size());
  tr.clock_end = n;
  std::uint64_t segment = 1;
  for (const TensorRecord& r : p.tensors) {
    gpu::TracedTensor t;
    t.seq = r.seq;
    t.address = r.address;
    t.bytes = r.bytes;
    t.birth = r.birth_op < 0 ? 0 : r.birth_op;
    t.death = r.death_op >= n ? -1 : r.death_op;
    if (r.seq < 0) {  // alive across iterations: one segment each (as if the runtime's were pure)
      t.birth = 0;
      t.death = -1;
      t.segment = segment++;
      t.segment_bytes = r.bytes;
    }
    for (OpIndex u : r.uses) t.uses.push_back({u, u});
    tr.tensors.push_back(std::move(t));
  }
  return tr;
}

// A number of a flag in (lo, hi]; anything else is a logic_error naming the flag and the text.
double number(const std::string& flag, const std::string& text, double lo, double hi) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v > lo && v <= hi))
    throw logic_error("trace_plan_bytes: " + flag + ": bad value '" + text + "'");
  return v;
}

int run(int argc, char** argv) {
  if (argc < 2) throw logic_error("usage: trace_plan_bytes run.tpk [--chunk SIZE] [--headroom F] [--budgets P,P,...]");
  std::uint64_t chunk = std::uint64_t{64} << 20;
  double headroom = 0.85;
  std::vector<double> budgets = {100, 75, 60, 45, 35};
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) throw logic_error("trace_plan_bytes: " + a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--chunk") chunk = parse_bytes(v);
    else if (a == "--headroom") headroom = number(a, v, 0, 1);
    else if (a == "--budgets") {
      budgets.clear();
      for (std::size_t at = 0; at <= v.size();) {
        const std::size_t comma = std::min(v.find(',', at), v.size());
        budgets.push_back(number(a, v.substr(at, comma - at), 0, 100));
        at = comma + 1;
      }
    } else {
      throw logic_error("trace_plan_bytes: unknown option " + a);
    }
  }
  const gpu::IterationTrace tr = trace_of(read_profile(argv[1]));
  gpu::VmmPlanOptions o;
  o.chunk_bytes = chunk;
  o.headroom = headroom;
  const std::uint64_t natural = gpu::plan_from_trace(tr, o).prediction.natural_peak_bytes;
  std::printf("natural peak %s, chunk %s, plan fills %.2f of the budget\n\n", format_bytes(natural).c_str(),
              format_bytes(chunk).c_str(), headroom);
  std::printf("| budget | planned to | least each way | planned to host | back | moved / least | kept on host | predicted peak | groups |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (double pct : budgets) {
    o.budget = static_cast<std::uint64_t>(pct / 100.0 * static_cast<double>(natural));
    const Plan plan = gpu::plan_from_trace(tr, o);
    const auto filled = static_cast<std::uint64_t>(static_cast<double>(o.budget) * headroom);
    const std::uint64_t least = natural > filled ? natural - filled : 0;
    // Groups with an eviction and no prefetch stay on the host (Note [Groups that live on the host]).
    std::vector<int> prefetched(plan.groups.size(), 0);
    for (const Move& m : plan.schedule)
      if (m.kind == MoveKind::prefetch) prefetched[m.group] = 1;
    std::uint64_t kept = 0;
    for (const PageGroup& g : plan.groups)
      if (!prefetched[g.id]) kept += g.bytes;
    char ratio[32] = "-";
    if (least > 0)
      std::snprintf(ratio, sizeof ratio, "%.2fx", static_cast<double>(plan.prediction.bytes_to_slow) / static_cast<double>(least));
    std::printf("| %.0f%% (%s) | %s | %s | %s | %s | %s | %s | %s | %zu |\n", pct, format_bytes(o.budget).c_str(),
                format_bytes(filled).c_str(), format_bytes(least).c_str(),
                format_bytes(plan.prediction.bytes_to_slow).c_str(), format_bytes(plan.prediction.bytes_to_fast).c_str(),
                ratio, format_bytes(kept).c_str(), format_bytes(plan.prediction.fast_peak_bytes).c_str(), plan.groups.size());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}

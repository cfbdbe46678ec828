// How long planning takes and how it grows with the profile: make_plan (classify, pack, assign,
// schedule, and the simulated predictions) on synthetic training iterations of 1k, 10k and 100k
// tensors, on the H200 preset with 30% of the peak as GPU budget, for both packing policies; plus the
// stages alone (classify + pack, the simulator). Target: 100k tensors in <= 1 s on one core.
//   build/bench/placer/placer_bench --benchmark_filter=MakePlan
#include <benchmark/benchmark.h>

#include <map>

#include "core/tier_spec.hpp"
#include "placer/classify.hpp"
#include "placer/pack.hpp"
#include "placer/planner.hpp"
#include "placer/replay.hpp"
#include "tests/support/synthetic_profile.hpp"

using namespace tierpack;
using namespace tierpack::placer;

namespace {

const Profile& profile_of(std::uint32_t tensors) {
  static std::map<std::uint32_t, Profile> cache;
  auto it = cache.find(tensors);
  if (it == cache.end()) {
    synth::SyntheticOptions o;
    o.tensors = tensors;
    o.seed = 1;
    o.hidden_access_fraction = 0.01;
    it = cache.emplace(tensors, synth::make_synthetic_profile(o)).first;
  }
  return it->second;
}

PlanOptions options(const char* policy) {
  PlanOptions o;
  o.device = 0;
  o.fast_budget.fraction = 0.3;
  o.policy = policy;
  return o;
}

void BM_MakePlan(benchmark::State& state, const char* policy) {
  const Profile& p = profile_of(static_cast<std::uint32_t>(state.range(0)));
  const TierModel model = tier_preset("h200-pcie");
  const PlanOptions o = options(policy);
  std::size_t moves = 0, groups = 0;
  for (auto _ : state) {
    const Plan plan = make_plan(p, model, o);
    moves = plan.schedule.size();
    groups = plan.groups.size();
    benchmark::DoNotOptimize(plan.prediction.step_ns);
  }
  state.counters["tensors"] = static_cast<double>(p.tensors.size());
  state.counters["ops"] = static_cast<double>(p.ops.size());
  state.counters["groups"] = static_cast<double>(groups);
  state.counters["moves"] = static_cast<double>(moves);
  state.SetComplexityN(static_cast<std::int64_t>(p.tensors.size()));
}

void BM_ClassifyAndPack(benchmark::State& state) {
  const Profile& p = profile_of(static_cast<std::uint32_t>(state.range(0)));
  PackOptions o;
  o.page_size = 2ull << 20;
  o.group_bytes = 32ull << 20;
  for (auto _ : state) {
    const Packing k = pack(p, classify(p, 0), o);
    benchmark::DoNotOptimize(k.groups.size());
  }
  state.SetComplexityN(static_cast<std::int64_t>(p.tensors.size()));
}

void BM_Replay(benchmark::State& state) {
  const Profile& p = profile_of(static_cast<std::uint32_t>(state.range(0)));
  const TierModel model = tier_preset("h200-pcie");
  const Plan plan = make_plan(p, model, options("page-aware"));
  ReplayOptions ro;
  ro.count_mixed_pages = false;
  for (auto _ : state) benchmark::DoNotOptimize(replay_plan(p, plan, model, ro).step_ns);
  state.SetComplexityN(static_cast<std::int64_t>(p.tensors.size()));
}

}  // namespace

BENCHMARK_CAPTURE(BM_MakePlan, page_aware, "page-aware")->RangeMultiplier(10)->Range(1000, 100000)->Unit(benchmark::kMillisecond)->Complexity();
BENCHMARK_CAPTURE(BM_MakePlan, page_agnostic, "page-agnostic")->RangeMultiplier(10)->Range(1000, 100000)->Unit(benchmark::kMillisecond)->Complexity();
BENCHMARK(BM_ClassifyAndPack)->RangeMultiplier(10)->Range(1000, 100000)->Unit(benchmark::kMillisecond)->Complexity();
BENCHMARK(BM_Replay)->RangeMultiplier(10)->Range(1000, 100000)->Unit(benchmark::kMillisecond)->Complexity();

BENCHMARK_MAIN();

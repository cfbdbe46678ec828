// How long `tierpack report` takes to compute its statistics and render each file, for profiles of
// about 1k, 10k and 100k tensors (the report fixture's training step; ~14 tensors and 10 ops per
// layer). Reading the input files is not included (core's read_profile).
//   build/bench/report/report_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>

#include "report/html_report.hpp"
#include "report/memory_snapshot.hpp"
#include "report/perfetto_trace.hpp"
#include "report/summary.hpp"
#include "tests/report/report_fixtures.hpp"

namespace {

using namespace tierpack;
using namespace tierpack::report;

const Profile& profile_of(int layers) {
  static std::map<int, Profile> cache;
  auto it = cache.find(layers);
  if (it == cache.end()) {
    testing::FixtureOptions o;
    o.layers = layers;
    it = cache.emplace(layers, testing::make_training_profile(o)).first;
  }
  return it->second;
}

ReportModel model_of(const Profile& p) {
  ReportInputs in;
  in.profile = &p;
  return build_model(in, {});
}

void counters(benchmark::State& state, const Profile& p, std::size_t bytes) {
  state.counters["tensors"] = static_cast<double>(p.tensors.size());
  state.counters["ops"] = static_cast<double>(p.ops.size());
  state.counters["MiB"] = static_cast<double>(bytes) / (1 << 20);
}

void BM_Model(benchmark::State& state) {
  const auto& p = profile_of(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(model_of(p));
  counters(state, p, 0);
}

void BM_Html(benchmark::State& state) {
  const auto& p = profile_of(static_cast<int>(state.range(0)));
  const auto m = model_of(p);
  std::size_t bytes = 0;
  for (auto _ : state) bytes = render_html(m).size();
  counters(state, p, bytes);
}

void BM_Trace(benchmark::State& state) {
  const auto& p = profile_of(static_cast<int>(state.range(0)));
  const auto m = model_of(p);
  std::size_t bytes = 0;
  for (auto _ : state) bytes = render_trace(m).size();
  counters(state, p, bytes);
}

void BM_SnapshotJson(benchmark::State& state) {
  const auto& p = profile_of(static_cast<int>(state.range(0)));
  const auto m = model_of(p);
  std::size_t bytes = 0;
  for (auto _ : state) bytes = snapshot_json(m, build_snapshot(m)).size();
  counters(state, p, bytes);
}

void BM_SnapshotPickle(benchmark::State& state) {
  const auto& p = profile_of(static_cast<int>(state.range(0)));
  const auto m = model_of(p);
  const auto snap = build_snapshot(m);
  std::size_t bytes = 0;
  for (auto _ : state) bytes = snapshot_pickle(m, snap).size();
  counters(state, p, bytes);
}

// Streaming to files (what `tierpack report` does): no output held in memory.
void BM_WriteTraceFile(benchmark::State& state) {
  const auto& p = profile_of(static_cast<int>(state.range(0)));
  const auto m = model_of(p);
  const std::string path = "/tmp/tierpack_report_bench_trace.json";
  std::size_t bytes = 0;
  for (auto _ : state) bytes = write_trace(m, path);
  std::remove(path.c_str());
  counters(state, p, bytes);
}

void BM_WriteSnapshotFiles(benchmark::State& state) {
  const auto& p = profile_of(static_cast<int>(state.range(0)));
  const auto m = model_of(p);
  const std::string path = "/tmp/tierpack_report_bench_snapshot";
  std::size_t bytes = 0;
  for (auto _ : state) {
    const auto snap = build_snapshot(m);
    bytes = write_snapshot_file(m, snap, path + ".json", false) + write_snapshot_file(m, snap, path + ".pickle", true);
  }
  std::remove((path + ".json").c_str());
  std::remove((path + ".pickle").c_str());
  counters(state, p, bytes);
}

// 72, 720 and 7200 layers: about 1k, 10k and 100k tensors.
#define SIZES Arg(72)->Arg(720)->Arg(7200)->Unit(benchmark::kMillisecond)
BENCHMARK(BM_Model)->SIZES;
BENCHMARK(BM_Html)->SIZES;
BENCHMARK(BM_Trace)->SIZES;
BENCHMARK(BM_SnapshotJson)->SIZES;
BENCHMARK(BM_SnapshotPickle)->SIZES;
BENCHMARK(BM_WriteTraceFile)->SIZES;
BENCHMARK(BM_WriteSnapshotFiles)->SIZES;

}  // namespace

BENCHMARK_MAIN();

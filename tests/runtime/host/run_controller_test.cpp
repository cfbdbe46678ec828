// The run controller without torch: a Session in run mode fed a small training loop by hand (as the
// torch hooks do), on this machine's real allocator and mover. Checks the phases (profile -> plan ->
// apply), that blocks from before the plan go back to the profiling arena, that planned iterations
// are routed by the plan, that data survives, and the statistics file.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"

#include "runtime/host/run_controller.hpp"
#include "runtime/session/session.hpp"

using namespace tierpack;
namespace fs = std::filesystem;

namespace {

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("tierpack_run_" + std::to_string(::getpid()) + "_" + name)).string();
}

/// What the torch hooks do for one CPU tensor.
struct Loop {
  Session& s;
  void* alloc(std::size_t n, unsigned char fill) {
    HostMemory* mem = s.host_memory_for_new();
    EXPECT_NE(mem, nullptr);
    void* p = mem->allocate(n);
    EXPECT_NE(p, nullptr);
    std::memset(p, fill, n);
    s.on_alloc(p, n, -1, 0, mem->page_trackable());
    return p;
  }
  void free(void* p) {
    s.on_free(p, -1);
    HostMemory* mem = s.host_memory();
    ASSERT_TRUE(mem->owns(p));
    mem->deallocate(p);
  }
  bool intact(const void* p, std::size_t n, unsigned char fill) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i)
      if (b[i] != fill) return false;
    return true;
  }
  template <class F>
  void op(const char* name, Phase phase, F&& body) {
    const auto t = s.op_begin(name, {}, phase);
    body();
    s.op_end(t, name, {});
  }
  /// One iteration: an activation saved from forward to backward, temporaries, an optimizer step.
  void iteration(void* param, std::size_t param_bytes) {
    void* act = nullptr;
    op("fwd", Phase::forward, [&] { act = alloc(512 << 10, 0xa5); });
    for (int i = 0; i < 8; ++i)
      op("tmp", Phase::forward, [&] {
        void* t = alloc(64 << 10, 0x11);
        EXPECT_TRUE(intact(param, param_bytes, 0x77));
        free(t);
      });
    op("bwd", Phase::backward, [&] {
      EXPECT_TRUE(intact(act, 512 << 10, 0xa5));
      free(act);
    });
    const auto t = s.op_begin("Optimizer.step#SGD.step", {}, Phase::optimizer);
    s.op_end(t, "Optimizer.step#SGD.step", {});
    s.mark_iteration(IterationSource::optimizer_step);
  }
};

}  // namespace

TEST(RunController, ProfilesPlansAndAppliesFromTheNextIteration) {
  Config c;
  c.mode = RunMode::run;
  c.page_tracer = PageTracerKind::off;
  c.log = LogLevel::quiet;
  c.tiers = "dram:16G+cxl:64G";  // the cxl tier is emulated on node 0 where this machine lacks node 1
  c.fast_budget = parse_budget("60%");
  c.stats_out = temp_path("stats.json");
  c.profile_out = temp_path("run.tpk");
  SessionOptions o;
  o.create_host_memory = false;
  o.discover_topology = false;
  Session s(c, o);
  auto controller = RunController::attach(s, c);
  s.start();
  Loop loop{s};
  EXPECT_EQ(s.host_memory()->name(), "profiling-arena");
  const std::size_t param_bytes = 256 << 10;
  void* param = loop.alloc(param_bytes, 0x77);  // persistent, from before the plan
  for (int it = 0; it < 5; ++it) {
    loop.iteration(param, param_bytes);
    if (it >= 1) {
      EXPECT_EQ(s.host_memory()->name(), "host-runtime") << "after iteration " << it;
    }
  }
  EXPECT_TRUE(controller->plan_error().empty()) << controller->plan_error();
  EXPECT_TRUE(loop.intact(param, param_bytes, 0x77));
  // A block from the profiling arena, freed after the runtime took over, goes back to the arena.
  auto* memory = static_cast<RunMemory*>(s.host_memory());
  ASSERT_NE(memory->arena(), nullptr);
  EXPECT_TRUE(memory->arena()->owns(param));
  loop.free(param);
  s.finish();

  std::ifstream in(c.stats_out);
  ASSERT_TRUE(in.good());
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["format"], "tierpack-run-stats");
  const auto& r = j["tierpack_run"];
  EXPECT_TRUE(r["plan_applied"].get<bool>());
  EXPECT_EQ(r["apply_from"], 2);
  int planned = 0;
  for (const auto& it : r["iterations"]) {
    if (!it["planned"].get<bool>()) continue;
    ++planned;
    EXPECT_EQ(it["routed_by_plan"], it["allocations"]) << it.dump();
    EXPECT_EQ(it["mismatched"], 0);
    if (it["moves"]["moves_partial"] == 0) {  // a partial eviction keeps its charge on the fast tier
      EXPECT_LE(it["fast_peak_bytes"].get<std::uint64_t>(), j["fast_budget_bytes"].get<std::uint64_t>()) << it.dump();
    }
  }
  EXPECT_EQ(planned, 3);
  // The sampled iteration's moves: each one the runtime issued (the executor's log), within the iteration.
  for (const auto& it : r["iterations"]) {
    if (it["index"] != j["sampled_iteration"]) continue;
    EXPECT_EQ(j["moves"].size(), it["moves"]["moves_submitted"].get<std::size_t>()) << it.dump();
    for (const auto& m : j["moves"]) {
      EXPECT_LE(m["start_ns"].get<std::uint64_t>(), m["end_ns"].get<std::uint64_t>()) << m.dump();
      EXPECT_LE(m["end_ns"].get<std::uint64_t>(), it["step_ns"].get<std::uint64_t>()) << m.dump();
    }
  }
  // The parameter from before the plan was carried by the runtime (Note [Tensors from before the
  // plan]): its bytes counted on the tiers, and its free dropped it so no later move touches it.
  EXPECT_EQ(r["arena_fast_bytes"].get<std::uint64_t>() + r["arena_slow_bytes"].get<std::uint64_t>(), param_bytes) << r.dump();
  EXPECT_EQ(r["arena_tensors_carried_at_exit"], 0) << r.dump();
  EXPECT_TRUE(r["arena_move_checks"].is_array());
  EXPECT_TRUE(fs::exists(temp_path("run.plan.json")));
  fs::remove(c.stats_out);
  fs::remove(c.profile_out);
  fs::remove(temp_path("run.plan.json"));
}

TEST(RunController, AGivenPlanThatNamesGpuTensorsIsRefused) {
  Plan p;
  p.device = 0;
  const std::string path = temp_path("gpu.plan.json");
  write_plan(p, path);
  Config c;
  c.mode = RunMode::run;
  c.page_tracer = PageTracerKind::off;
  c.log = LogLevel::quiet;
  c.plan_in = path;
  SessionOptions o;
  o.create_host_memory = false;
  o.discover_topology = false;
  Session s(c, o);
  EXPECT_THROW(RunController::attach(s, c), tierpack::error);
  fs::remove(path);
}

// The recorder against hand-fed event streams whose tensors, ops and lifetimes are known.
#include <gtest/gtest.h>

#include <thread>

#include "core/error.hpp"
#include "profiler/event_recorder.hpp"

using namespace tierpack;

namespace {

RecorderOptions test_options(int warmup = 1, int iterations = 1) {
  RecorderOptions o;
  o.warmup_iterations = warmup;
  o.profile_iterations = iterations;
  o.discover_topology = false;
  Tier dram;
  dram.kind = TierKind::host_dram;
  dram.name = "dram0";
  dram.numa_node = 0;
  o.topology.add(dram);
  o.command = "test";
  o.framework = "synthetic";
  return o;
}

const void* P(std::uintptr_t a) { return reinterpret_cast<const void*>(a); }

/// Drives a recorder like a framework would.
struct Driver {
  EventRecorder& r;
  EventRecorder::OpToken begin(std::string_view name, std::vector<std::uintptr_t> in = {}, Phase ph = Phase::unknown) {
    std::vector<const void*> ptrs;
    for (auto a : in) ptrs.push_back(P(a));
    return r.op_begin(name, ptrs, ph);
  }
  void end(EventRecorder::OpToken t, std::vector<std::uintptr_t> out = {}) {
    std::vector<const void*> ptrs;
    for (auto a : out) ptrs.push_back(P(a));
    r.op_end(t, ptrs);
  }
  /// An op that allocates `bytes` at `addr` inside a nested aten::empty and returns it.
  void make(std::string_view name, std::uintptr_t addr, std::size_t bytes, std::vector<std::uintptr_t> in = {},
            int device = -1) {
    auto t = begin(name, in);
    auto e = begin("aten::empty");
    r.alloc(P(addr), bytes, device);
    end(e, {addr});
    end(t, {addr});
  }
  void use(std::string_view name, std::vector<std::uintptr_t> in, std::vector<std::uintptr_t> out = {}) {
    auto t = begin(name, in);
    end(t, out);
  }
};

const TensorRecord* by_address(const Profile& p, std::uintptr_t a) {
  for (const auto& t : p.tensors)
    if (t.address == a) return &t;
  return nullptr;
}

OpIndex op_named(const Profile& p, std::string_view name, int nth = 0) {
  for (const auto& op : p.ops)
    if (op.name == name && nth-- == 0) return op.index;
  return -100;
}

constexpr std::uintptr_t kParam = 0x100000, kAct = 0x200000, kTmp = 0x300000, kOut = 0x400000;

/// One training-like iteration with known tensors: a parameter (allocated before), an activation
/// made in forward and freed in backward, a temporary, and an output kept past the iteration.
void iteration(Driver& d, int i) {
  d.make("fwd.linear", kAct, 1000, {kParam});
  d.make("fwd.tmp", kTmp, 64, {kAct + 100});  // a view into the activation
  d.use("fwd.relu", {kTmp});
  d.r.free(P(kTmp));
  auto b = d.begin("bwd.linear", {kAct}, Phase::backward);
  d.use("aten::mm", {kAct, kParam});  // nested: inherits backward
  d.r.free(P(kAct));
  d.end(b);
  if (i > 0) d.r.free(P(kOut + 0x1000 * static_cast<std::uintptr_t>(i - 1)));
  d.make("opt.step", kOut + 0x1000 * static_cast<std::uintptr_t>(i), 128, {kParam});
  d.r.mark_iteration(IterationSource::explicit_mark);
}

}  // namespace

TEST(EventRecorder, IdleRecorderIgnoresEverything) {
  EventRecorder r(test_options());
  EXPECT_FALSE(r.active());
  r.alloc(P(kParam), 4096, -1);
  EXPECT_EQ(r.op_begin("x"), EventRecorder::kNoOp);
  r.mark_iteration(IterationSource::explicit_mark);
  EXPECT_EQ(r.stats().live_allocations, 0u);
  EXPECT_EQ(r.stats().iterations, 0);
}

TEST(EventRecorder, RecordsKnownLifetimesAfterWarmup) {
  EventRecorder r(test_options(1));
  r.start();
  Driver d{r};
  r.alloc(P(kParam), 4096, -1);
  r.mark(TensorRole::parameter, P(kParam));
  for (int i = 0; i < 3; ++i) iteration(d, i);
  ASSERT_TRUE(r.profile_ready());
  const Profile p = r.finish();
  p.validate();
  EXPECT_EQ(p.meta.profiled_iteration, 1);
  EXPECT_EQ(p.meta.iterations_observed, 3);
  EXPECT_EQ(p.meta.iteration_source, "explicit");
  ASSERT_EQ(p.iterations.size(), 3u);

  // Alive at the start: the parameter and iteration 0's output.
  const TensorRecord* param = by_address(p, kParam);
  ASSERT_NE(param, nullptr);
  EXPECT_EQ(param->seq, -1);
  EXPECT_EQ(param->birth_op, kBeforeIteration);
  EXPECT_EQ(param->death_op, kAfterIteration);
  EXPECT_TRUE(param->has(kTensorParameter));
  const TensorRecord* old_out = by_address(p, kOut);
  ASSERT_NE(old_out, nullptr);
  EXPECT_EQ(old_out->birth_op, kBeforeIteration);
  EXPECT_EQ(old_out->alloc_op, "aten::empty");
  EXPECT_NE(old_out->death_op, kAfterIteration);

  // The activation: seq 0, allocated by aten::empty inside fwd.linear, freed inside bwd.linear.
  const TensorRecord* act = by_address(p, kAct);
  ASSERT_NE(act, nullptr);
  EXPECT_EQ(act->seq, 0);
  EXPECT_EQ(act->bytes, 1000u);
  EXPECT_EQ(act->alloc_op, "aten::empty");
  EXPECT_EQ(act->birth_op, op_named(p, "aten::empty", 0));
  EXPECT_EQ(p.ops[static_cast<std::size_t>(act->birth_op)].parent, op_named(p, "fwd.linear"));
  EXPECT_EQ(act->death_op, op_named(p, "bwd.linear"));  // freed after aten::mm ended, inside bwd.linear
  // Used by: its aten::empty (output), fwd.linear (output), fwd.tmp (view input), bwd.linear, aten::mm.
  std::vector<OpIndex> want = {op_named(p, "fwd.linear"), op_named(p, "aten::empty", 0), op_named(p, "fwd.tmp"),
                               op_named(p, "bwd.linear"), op_named(p, "aten::mm")};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(act->uses, want);

  // The temporary: seq 1, freed between ops -> death at the last op begun (fwd.relu).
  const TensorRecord* tmp = by_address(p, kTmp);
  ASSERT_NE(tmp, nullptr);
  EXPECT_EQ(tmp->seq, 1);
  EXPECT_EQ(tmp->death_op, op_named(p, "fwd.relu"));

  // The new output: seq 2, alive after the iteration.
  const TensorRecord* out = by_address(p, kOut + 0x1000);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->seq, 2);
  EXPECT_EQ(out->death_op, kAfterIteration);

  // Phases: backward inherited by the nested op; top level without hint is forward.
  EXPECT_EQ(p.ops[static_cast<std::size_t>(op_named(p, "aten::mm"))].phase, Phase::backward);
  EXPECT_EQ(p.ops[static_cast<std::size_t>(op_named(p, "fwd.relu"))].phase, Phase::forward);
  EXPECT_EQ(p.ops[static_cast<std::size_t>(op_named(p, "aten::mm"))].parent, op_named(p, "bwd.linear"));
  // Iterations 1 and 2 allocate the same sequence; iteration 0 did too here (param before start()).
  EXPECT_TRUE(p.iterations[2].matches_profiled);
  EXPECT_TRUE(p.divergences.empty());
  EXPECT_EQ(p.iterations[1].signature, p.iterations[2].signature);
}

TEST(EventRecorder, SequenceNumbersArePerDevice) {
  EventRecorder r(test_options(0));
  r.start();
  Driver d{r};
  d.make("a", 0x1000, 10, {}, -1);
  d.make("b", 0x7000000, 20, {}, 0);
  d.make("c", 0x2000, 30, {}, -1);
  d.make("d", 0x7100000, 40, {}, 0);
  const Profile p = r.finish();
  EXPECT_EQ(p.meta.iteration_source, "whole-run");
  EXPECT_EQ(by_address(p, 0x1000)->seq, 0);
  EXPECT_EQ(by_address(p, 0x2000)->seq, 1);
  EXPECT_EQ(by_address(p, 0x7000000)->seq, 0);
  EXPECT_EQ(by_address(p, 0x7100000)->seq, 1);
  EXPECT_EQ(by_address(p, 0x7100000)->device, 0);
  EXPECT_EQ(p.peak_bytes(0), 60u);
}

TEST(EventRecorder, DetectsDivergenceOfALaterIteration) {
  EventRecorder r(test_options(1, 1));
  r.start();
  Driver d{r};
  for (int i = 0; i < 5; ++i) {
    const std::size_t bytes = i == 3 ? 2048 : 1024;  // iteration 3 has another shape
    d.make("x", 0x10000, bytes);
    d.make("y", 0x20000, 512);
    r.free(P(0x10000));
    r.free(P(0x20000));
    r.mark_iteration(IterationSource::optimizer_step);
  }
  const Profile p = r.finish();
  ASSERT_EQ(p.divergences.size(), 1u);
  EXPECT_EQ(p.divergences[0].iteration, 3);
  EXPECT_EQ(p.divergences[0].seq, 0);
  EXPECT_NE(p.divergences[0].reason.find("2048 != 1024"), std::string::npos) << p.divergences[0].reason;
  ASSERT_EQ(p.iterations.size(), 5u);
  EXPECT_TRUE(p.iterations[2].matches_profiled);
  EXPECT_FALSE(p.iterations[3].matches_profiled);
  EXPECT_TRUE(p.iterations[4].matches_profiled);
  EXPECT_EQ(r.stats().divergent_iterations, 1u);
}

TEST(EventRecorder, MissingAllocationsAreADivergence) {
  EventRecorder r(test_options(0));
  r.start();
  Driver d{r};
  for (int i = 0; i < 3; ++i) {
    d.make("x", 0x10000, 64);
    if (i != 2) d.make("y", 0x20000, 64);
    r.free(P(0x10000));
    r.free(P(0x20000));
    r.mark_iteration(IterationSource::explicit_mark);
  }
  const Profile p = r.finish();
  ASSERT_EQ(p.divergences.size(), 1u);
  EXPECT_EQ(p.divergences[0].iteration, 2);
  EXPECT_EQ(p.divergences[0].seq, 1);
}

TEST(EventRecorder, ExplicitMarksOverrideOptimizerMarks) {
  EventRecorder r(test_options(1));
  r.start();
  Driver d{r};
  for (int i = 0; i < 3; ++i) {
    d.make("x", 0x10000, 64);
    r.mark_iteration(IterationSource::optimizer_step);  // e.g. two optimizers per iteration
    d.make("y", 0x20000, 64);
    r.free(P(0x10000));
    r.free(P(0x20000));
    r.mark_iteration(IterationSource::explicit_mark);
  }
  // The first optimizer mark counted (no explicit mark seen yet); after that only explicit ones.
  const auto s = r.stats();
  EXPECT_EQ(s.iterations, 4);
  EXPECT_EQ(s.ignored_marks, 2u);
  EXPECT_EQ(s.iteration_source, "explicit");
}

TEST(EventRecorder, SnapshotBeforeAnyIterationExplainsWhy) {
  EventRecorder r(test_options(1));
  r.start();
  Driver d{r};
  d.make("x", 0x10000, 64);
  try {
    (void)r.snapshot();
    FAIL() << "expected logic_error";
  } catch (const logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("tierpack.step()"), std::string::npos) << e.what();
  }
}

TEST(EventRecorder, OpsOnTwoThreadsGetTheirOwnNestingAndNumbers) {
  EventRecorder r(test_options(0));
  r.start();
  Driver d{r};
  auto outer = d.begin("main.outer");
  std::thread t([&] {
    Driver d2{r};
    auto b = d2.begin("autograd.node", {}, Phase::backward);
    d2.use("aten::mul", {});
    d2.end(b);
  });
  t.join();
  d.use("main.inner", {});
  d.end(outer);
  const Profile p = r.finish();
  const auto& node = p.ops[static_cast<std::size_t>(op_named(p, "autograd.node"))];
  const auto& mul = p.ops[static_cast<std::size_t>(op_named(p, "aten::mul"))];
  const auto& inner = p.ops[static_cast<std::size_t>(op_named(p, "main.inner"))];
  EXPECT_EQ(node.parent, -1);
  EXPECT_EQ(mul.parent, node.index);
  EXPECT_EQ(mul.phase, Phase::backward);
  EXPECT_EQ(inner.parent, op_named(p, "main.outer"));
  EXPECT_NE(node.thread, inner.thread);
}

TEST(EventRecorder, RoleMarksAfterTheRecordingStillReachTheProfile) {
  EventRecorder r(test_options(0));
  r.start();
  Driver d{r};
  d.make("grad", 0x50000, 256);
  r.mark_iteration(IterationSource::optimizer_step);
  r.mark(TensorRole::gradient, P(0x50000 + 8));
  const Profile p = r.finish();
  EXPECT_TRUE(by_address(p, 0x50000)->has(kTensorGradient));
}

TEST(EventRecorder, UnendedOpsAreClosedByTheirParent) {
  EventRecorder r(test_options(0));
  r.start();
  Driver d{r};
  auto a = d.begin("outer");
  d.begin("inner.never.ends");
  d.end(a);
  d.use("next", {});
  const Profile p = r.finish();
  EXPECT_EQ(p.ops[static_cast<std::size_t>(op_named(p, "next"))].parent, -1);
}

/// A program without marks: setup, then iterations whose forward repeats one layer 4 times
/// (activations pile up), backward frees them, then an optimizer-like loop of temporaries.
void unmarked_iteration(EventRecorder& r, int layers) {
  Driver d{r};
  for (int l = 0; l < layers; ++l) d.make("aten::linear", 0x1000000 + 0x10000 * static_cast<std::uintptr_t>(l), 4096);
  for (int l = layers - 1; l >= 0; --l) {
    d.make("aten::mm", 0x3000000, 4096, {}, -1);
    r.free(P(0x3000000));
    r.free(P(0x1000000 + 0x10000 * static_cast<std::uintptr_t>(l)));
  }
  for (int k = 0; k < 4; ++k) {
    d.make("aten::add", 0x4000000, 512);
    r.free(P(0x4000000));
  }
}

TEST(EventRecorder, FindsIterationsByPeriodicityWithoutMarks) {
  EventRecorder r(test_options(1));
  r.start();
  Driver d{r};
  for (int i = 0; i < 6; ++i) d.make("setup", 0x9000000 + 0x1000 * static_cast<std::uintptr_t>(i), 100 + i);
  for (int it = 0; it < 8; ++it) unmarked_iteration(r, 4);
  const auto s = r.stats();
  EXPECT_EQ(s.iteration_source, "periodicity");
  const Profile p = r.finish();
  EXPECT_GE(p.meta.profiled_iteration, 1);
  // One iteration allocates 4 activations + 4 grads + 4 temporaries; the boundary sits where live
  // memory is lowest, i.e. between the optimizer loop and the next forward.
  int in_iteration = 0;
  for (const auto& t : p.tensors) in_iteration += t.seq >= 0 ? 1 : 0;
  EXPECT_EQ(in_iteration, 12);
  EXPECT_EQ(p.tensors.size(), 6u + 12u);  // the setup tensors are alive too
  for (const auto& t : p.tensors)
    if (t.seq == 0) {
      EXPECT_EQ(t.address, 0x1000000u);
    }
  EXPECT_TRUE(p.divergences.empty());
}

TEST(EventRecorder, MarksStopPeriodicityDetection) {
  EventRecorder r(test_options(1));
  r.start();
  for (int it = 0; it < 6; ++it) {
    unmarked_iteration(r, 2);
    r.mark_iteration(IterationSource::explicit_mark);
  }
  EXPECT_EQ(r.stats().iteration_source, "explicit");
  EXPECT_EQ(r.stats().iterations, 6);
}

TEST(EventRecorder, MaxIterationsStopsObserving) {
  auto o = test_options(1);
  o.max_iterations = 3;
  EventRecorder r(o);
  r.start();
  Driver d{r};
  for (int i = 0; i < 5; ++i) {
    d.make("x", 0x10000, 64);
    r.free(P(0x10000));
    r.mark_iteration(IterationSource::explicit_mark);
  }
  EXPECT_FALSE(r.active());
  const Profile p = r.finish();
  EXPECT_EQ(p.meta.iterations_observed, 3);
}

TEST(EventRecorder, OpsOpenAtTheBoundaryBelongToTheRecordedIteration) {
  EventRecorder r(test_options(1));
  r.start();
  Driver d{r};
  auto scope = d.begin("user.train_step");
  d.make("x", 0x10000, 64);
  r.mark_iteration(IterationSource::explicit_mark);  // tierpack.step() inside the user's scope
  d.make("y", 0x20000, 64);
  d.end(scope);
  r.mark_iteration(IterationSource::explicit_mark);
  const Profile p = r.finish();
  p.validate();
  ASSERT_FALSE(p.ops.empty());
  EXPECT_EQ(p.ops[0].name, "user.train_step");
  EXPECT_EQ(p.ops[0].begin_ns, 0u);
  EXPECT_EQ(p.ops[static_cast<std::size_t>(op_named(p, "y"))].parent, 0);
}

TEST(EventRecorder, AllocationSourcesAreInternedAndKeptForLiveTensors) {
  EventRecorder r(test_options(1));
  EXPECT_FALSE(r.wants_sources());  // idle
  r.start();
  EXPECT_TRUE(r.wants_sources());   // warm-up: tensors born now may live into the profiled iteration
  const SourceRef model{"/home/me/model.py", 12, "__init__"};
  const SourceRef loop{"/home/me/train.py", 40, "<module>"};
  const SourceRef unused{"/home/me/data.py", 7, "load"};
  r.alloc(P(kParam), 4096, -1, 0, false, model);
  r.alloc(P(0x900000), 64, -1, 0, false, unused);  // freed in warm-up: not in the profile
  r.free(P(0x900000));
  r.mark_iteration(IterationSource::explicit_mark);
  EXPECT_TRUE(r.recording());
  EXPECT_TRUE(r.wants_sources());
  // Views of a caller's buffer: the recorder keeps its own copy of the text.
  std::string file = "/home/me/train.py";
  r.alloc(P(kAct), 1000, -1, 0, false, SourceRef{file, 40, "<module>"});
  file = "overwritten";
  r.alloc(P(kTmp), 64, -1, 0, false, loop);  // the same source: one entry
  r.alloc(P(kOut), 128, -1);                 // none known
  r.mark_iteration(IterationSource::explicit_mark);
  EXPECT_FALSE(r.wants_sources());  // recorded: later allocations are not asked for theirs
  const Profile p = r.finish();
  p.validate();
  ASSERT_EQ(p.sources.size(), 2u);  // the unused one is dropped
  const TensorRecord* param = by_address(p, kParam);
  ASSERT_NE(param, nullptr);
  EXPECT_EQ(p.source_text(*param), "model.py:12 __init__");
  ASSERT_NE(p.source_of(*param), nullptr);
  EXPECT_EQ(p.source_of(*param)->file, "/home/me/model.py");
  const TensorRecord* act = by_address(p, kAct);
  const TensorRecord* tmp = by_address(p, kTmp);
  ASSERT_TRUE(act && tmp);
  EXPECT_EQ(act->source, tmp->source);
  EXPECT_EQ(p.source_text(*act), "train.py:40 <module>");
  EXPECT_EQ(by_address(p, kOut)->source, -1);
}

// Note [Module paths]: one line run in two modules is two sources (the twelve blocks of a transformer
// share their lines); the recorder keeps its own copy of the module's text too.
TEST(EventRecorder, ModulePathsArePartOfTheSource) {
  EventRecorder r(test_options(0));
  r.start();
  ASSERT_TRUE(r.recording());
  std::string module = "blocks.0.fc";
  r.alloc(P(kAct), 1000, -1, 0, false, SourceRef{"/home/me/model.py", 21, "forward", module});
  module = "blocks.1.fc";
  r.alloc(P(kTmp), 1000, -1, 0, false, SourceRef{"/home/me/model.py", 21, "forward", module});
  module = "overwritten";
  r.alloc(P(kOut), 1000, -1, 0, false, SourceRef{"/home/me/model.py", 21, "forward"});
  const Profile p = r.finish();
  p.validate();
  ASSERT_EQ(p.sources.size(), 3u);
  EXPECT_EQ(p.module_text(*by_address(p, kAct)), "blocks.0.fc");
  EXPECT_EQ(p.module_text(*by_address(p, kTmp)), "blocks.1.fc");
  EXPECT_EQ(p.module_text(*by_address(p, kOut)), "");
  EXPECT_EQ(p.source_text(*by_address(p, kAct)), p.source_text(*by_address(p, kTmp)));
}

// The Session and the profiling arena without torch: events fed by hand, real page tracers watching
// real arena memory, the profile written to a file and read back.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <filesystem>

#include "core/error.hpp"
#include "core/profile.hpp"
#include "runtime/session/profiling_arena.hpp"
#include "runtime/session/session.hpp"

using namespace tierpack;
namespace fs = std::filesystem;

namespace {

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("tierpack_session_" + std::to_string(::getpid()) + "_" + name)).string();
}

Config profile_config(const std::string& out, PageTracerKind tracer) {
  Config c;
  c.mode = RunMode::profile;
  c.profile_out = out;
  c.warmup_iterations = 1;
  c.page_tracer = tracer;
  c.log = LogLevel::quiet;
  return c;
}

const TensorRecord* by_address(const Profile& p, const void* a) {
  for (const auto& t : p.tensors)
    if (t.address == reinterpret_cast<std::uintptr_t>(a)) return &t;
  return nullptr;
}

class Listener final : public EventListener {
 public:
  void on_alloc(const void*, std::size_t, int, std::uint64_t) noexcept override { ++allocs; }
  void on_iteration(std::int32_t, IterationSource s) noexcept override {
    ++iterations;
    source = s;
  }
  void on_finish() noexcept override { ++finishes; }
  int allocs = 0, iterations = 0, finishes = 0;
  IterationSource source = IterationSource::periodicity;
};

}  // namespace

TEST(ProfilingArena, ServesAlignedTrackableMemoryItOwns) {
  ProfilingArena arena(std::size_t{1} << 30);
  void* small = arena.allocate(100);
  void* big = arena.allocate(1 << 20);
  ASSERT_NE(small, nullptr);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(small) % 64, 0u);
  EXPECT_TRUE(arena.owns(small));
  EXPECT_TRUE(arena.owns(big));
  int on_stack = 0;
  EXPECT_FALSE(arena.owns(&on_stack));
  std::memset(big, 1, 1 << 20);
  arena.deallocate(small);
  arena.deallocate(big);
  void* again = arena.allocate(1 << 20);  // reuse retained extents
  EXPECT_TRUE(arena.owns(again));
  arena.deallocate(again);
  EXPECT_GT(arena.mapped_bytes(), 0u);
}

TEST(Session, OffModeBuildsNothing) {
  Config c;
  Session s(c);
  s.start();
  EXPECT_EQ(s.recorder(), nullptr);
  EXPECT_EQ(s.host_memory_for_new(), nullptr);
  EXPECT_FALSE(s.wants_ops());
  EXPECT_TRUE(s.finish());
}

TEST(Session, ProfileModeNeedsAnOutput) {
  Config c;
  c.mode = RunMode::profile;
  EXPECT_THROW(Session{c}, logic_error);
}

TEST(Session, WritesTheProfileWhenTheIterationEndsAndUpdatesItAtFinish) {
  const std::string out = temp_path("basic.tpk");
  SessionOptions o;
  o.command = "session_test";
  o.discover_topology = false;
  Session s(profile_config(out, PageTracerKind::off), o);
  auto listener = std::make_shared<Listener>();
  s.add_listener(listener);
  s.start();
  HostMemory* mem = s.host_memory_for_new();
  ASSERT_NE(mem, nullptr);
  for (int it = 0; it < 4; ++it) {
    void* p = mem->allocate(4096);
    s.on_alloc(p, 4096, -1, 0, mem->page_trackable());
    std::vector<const void*> in{p};
    auto tok = s.op_begin("aten::relu", in, Phase::unknown);
    s.op_end(tok, "aten::relu", {});
    s.on_free(p, -1);
    mem->deallocate(p);
    s.mark_iteration(IterationSource::explicit_mark);
    if (it == 1) {
      // Written (by a background thread) as soon as the profiled iteration ended, before finish().
      for (int wait = 0; wait < 1000 && !fs::exists(out); ++wait) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      EXPECT_TRUE(fs::exists(out));
    }
  }
  EXPECT_TRUE(s.finish());
  EXPECT_TRUE(s.finish());  // idempotent
  EXPECT_EQ(listener->allocs, 4);
  EXPECT_EQ(listener->iterations, 4);
  EXPECT_EQ(listener->finishes, 1);
  EXPECT_EQ(listener->source, IterationSource::explicit_mark);
  const Profile p = read_profile(out);
  EXPECT_EQ(p.meta.iterations_observed, 4);  // the update at finish
  EXPECT_EQ(p.meta.command, "session_test");
  EXPECT_EQ(p.meta.profiled_iteration, 1);
  EXPECT_NE(s.status_json().find("\"profile_written\":true"), std::string::npos) << s.status_json();
  // After the profile, new CPU tensors go back to the framework's allocator.
  EXPECT_EQ(s.host_memory_for_new(), nullptr);
  fs::remove(out);
}

TEST(Session, ReportsWhyNoProfileWasWritten) {
  const std::string out = temp_path("none.tpk");
  SessionOptions o;
  o.discover_topology = false;
  Session s(profile_config(out, PageTracerKind::off), o);
  s.start();
  EXPECT_FALSE(s.finish());  // no iteration boundary ever came
  EXPECT_FALSE(fs::exists(out));
}

// Real arena memory, real tracers: an op writes one tensor; memory written between ops, behind the
// framework's back, is a hidden access; two tensors of different lifetimes share a page.
class SessionWithTracer : public ::testing::TestWithParam<PageTracerKind> {};

TEST_P(SessionWithTracer, FindsTouchedPagesHiddenAccessesAndFalseSharing) {
  std::string why;
  std::unique_ptr<PageTracer> probe;
  try {
    probe = make_page_tracer(GetParam(), &why);
  } catch (const std::exception& e) {
    GTEST_SKIP() << "tracer unavailable here: " << e.what();
  }
  if (!probe) GTEST_SKIP() << "tracer unavailable here: " << why;
  probe.reset();
  const std::string out = temp_path("traced.tpk");
  SessionOptions o;
  o.discover_topology = false;
  Session s(profile_config(out, GetParam()), o);
  s.start();
  HostMemory* mem = s.host_memory_for_new();
  ASSERT_NE(mem, nullptr);
  const std::size_t kBig = 8 * 4096;
  auto alloc = [&](std::size_t n) {
    void* p = mem->allocate(n);
    s.on_alloc(p, n, -1, 0, true);
    return p;
  };
  void* weight = alloc(64);                  // persistent, small: shares a slab page...
  void* hidden = alloc(kBig);                // written behind the framework's back
  void* act = nullptr;
  for (int it = 0; it < 3; ++it) {
    void* tmp = alloc(64);                   // ...with this temporary
    std::vector<const void*> in{weight};
    auto op = s.op_begin("aten::add", in, Phase::unknown);
    act = alloc(kBig);
    std::memset(act, it + 1, kBig);
    std::memset(tmp, 1, 64);
    std::vector<const void*> outs{act, tmp};
    s.op_end(op, "aten::add", outs);
    std::memset(hidden, it + 1, kBig);       // no op running, no op uses it
    auto op2 = s.op_begin("aten::relu", std::vector<const void*>{act}, Phase::unknown);
    s.op_end(op2, "aten::relu", {});
    s.on_free(tmp, -1);
    mem->deallocate(tmp);
    s.on_free(act, -1);
    mem->deallocate(act);
    s.mark_iteration(IterationSource::explicit_mark);
  }
  ASSERT_TRUE(s.finish());
  const Profile p = read_profile(out);
  EXPECT_NE(p.meta.page_tracer, "none");
  const TensorRecord* h = by_address(p, hidden);
  ASSERT_NE(h, nullptr);
  EXPECT_TRUE(h->has(kTensorHiddenAccess));
  EXPECT_EQ(h->pages, 8u);
  EXPECT_EQ(h->pages_touched, 8u);
  const TensorRecord* w = by_address(p, weight);
  ASSERT_NE(w, nullptr);
  EXPECT_FALSE(w->has(kTensorHiddenAccess));
  EXPECT_TRUE(w->has(kTensorFalseShared)) << "weight and temporaries share a jemalloc slab page";
  int activations = 0;
  for (const auto& t : p.tensors)
    if (t.bytes == kBig && t.seq >= 0) {
      ++activations;
      EXPECT_FALSE(t.has(kTensorHiddenAccess));
      EXPECT_EQ(t.pages_touched, t.pages);
    }
  EXPECT_EQ(activations, 1);
  bool hidden_page = false, shared_page = false;
  for (const auto& pg : p.pages) {
    hidden_page |= pg.hidden_windows > 0 && pg.address >= h->address && pg.address < h->address + h->bytes;
    shared_page |= pg.false_shared;
  }
  EXPECT_TRUE(hidden_page);
  EXPECT_TRUE(shared_page);
  fs::remove(out);
}

INSTANTIATE_TEST_SUITE_P(Tracers, SessionWithTracer,
                         ::testing::Values(PageTracerKind::mprotect, PageTracerKind::uffd),
                         [](const auto& param_info) {
                           return param_info.param == PageTracerKind::mprotect ? "mprotect" : "uffd";
                         });

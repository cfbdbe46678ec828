// The Session under events from many threads, and finish() while other threads still run ops (issue
// 9, guarantee 8, the torch-free half: the LibTorch test of disabling the op observer mid-run is
// tests/integrations torch_profile_tests). Framework threads (data loaders, autograd's worker threads,
// a second training thread) allocate, free and run ops while the training thread marks iterations
// and the profile is written in the background; then tierpack_finish() happens while they are still
// running. Nothing may crash or race (the TSan stage of scripts/test.sh runs this suite), events after
// finish are ignored, and the profile written is whole and readable.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "core/profile.hpp"
#include "runtime/session/session.hpp"

using namespace tierpack;
namespace fs = std::filesystem;

namespace {

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("tierpack_rel_session_" + std::to_string(::getpid()) + "_" + name)).string();
}

// One framework thread: allocations from the session's memory when it offers some (else the heap,
// as the framework's own allocator would), ops over them, frees, until told to stop.
void framework_thread(Session& s, std::atomic<bool>& stop, std::atomic<std::uint64_t>& events, int id) {
  std::vector<std::pair<void*, HostMemory*>> live;
  std::uint64_t n = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    HostMemory* mem = s.host_memory_for_new();
    const std::size_t bytes = 64 + 512 * static_cast<std::size_t>((n * 7 + static_cast<std::uint64_t>(id)) % 16);
    void* p = mem ? mem->allocate(bytes) : ::operator new(bytes);
    s.on_alloc(p, bytes, -1, 0, mem != nullptr && mem->page_trackable());
    static_cast<char*>(p)[0] = static_cast<char>(n);
    live.emplace_back(p, mem);
    const void* in[] = {p};
    const auto tok = s.op_begin("aten::add", in, Phase::forward);
    const auto inner = s.op_begin("aten::mul", {}, Phase::forward);
    s.op_end(inner, "aten::mul", {});
    s.op_end(tok, "aten::add", {});
    if (live.size() > 8) {
      auto [q, qmem] = live.front();
      live.erase(live.begin());
      s.on_free(q, -1);
      if (qmem) qmem->deallocate(q);
      else ::operator delete(q);
    }
    ++n;
    events.fetch_add(4, std::memory_order_relaxed);
    if (n % 64 == 0) std::this_thread::yield();
  }
  for (auto [q, qmem] : live) {
    s.on_free(q, -1);
    if (qmem) qmem->deallocate(q);
    else ::operator delete(q);
  }
}

TEST(SessionConcurrency, EventsFromManyThreadsAndFinishWhileOpsRunAreSafe) {
  const std::string out = temp_path("many.tpk");
  Config c;
  c.mode = RunMode::profile;
  c.profile_out = out;
  c.warmup_iterations = 1;
  c.page_tracer = PageTracerKind::off;  // the tracers' own thread tests are in tests/profiler
  c.log = LogLevel::quiet;
  SessionOptions o;
  o.command = "session_concurrency_test";
  o.discover_topology = false;
  {
    Session s(c, o);
    s.start();
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> events{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) threads.emplace_back(framework_thread, std::ref(s), std::ref(stop), std::ref(events), i);
    // The training thread: iterations with ops of its own.
    for (int it = 0; it < 6; ++it) {
      for (int k = 0; k < 50; ++k) {
        const auto tok = s.op_begin("aten::linear", {}, Phase::forward);
        s.op_end(tok, "aten::linear", {});
      }
      while (events.load() < static_cast<std::uint64_t>(400 * (it + 1))) std::this_thread::yield();
      s.mark_iteration(IterationSource::explicit_mark);
    }
    // Finish while the framework threads still run ops; then they go on for a while after it.
    const std::uint64_t before_finish = events.load();
    EXPECT_TRUE(s.finish());
    while (events.load() < before_finish + 2000) std::this_thread::yield();
    stop = true;
    for (auto& t : threads) t.join();
    EXPECT_TRUE(s.finish());  // idempotent
  }  // the Session goes while nothing runs any more
  const Profile p = read_profile(out);
  EXPECT_EQ(p.meta.command, "session_concurrency_test");
  EXPECT_GE(p.meta.iterations_observed, 2);
  EXPECT_FALSE(p.ops.empty());
  EXPECT_FALSE(p.tensors.empty());
  fs::remove(out);
}

}  // namespace

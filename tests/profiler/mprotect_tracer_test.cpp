// The mprotect tracer's signal-handler properties (issue 9, item 7): it chains faults outside
// tracked ranges to the program's SIGSEGV handler (installed before or after it), dies like an
// untraced process when there is none, survives other threads allocating and touching memory,
// ranges untracked while other threads fault on them, a full fault buffer, and the VMA limit.
#include <setjmp.h>
#include <ucontext.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <atomic>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "profiler/detail/page_tracer_backends.hpp"
#include "profiler/page_tracer.hpp"
#include "tests/profiler/mapping.hpp"

using namespace tierpack;
using tierpack::test::Mapping;

namespace {

std::set<std::size_t> window_pages(PageTracer& t, const Mapping& m) {
  std::vector<PageTouch> out;
  t.end_window(out);
  std::set<std::size_t> s;
  for (const auto& p : out)
    if (p.page >= m.addr(0) && p.page < m.addr(0) + m.bytes()) s.insert(m.index_of(p.page));
  return s;
}

// ---- a program's own SIGSEGV handler: catches faults on its guard page with siglongjmp ----------

sigjmp_buf g_jump;
std::atomic<void*> g_guard{nullptr};  // the page the program's handler owns
std::atomic<int> g_caught{0};
std::atomic<int> g_passed_on{0};
struct sigaction g_replaced {};  // what the program's handler replaced (it chains to it)

void program_handler(int sig, siginfo_t* info, void* ctx) {
  if (info->si_addr == g_guard.load()) {
    g_caught.fetch_add(1);
    siglongjmp(g_jump, 1);
  }
  // Not ours: chain, as the rule in page_tracer_mprotect.cpp asks.
  g_passed_on.fetch_add(1);
  if (g_replaced.sa_flags & SA_SIGINFO) g_replaced.sa_sigaction(sig, info, ctx);
  else if (g_replaced.sa_handler != SIG_DFL && g_replaced.sa_handler != SIG_IGN) g_replaced.sa_handler(sig);
  else {
    signal(sig, SIG_DFL);  // default: let the fault repeat and kill us
  }
}

void plain_program_handler(int) {
  g_caught.fetch_add(1);
  siglongjmp(g_jump, 1);
}

/// Installs a SIGSEGV handler for the test's duration; restores the old one after.
class ScopedHandler {
 public:
  explicit ScopedHandler(bool siginfo) {
    struct sigaction sa {};
    if (siginfo) {
      sa.sa_sigaction = &program_handler;
      sa.sa_flags = SA_SIGINFO;
    } else {
      sa.sa_handler = &plain_program_handler;
    }
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_);
    g_replaced = old_;
  }
  ~ScopedHandler() { sigaction(SIGSEGV, &old_, nullptr); }

 private:
  struct sigaction old_ {};
};

/// Touches the guard page; returns whether the program's handler caught the fault.
bool fault_on_guard(char* guard) {
  const int before = g_caught.load();
  if (sigsetjmp(g_jump, 1) == 0) {
    *static_cast<volatile char*>(guard) = 1;
    return false;  // no fault at all
  }
  return g_caught.load() == before + 1;
}

// The handler chaining scenarios each run in a fresh process (gtest's "threadsafe" death-test
// style re-executes the binary), since the tracer's SIGSEGV handler, once installed, stays
// installed for the life of the process. A scenario returns true when every check passed.

#define CHECK_OR_FAIL(cond)                                                   \
  do {                                                                        \
    if (!(cond)) {                                                            \
      std::fprintf(stderr, "check failed: %s (line %d)\n", #cond, __LINE__); \
      return false;                                                           \
    }                                                                         \
  } while (0)

#define EXPECT_SCENARIO(fn)                               \
  do {                                                    \
    GTEST_FLAG_SET(death_test_style, "threadsafe");       \
    EXPECT_EXIT(std::_Exit((fn)() ? 0 : 1), ::testing::ExitedWithCode(0), ""); \
  } while (0)

bool handler_installed_before() {
  Mapping guard(1, PROT_NONE), data(8);
  g_guard = guard.base();
  ScopedHandler program(/*siginfo=*/true);
  auto t = detail::make_mprotect_tracer();
  t->track(data.base(), data.bytes());
  data.write(2);
  CHECK_OR_FAIL(fault_on_guard(guard.base()));
  data.write(5);
  CHECK_OR_FAIL(window_pages(*t, data) == (std::set<std::size_t>{2, 5}));
  CHECK_OR_FAIL(fault_on_guard(guard.base()));
  CHECK_OR_FAIL(!t->stats().handler_displaced);
  t.reset();
  // Destroyed: the handler stays (inert) and still passes the program's faults on.
  CHECK_OR_FAIL(fault_on_guard(guard.base()));
  data.write(3);
  return true;
}

bool plain_handler_installed_before() {
  Mapping guard(1, PROT_NONE), data(4);
  ScopedHandler program(/*siginfo=*/false);
  auto t = detail::make_mprotect_tracer();
  t->track(data.base(), data.bytes());
  CHECK_OR_FAIL(fault_on_guard(guard.base()));
  data.write(1);
  CHECK_OR_FAIL(window_pages(*t, data) == (std::set<std::size_t>{1}));
  return true;
}

bool chaining_handler_installed_after() {
  Mapping guard(1, PROT_NONE), data(8);
  g_guard = guard.base();
  auto t = detail::make_mprotect_tracer();
  t->track(data.base(), data.bytes());
  ScopedHandler program(/*siginfo=*/true);  // replaces ours and chains to it
  const int passed = g_passed_on.load();
  data.write(3);  // reaches the program's handler first, which passes it on to the tracer
  CHECK_OR_FAIL(g_passed_on.load() > passed);
  CHECK_OR_FAIL(fault_on_guard(guard.base()));
  data.write(6);
  CHECK_OR_FAIL(window_pages(*t, data) == (std::set<std::size_t>{3, 6}));
  CHECK_OR_FAIL(t->stats().handler_displaced);
  data.write(3);
  CHECK_OR_FAIL(window_pages(*t, data) == (std::set<std::size_t>{3}));
  t.reset();
  CHECK_OR_FAIL(fault_on_guard(guard.base()));
  data.write(7);  // plain memory again
  // A new tracer finds the program's handler on top and keeps working behind it.
  auto t2 = detail::make_mprotect_tracer();
  t2->track(data.base(), data.bytes());
  data.write(1);
  CHECK_OR_FAIL(window_pages(*t2, data) == (std::set<std::size_t>{1}));
  return true;
}

TEST(MprotectTracer, ChainsToAHandlerInstalledBefore) { EXPECT_SCENARIO(handler_installed_before); }
TEST(MprotectTracer, ChainsToAPlainHandlerInstalledBefore) { EXPECT_SCENARIO(plain_handler_installed_before); }
TEST(MprotectTracer, CoexistsWithAChainingHandlerInstalledAfter) { EXPECT_SCENARIO(chaining_handler_installed_after); }

// Death-test bodies: run in a child; a fault outside tracked ranges must kill it with SIGSEGV.
void no_core_default_segv() {
  rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  signal(SIGSEGV, SIG_DFL);
}

void fault_outside_tracked_ranges() {
  no_core_default_segv();
  Mapping guard(1, PROT_NONE), data(4);
  auto t = detail::make_mprotect_tracer();
  t->track(data.base(), data.bytes());
  data.write(1);  // ours: handled
  *static_cast<volatile char*>(guard.base()) = 1;
  std::_Exit(0);
}

void raise_segv_with_tracer() {
  no_core_default_segv();
  auto t = detail::make_mprotect_tracer();
  raise(SIGSEGV);  // not a fault: must not be swallowed either
  std::_Exit(0);
}

void fault_after_tracer_destroyed() {
  no_core_default_segv();
  Mapping guard(1, PROT_NONE);
  detail::make_mprotect_tracer().reset();
  *static_cast<volatile char*>(guard.base()) = 1;
  std::_Exit(0);
}

TEST(MprotectTracer, FaultOutsideTrackedRangesKillsLikeWithoutTracer) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(fault_outside_tracked_ranges(), ::testing::KilledBySignal(SIGSEGV), "");
  EXPECT_EXIT(raise_segv_with_tracer(), ::testing::KilledBySignal(SIGSEGV), "");
  EXPECT_EXIT(fault_after_tracer_destroyed(), ::testing::KilledBySignal(SIGSEGV), "");
}

TEST(MprotectTracer, OnlyOneAtATime) {
  auto t = detail::make_mprotect_tracer();
  EXPECT_THROW(detail::make_mprotect_tracer(), logic_error);
  t.reset();
  EXPECT_NO_THROW(detail::make_mprotect_tracer());
}

TEST(MprotectTracer, StaleFaultsAreRetriedNotFatal) {
  // A fault raised while a page was armed but handled after the range was untracked (the thread
  // was descheduled in between) must be retried, not passed on as a crash. Simulate the late
  // delivery: untrack, then send the handler a SIGSEGV for an address in the old range, as the
  // kernel would (SEGV_ACCERR, si_addr set). With the page accessible now it returns; a page still
  // inaccessible would be chained (covered by FaultOutsideTrackedRangesKillsLikeWithoutTracer).
  Mapping m(4);
  auto t = detail::make_mprotect_tracer();
  t->track(m.base(), m.bytes());
  t->untrack(m.base(), m.bytes());
  struct sigaction cur {};
  sigaction(SIGSEGV, nullptr, &cur);
  ASSERT_TRUE(cur.sa_flags & SA_SIGINFO);
  siginfo_t info{};
  info.si_signo = SIGSEGV;
  info.si_code = SEGV_ACCERR;
  info.si_addr = m.page(2);
  ucontext_t ctx{};
  getcontext(&ctx);
#if defined(__x86_64__)
  ctx.uc_mcontext.gregs[REG_ERR] = 0x2 | 0x4;  // a user-mode write
#endif
  cur.sa_sigaction(SIGSEGV, &info, &ctx);  // returns: stale, retried
  m.write(2, 4);
  EXPECT_EQ(m.read(2), 4);
}

TEST(MprotectTracer, FullFaultBufferIsCountedNotFatal) {
  Mapping m(64);
  auto t = detail::make_mprotect_tracer(/*fault_buffer_entries=*/8);
  t->track(m.base(), m.bytes());
  for (std::size_t i = 0; i < m.pages(); ++i) m.write(i, static_cast<char>(i));
  const auto first = window_pages(*t, m);
  EXPECT_EQ(first.size(), 8u);
  auto st = t->stats();
  EXPECT_EQ(st.faults, 64u);
  EXPECT_EQ(st.dropped, 56u);
  // Everything was re-armed anyway: the next window is exact again.
  m.write(3, 33);
  (void)m.read(60);
  EXPECT_EQ(window_pages(*t, m), (std::set<std::size_t>{3, 60}));
  for (std::size_t i = 0; i < m.pages(); ++i) EXPECT_EQ(m.read(i), i == 3 ? 33 : static_cast<char>(i));
}

TEST(MprotectTracer, SurvivesOtherThreadsAllocatingAndTouching) {
  Mapping m(256);
  auto t = detail::make_mprotect_tracer();
  t->track(m.base(), m.bytes());
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> allocations{0}, touches{0};
  std::vector<std::thread> threads;
  // Two threads allocate, fill and free untracked memory (malloc and mmap) all the time.
  for (int k = 0; k < 2; ++k)
    threads.emplace_back([&, k] {
      std::mt19937 rng(k);
      while (!stop.load(std::memory_order_relaxed)) {
        const std::size_t n = 1 + rng() % (256 << 10);
        auto* p = static_cast<char*>(std::malloc(n));
        std::memset(p, k, n);
        std::free(p);
        Mapping scratch(4);
        scratch.write(rng() % 4);
        allocations.fetch_add(1, std::memory_order_relaxed);
      }
    });
  // Two threads touch tracked pages (each its own half, with values the test checks at the end).
  std::vector<char> last(m.pages(), 0);
  for (int k = 0; k < 2; ++k)
    threads.emplace_back([&, k] {
      std::mt19937 rng(100 + k);
      const std::size_t half = m.pages() / 2;
      while (!stop.load(std::memory_order_relaxed)) {
        const std::size_t i = k * half + rng() % half;
        if (rng() % 3 == 0) {
          (void)m.read(i);
        } else {
          last[i] = static_cast<char>(1 + rng() % 120);
          m.write(i, last[i]);
        }
        touches.fetch_add(1, std::memory_order_relaxed);
      }
    });
  // Close windows until the other threads have done real work (counts, not time; the bound on
  // windows only stops a hang).
  std::uint64_t reported = 0;
  // (A window may see nothing: on a busy machine this thread can sleep through all the touching.)
  for (int w = 0; w < 2000000 && (w < 400 || touches.load() < 20000 || allocations.load() < 200 || reported == 0); ++w) {
    std::vector<PageTouch> out;
    t->end_window(out);
    reported += out.size();
    std::this_thread::yield();
  }
  stop = true;
  for (auto& th : threads) th.join();
  for (std::size_t i = 0; i < m.pages(); ++i) ASSERT_EQ(m.read(i), last[i]) << "page " << i;
  // Quiet again: the next windows are exact.
  (void)window_pages(*t, m);
  m.write(17);
  m.write(200);
  EXPECT_EQ(window_pages(*t, m), (std::set<std::size_t>{17, 200}));
  const auto st = t->stats();
  EXPECT_EQ(st.dropped, 0u);
  EXPECT_GT(allocations.load(), 0u);
  EXPECT_GT(touches.load(), 0u);
  EXPECT_GT(reported, 0u);
  std::printf("allocations %llu, tracked touches %llu, faults %llu, pages reported %llu\n",
              static_cast<unsigned long long>(allocations.load()), static_cast<unsigned long long>(touches.load()),
              static_cast<unsigned long long>(st.faults), static_cast<unsigned long long>(st.pages_reported));
}

TEST(MprotectTracer, RangesUntrackedWhileOtherThreadsFaultOnThem) {
  Mapping m(64);
  auto t = detail::make_mprotect_tracer();
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> touches{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 2; ++k)
    threads.emplace_back([&, k] {
      std::mt19937 rng(7 + k);
      while (!stop.load(std::memory_order_relaxed)) {
        const std::size_t i = rng() % m.pages();
        if (k == 0) m.write(i, 1);
        else (void)m.read(i);
        touches.fetch_add(1, std::memory_order_relaxed);
      }
    });
  while (touches.load() == 0) std::this_thread::yield();
  // At least 300 rounds, and more until the other threads have touched pages a few thousand times
  // (counts, not time; the round limit only stops a hang).
  std::mt19937 rng(99);
  for (int round = 0; round < 300 || (touches.load() < 5000 && round < 1000000); ++round) {
    t->track(m.base(), m.bytes());
    std::vector<PageTouch> out;
    t->end_window(out);
    const std::size_t a = rng() % 32, b = 32 + rng() % 32;  // untrack a middle part, then the rest
    t->untrack(m.page(a), (b - a) * m.page_size());
    t->end_window(out);
    t->untrack(m.base(), m.bytes());
  }
  stop = true;
  for (auto& th : threads) th.join();
  EXPECT_GT(touches.load(), 0u);
  for (std::size_t i = 0; i < m.pages(); ++i) m.write(i, 2);  // all accessible
}

TEST(MprotectTracer, VmaLimitFallsBackToUnprotectingTheRange) {
  // Reading every other page gives alternating PROT_READ / PROT_NONE pages: one VMA each. Past
  // vm.max_map_count the kernel refuses to split further; the tracer must give the whole range
  // back (and count it) instead of crashing. Reads map the shared zero page: no memory is used.
  long max_maps = 0;
  std::ifstream("/proc/sys/vm/max_map_count") >> max_maps;
  if (max_maps <= 0 || max_maps > 300000) GTEST_SKIP() << "vm.max_map_count " << max_maps << " too large to reach in a test";
  const std::size_t pages = static_cast<std::size_t>(max_maps) * 2 + 4096;
  Mapping m(pages);
  auto t = detail::make_mprotect_tracer(/*fault_buffer_entries=*/pages);
  t->track(m.base(), m.bytes());
  for (std::size_t i = 0; i < pages; i += 2) ASSERT_EQ(m.read(i), 0);
  m.write(1, 5);
  std::vector<PageTouch> out;
  t->end_window(out);
  auto st = t->stats();
  EXPECT_GE(st.unprotect_fallbacks, 1u);
  EXPECT_EQ(st.rearm_failures, 0u);
  // Re-armed as one range again: the next window is exact.
  m.write(10);
  EXPECT_EQ(window_pages(*t, m), (std::set<std::size_t>{10}));
  EXPECT_EQ(m.read(1), 5);
  std::printf("max_map_count %ld: %llu faults, %llu whole-range fallbacks\n", max_maps,
              static_cast<unsigned long long>(st.faults), static_cast<unsigned long long>(st.unprotect_fallbacks));
}

}  // namespace

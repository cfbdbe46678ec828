// mprotect page tracer: sees reads and writes. Tracked ranges are PROT_NONE while armed; the first
// access to a page faults, the SIGSEGV handler records the page in a preallocated lock-free buffer
// and gives the page back (PROT_READ for a read, PROT_READ|PROT_WRITE for a write, so a later
// write to a read page faults once more and is seen as a write). end_window() drains the buffer and
// re-arms the ranges that were touched with one mprotect(PROT_NONE) each.
//
// Note [mprotect tracer signal state]
// A signal handler gets no context pointer, so the state it reads (tracked ranges, fault buffer,
// counters, the handler we replaced) lives in one constant-initialised object, g_signal_state. It
// is the only process-wide state of the profiler, and the reason at most one mprotect tracer may
// live at a time. The handler does only async-signal-safe work: atomic loads/stores/CAS on that
// object, mprotect(2), open/read/close of /proc/self/maps (Note [stale faults]), sigaction(2),
// raise(3); no allocation, no locks, no stdio. The tracer's other paths (track, untrack,
// end_window) take a mutex the handler never takes.
//
// Note [tracked-range table]
// Ranges live in a fixed table of slots read by the handler without locks; a per-slot sequence
// number (odd while a slot is rewritten) lets the handler skip a slot that is changing. untrack()
// restores access, frees the slot, waits until no handler that may have seen the slot as tracked
// is still running, and restores access once more (such a handler may have just set PROT_READ on
// a page). When it returns the range is fully accessible and the caller may unmap it.
//
// Note [stale faults]
// A fault raised while a page was armed can reach the handler much later: the kernel queues the
// signal, and the thread may not run again for milliseconds on a busy machine. By then the range
// may be untracked and its slot reused. So when a fault matches no tracked range, the handler asks
// the kernel whether the access it needed (read, write, execute) is allowed now, from the mapping's
// permissions in /proc/self/maps (read with open/read/close into a small stack buffer). If it is,
// the fault is stale and the access is simply retried; if not, the fault is real and is chained.
// "Not allowed" is final only if no untrack ran meanwhile (an untrack still restoring access may be
// waiting for a handler that has just set PROT_READ on the page) and the page is not tracked again
// (a track() may have re-armed it); otherwise the handler yields and asks again.
// This costs a walk of the maps file, but only for stale faults and for faults that are real bugs.
//
// Note [SIGSEGV handler chaining]
// Faults outside tracked ranges go to the handler that was installed before the tracer (SA_SIGINFO
// or plain); a default or ignored disposition is restored and the fault repeats, so the process
// dies exactly as it would have without tierpack. The rule for programs that install their own
// SIGSEGV handler:
//   - installed before the tracer: nothing to do; the tracer chains to it.
//   - installed after the tracer: it must chain faults it does not own to the handler it replaced
//     (the usual save-the-old-sigaction pattern), or traced pages will fault into it. The tracer
//     notices (stats().handler_displaced) but does not reinstall itself over it, since a program
//     handler that chains to us would then loop.
// Once installed, the handler stays installed when the tracer is destroyed (inert: it only chains,
// after the stale-fault check): a fault raised just before destruction may still be on its way
// (Note [stale faults]), and a program handler may have chained to ours.
//
// Limitation: system calls that touch an armed page do not fault, they fail with EFAULT (e.g.
// read(2) into a tracked buffer). The uffd-wp tracer has no such limit: the kernel resolves its
// write-protect faults itself.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <memory>
#include <mutex>

#include "core/error.hpp"
#include "profiler/detail/page_tracer_backends.hpp"

namespace tierpack::detail {
namespace {

// ---- state shared with the signal handler (Note [mprotect tracer signal state]) ------------------

enum SlotState : std::uint32_t { kFree = 0, kTracked = 1 };

struct Slot {
  std::atomic<std::uint32_t> seq{0};  ///< odd while the slot is being rewritten
  std::atomic<std::uint32_t> state{kFree};
  std::atomic<std::uintptr_t> begin{0};
  std::atomic<std::uintptr_t> end{0};
};

constexpr std::size_t kMaxRanges = 4096;
constexpr std::uintptr_t kWrittenBit = 1;  ///< fault buffer entries are page | written

struct SignalState {
  Slot slots[kMaxRanges];
  std::atomic<std::uint32_t> used{0};  ///< slots [0, used) may be non-free

  std::atomic<std::atomic<std::uintptr_t>*> ring{nullptr};  ///< fault buffer of the live tracer
  std::atomic<std::size_t> capacity{0};
  std::atomic<std::uint64_t> write_pos{0};
  std::atomic<std::uint64_t> read_pos{0};
  std::atomic<std::uint32_t> in_flight{0};  ///< handlers that may act on a tracked slot
  std::atomic<std::uint64_t> untrack_gen{0};  ///< odd while an untrack is restoring access

  std::atomic<std::uint64_t> faults{0};
  std::atomic<std::uint64_t> dropped{0};
  std::atomic<std::uint64_t> unprotect_fallbacks{0};

  std::uintptr_t page_mask = ~std::uintptr_t{4095};
  struct sigaction previous {};      ///< written before our handler is installed, read-only after
  std::atomic<bool> installed{false};  ///< on_sigsegv was installed once (it stays)
  std::atomic<bool> owned{false};      ///< a tracer is alive
  std::mutex install_mu;             ///< non-signal paths only
};

constinit SignalState g_signal_state;

enum class Access { read, write, exec, unknown };

/// What the faulting access was, from the page-fault error code the kernel puts in the signal
/// context (x86-64: REG_ERR bit 1 = write, bit 4 = instruction fetch). Other architectures:
/// unknown (a write is assumed when restoring protection; reported as not known written).
Access fault_access(const void* ctx) {
#if defined(__x86_64__)
  const auto err = static_cast<const ucontext_t*>(ctx)->uc_mcontext.gregs[REG_ERR];
  return (err & 0x10) ? Access::exec : (err & 0x2) ? Access::write : Access::read;
#else
  (void)ctx;
  return Access::unknown;
#endif
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/// Whether the mapping holding `addr` allows `access` now, from /proc/self/maps: streamed through a
/// 256-byte stack buffer with raw open/read/close, so it is async-signal-safe and fits a small
/// alternate signal stack (Note [stale faults]). False when the file cannot be read.
bool access_allowed_now(std::uintptr_t addr, Access access) {
  const int fd = static_cast<int>(::syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC));
  if (fd < 0) return false;
  char chunk[256];
  std::uintptr_t lo = 0, hi = 0;
  int field = 0;  // 0: start address, 1: end address, 2: permissions, 3: rest of the line
  int perm = 0;
  char perms[4] = {};
  bool allowed = false, found = false;
  while (!found) {
    const long n = ::syscall(SYS_read, fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (long i = 0; i < n && !found; ++i) {
      const char c = chunk[i];
      switch (field) {
        case 0:
          if (c == '-') field = 1;
          else lo = lo * 16 + static_cast<std::uintptr_t>(hex_digit(c) < 0 ? 0 : hex_digit(c));
          break;
        case 1:
          if (c == ' ') field = 2, perm = 0;
          else hi = hi * 16 + static_cast<std::uintptr_t>(hex_digit(c) < 0 ? 0 : hex_digit(c));
          break;
        case 2:
          perms[perm++] = c;
          if (perm == 4) {
            field = 3;
            if (lo <= addr && addr < hi) {
              found = true;
              const bool r = perms[0] == 'r', w = perms[1] == 'w', x = perms[2] == 'x';
              allowed = access == Access::write ? w : access == Access::exec ? x : access == Access::read ? r : r && w;
            }
          }
          break;
        default:
          if (c == '\n') field = 0, lo = 0, hi = 0;
      }
    }
  }
  ::syscall(SYS_close, fd);
  return allowed;
}

/// Appends one entry to the fault buffer; counts a drop when it is full.
void record(SignalState& g, std::uintptr_t value) {
  auto* ring = g.ring.load(std::memory_order_acquire);
  const std::size_t cap = g.capacity.load(std::memory_order_relaxed);
  if (!ring || cap == 0) {
    g.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  for (;;) {
    // read_pos first: it never passes write_pos, so w - r cannot wrap (loading w first could see
    // a stale w below a newer r and call the buffer full).
    const std::uint64_t r = g.read_pos.load(std::memory_order_seq_cst);
    std::uint64_t w = g.write_pos.load(std::memory_order_seq_cst);
    if (w - r >= cap) {
      g.dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (g.write_pos.compare_exchange_weak(w, w + 1, std::memory_order_seq_cst, std::memory_order_relaxed)) {
      ring[w % cap].store(value, std::memory_order_release);
      return;
    }
  }
}

/// The tracked range holding `page`, read from the slot table without locks.
bool find_tracked(SignalState& g, std::uintptr_t page, std::uintptr_t& tb, std::uintptr_t& te) {
  const std::uint32_t n = g.used.load(std::memory_order_acquire);
  for (std::uint32_t i = 0; i < n; ++i) {
    Slot& s = g.slots[i];
    // Sequentially consistent loads (and stores in write_slot): a seqlock without fences, which
    // ThreadSanitizer does not model.
    const std::uint32_t seq = s.seq.load();
    if (seq & 1) continue;
    const std::uint32_t st = s.state.load();
    const std::uintptr_t b = s.begin.load();
    const std::uintptr_t e = s.end.load();
    if (s.seq.load() != seq) continue;
    if (st == kTracked && b <= page && page < e) {
      tb = b;
      te = e;
      return true;
    }
  }
  return false;
}

/// A fault in a tracked range: give the page back and record it. False when `addr` is not tracked.
bool handle_tracked_fault(SignalState& g, std::uintptr_t addr, Access access) {
  const std::uintptr_t page = addr & g.page_mask;
  std::uintptr_t tb = 0, te = 0;
  if (access == Access::exec || !find_tracked(g, page, tb, te)) return false;
  const int prot = access == Access::read ? PROT_READ : PROT_READ | PROT_WRITE;
  if (::mprotect(reinterpret_cast<void*>(page), ~g.page_mask + 1, prot) != 0) {
    // Almost always the VMA limit (vm.max_map_count): every page given back splits its VMA.
    // Give the whole range back (merging its VMAs); end_window re-arms it.
    if (::mprotect(reinterpret_cast<void*>(tb), te - tb, PROT_READ | PROT_WRITE) != 0) return false;
    g.unprotect_fallbacks.fetch_add(1, std::memory_order_relaxed);
  }
  g.faults.fetch_add(1, std::memory_order_relaxed);
  record(g, page | (access == Access::write ? kWrittenBit : 0));
  return true;
}

/// A fault that matched no tracked range: stale (retry) or real (chain)? Note [stale faults].
/// The answer is final only when no untrack ran meanwhile: an untrack in progress may still have
/// to restore access that a concurrent handler just narrowed, so wait for it and look again.
bool fault_is_stale(SignalState& g, std::uintptr_t addr, Access access) {
  const std::uintptr_t page = addr & g.page_mask;
  for (;;) {
    const std::uint64_t gen = g.untrack_gen.load();
    if (access_allowed_now(addr, access)) return true;
    std::uintptr_t tb, te;
    if (access != Access::exec && find_tracked(g, page, tb, te)) return true;  // armed meanwhile: retry as tracked
    if (!(gen & 1) && g.untrack_gen.load() == gen) return false;
    ::sched_yield();
  }
}

bool handler_is_ours(const struct sigaction& sa);

/// Passes a fault that is not ours to the handler installed before us (Note [SIGSEGV handler chaining]).
void chain(SignalState& g, int sig, siginfo_t* info, void* ctx) {
  const struct sigaction& prev = g.previous;
  if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
    if (!handler_is_ours(prev)) prev.sa_sigaction(sig, info, ctx);
    return;
  }
  if (prev.sa_handler == SIG_DFL || prev.sa_handler == SIG_IGN) {
    // A hardware fault repeats when we return, now under the default action (dumps core with the
    // right address). A SIGSEGV sent with kill/raise would not repeat: send it again.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(sig, &dfl, nullptr);
    if (info == nullptr || info->si_code <= 0) ::raise(sig);
    return;
  }
  prev.sa_handler(sig);
}

void on_sigsegv(int sig, siginfo_t* info, void* ctx) {
  const int saved_errno = errno;
  SignalState& g = g_signal_state;
  bool handled = false;
  if (info != nullptr && info->si_code == SEGV_ACCERR) {
    const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
    const Access access = fault_access(ctx);
    g.in_flight.fetch_add(1, std::memory_order_seq_cst);
    handled = handle_tracked_fault(g, addr, access);
    g.in_flight.fetch_sub(1, std::memory_order_seq_cst);
    // Outside in_flight: this path changes no protection, and untrack() waits for in_flight.
    if (!handled) handled = fault_is_stale(g, addr, access);
  }
  errno = saved_errno;
  if (!handled) chain(g, sig, info, ctx);
}

bool handler_is_ours(const struct sigaction& sa) { return (sa.sa_flags & SA_SIGINFO) && sa.sa_sigaction == &on_sigsegv; }

/// Waits until no handler is inside the table or the buffer.
void wait_for_handlers(SignalState& g) {
  while (g.in_flight.load(std::memory_order_seq_cst) != 0) ::sched_yield();
}

/// Rewrites a slot under its sequence number.
void write_slot(Slot& s, std::uint32_t state, std::uintptr_t b, std::uintptr_t e) {
  s.seq.fetch_add(1);  // odd: the handler skips the slot
  s.state.store(state);
  s.begin.store(b);
  s.end.store(e);
  s.seq.fetch_add(1);
}

/// A free slot, or -1 when the table is full.
int allocate_slot(SignalState& g) {
  const std::uint32_t n = g.used.load(std::memory_order_relaxed);
  for (std::uint32_t i = 0; i < n; ++i)
    if (g.slots[i].state.load(std::memory_order_relaxed) == kFree) return static_cast<int>(i);
  if (n == kMaxRanges) return -1;
  g.used.store(n + 1, std::memory_order_release);  // slot n is free: the handler skips it
  return static_cast<int>(n);
}

/// Marks an untrack in progress for fault_is_stale (odd generation while it runs).
class UntrackScope {
 public:
  explicit UntrackScope(SignalState& g) : g_(g) { g_.untrack_gen.fetch_add(1); }
  ~UntrackScope() { g_.untrack_gen.fetch_add(1); }
  UntrackScope(const UntrackScope&) = delete;
  UntrackScope& operator=(const UntrackScope&) = delete;

 private:
  SignalState& g_;
};

struct TrackedRange {
  std::uintptr_t begin, end;
  int slot;
  bool touched;  ///< has a page given back since the last re-arm
};

class MprotectTracer final : public PageTracer {
 public:
  explicit MprotectTracer(std::size_t capacity) : g_(g_signal_state), page_(host_page_size()) {
    TIERPACK_EXPECTS(capacity > 0, "mprotect tracer: fault buffer capacity must be > 0");
    if (g_.owned.exchange(true)) throw logic_error("another mprotect page tracer is alive in this process (only one may be)");
    try {
      ring_ = std::make_unique<std::atomic<std::uintptr_t>[]>(capacity);
      for (std::size_t i = 0; i < capacity; ++i) ring_[i].store(0, std::memory_order_relaxed);
      std::lock_guard lock(g_.install_mu);
      g_.page_mask = ~std::uintptr_t{page_ - 1};
      g_.read_pos.store(0);
      g_.write_pos.store(0);
      g_.capacity.store(capacity);
      g_.ring.store(ring_.get(), std::memory_order_release);
      base_faults_ = g_.faults.load();
      base_dropped_ = g_.dropped.load();
      base_fallbacks_ = g_.unprotect_fallbacks.load();
      seen_dropped_ = base_dropped_;
      seen_fallbacks_ = base_fallbacks_;
      install_handler();
    } catch (...) {
      g_.ring.store(nullptr);
      wait_for_handlers(g_);
      g_.owned.store(false);
      throw;
    }
  }

  ~MprotectTracer() override {
    {
      std::lock_guard lock(mu_);
      UntrackScope untracking(g_);
      std::vector<std::pair<std::uintptr_t, std::uintptr_t>> freed;
      for (const auto& r : ranges_) {
        freed.emplace_back(r.begin, r.end);
        ::mprotect(reinterpret_cast<void*>(r.begin), r.end - r.begin, PROT_READ | PROT_WRITE);
        write_slot(g_.slots[r.slot], kFree, 0, 0);
      }
      ranges_.clear();
      restore_after_handlers(freed);
    }
    g_.ring.store(nullptr, std::memory_order_seq_cst);
    wait_for_handlers(g_);
    g_.owned.store(false);  // the handler stays installed (Note [SIGSEGV handler chaining])
  }

  std::string_view name() const override { return "mprotect"; }
  bool sees_reads() const override { return true; }

  void track(void* addr, std::size_t bytes) override {
    const auto b = reinterpret_cast<std::uintptr_t>(addr);
    TIERPACK_EXPECTS(b % page_ == 0 && bytes % page_ == 0 && bytes > 0, "track: range must be page-aligned and non-empty");
    std::lock_guard lock(mu_);
    for (const auto& r : ranges_)
      TIERPACK_EXPECTS(!(r.begin < b + bytes && b < r.end), "track: range overlaps a tracked range");
    const int slot = allocate_slot(g_);
    if (slot < 0) throw logic_error("mprotect tracer: more than " + std::to_string(kMaxRanges) + " tracked ranges");
    write_slot(g_.slots[slot], kTracked, b, b + bytes);
    if (::mprotect(addr, bytes, PROT_NONE) != 0) {
      const int err = errno;
      write_slot(g_.slots[slot], kFree, 0, 0);
      throw os_error("mprotect(PROT_NONE) of a tracked range", err);
    }
    ranges_.insert(std::upper_bound(ranges_.begin(), ranges_.end(), b, [](std::uintptr_t a, const TrackedRange& r) { return a < r.begin; }),
                   TrackedRange{b, b + bytes, slot, false});
  }

  void untrack(void* addr, std::size_t bytes) noexcept override {
    const auto b = reinterpret_cast<std::uintptr_t>(addr);
    const std::uintptr_t e = b + bytes;
    std::lock_guard lock(mu_);
    UntrackScope untracking(g_);
    std::vector<TrackedRange> kept;
    std::vector<std::pair<std::uintptr_t, std::uintptr_t>> freed;
    kept.reserve(ranges_.size() + 2);
    for (const auto& r : ranges_) {
      if (!(r.begin < e && b < r.end)) {
        kept.push_back(r);
        continue;
      }
      // Order matters (Note [tracked-range table]): publish the parts that stay tracked, restore
      // access to the part removed, then free the old slot.
      const std::uintptr_t cut_b = std::max(r.begin, b), cut_e = std::min(r.end, e);
      bool split_ok = true;
      std::vector<TrackedRange> parts;
      if (r.begin < cut_b) parts.push_back({r.begin, cut_b, -1, r.touched});
      if (cut_e < r.end) parts.push_back({cut_e, r.end, -1, r.touched});
      for (auto& p : parts) {
        p.slot = allocate_slot(g_);
        if (p.slot < 0 || p.slot == r.slot) {
          split_ok = false;
          break;
        }
        write_slot(g_.slots[p.slot], kTracked, p.begin, p.end);
      }
      if (!split_ok) {
        // Table full: stop tracking the whole range rather than lose track of a part.
        for (auto& p : parts)
          if (p.slot >= 0 && p.slot != r.slot) write_slot(g_.slots[p.slot], kFree, 0, 0);
        freed.emplace_back(r.begin, r.end);
        ::mprotect(reinterpret_cast<void*>(r.begin), r.end - r.begin, PROT_READ | PROT_WRITE);
        write_slot(g_.slots[r.slot], kFree, 0, 0);
        continue;
      }
      freed.emplace_back(cut_b, cut_e);
      ::mprotect(reinterpret_cast<void*>(cut_b), cut_e - cut_b, PROT_READ | PROT_WRITE);
      write_slot(g_.slots[r.slot], kFree, 0, 0);
      for (const auto& p : parts) kept.push_back(p);
    }
    std::sort(kept.begin(), kept.end(), [](const TrackedRange& x, const TrackedRange& y) { return x.begin < y.begin; });
    ranges_ = std::move(kept);
    restore_after_handlers(freed);
  }

  void end_window(std::vector<PageTouch>& out) override {
    std::lock_guard lock(mu_);
    {
      struct sigaction cur {};
      if (::sigaction(SIGSEGV, nullptr, &cur) == 0 && !handler_is_ours(cur)) displaced_ = true;
    }
    // Drain the fault buffer. A reserved entry not yet written belongs to a handler a few
    // instructions from done: wait for it.
    touched_.clear();
    const std::size_t cap = g_.capacity.load(std::memory_order_relaxed);
    const std::uint64_t w = g_.write_pos.load(std::memory_order_acquire);
    for (std::uint64_t i = g_.read_pos.load(std::memory_order_relaxed); i < w; ++i) {
      auto& cell = ring_[i % cap];
      std::uintptr_t v;
      while ((v = cell.load(std::memory_order_acquire)) == 0) ::sched_yield();
      cell.store(0, std::memory_order_relaxed);
      touched_.push_back(v);
    }
    g_.read_pos.store(w, std::memory_order_release);

    // Sort by page, merging read and write entries of one page.
    std::sort(touched_.begin(), touched_.end());
    std::uint64_t reported = 0;
    for (std::size_t i = 0; i < touched_.size();) {
      const std::uintptr_t page = touched_[i] & ~kWrittenBit;
      bool written = false;
      for (; i < touched_.size() && (touched_[i] & ~kWrittenBit) == page; ++i) written |= (touched_[i] & kWrittenBit) != 0;
      out.push_back({page, written});
      ++reported;
      auto it = std::upper_bound(ranges_.begin(), ranges_.end(), page, [](std::uintptr_t a, const TrackedRange& r) { return a < r.begin; });
      if (it != ranges_.begin() && page < std::prev(it)->end) std::prev(it)->touched = true;
    }

    // Re-arm what was given back. Dropped entries or whole-range fallbacks hide which ranges those
    // were: re-arm everything then.
    const std::uint64_t dropped = g_.dropped.load(), fallbacks = g_.unprotect_fallbacks.load();
    const bool all = dropped != seen_dropped_ || fallbacks != seen_fallbacks_;
    seen_dropped_ = dropped;
    seen_fallbacks_ = fallbacks;
    for (auto& r : ranges_) {
      if (!r.touched && !all) continue;
      if (::mprotect(reinterpret_cast<void*>(r.begin), r.end - r.begin, PROT_NONE) != 0) ++rearm_failures_;
      r.touched = false;
    }

    ++windows_;
    std::uint32_t used = g_.used.load(std::memory_order_relaxed);
    while (used > 0 && g_.slots[used - 1].state.load(std::memory_order_relaxed) == kFree) --used;
    g_.used.store(used, std::memory_order_release);
    reported_ += reported;
  }

  PageTracerStats stats() const override {
    std::lock_guard lock(mu_);
    PageTracerStats st;
    st.windows = windows_;
    st.pages_reported = reported_;
    st.faults = g_.faults.load() - base_faults_;
    st.dropped = g_.dropped.load() - base_dropped_;
    st.unprotect_fallbacks = g_.unprotect_fallbacks.load() - base_fallbacks_;
    st.rearm_failures = rearm_failures_;
    st.handler_displaced = displaced_;
    return st;
  }

 private:
  /// Waits until no handler that saw a range as tracked is still running, then restores access to
  /// the ranges untracked once more: such a handler may have set PROT_READ on a page after our
  /// first mprotect (Note [tracked-range table]). Handlers arriving later find no tracked slot and
  /// change no protection (Note [stale faults]).
  void restore_after_handlers(const std::vector<std::pair<std::uintptr_t, std::uintptr_t>>& freed) noexcept {
    wait_for_handlers(g_);
    for (const auto& [b, e] : freed) ::mprotect(reinterpret_cast<void*>(b), e - b, PROT_READ | PROT_WRITE);
  }

  /// Installs on_sigsegv unless it is already on top or was displaced (Note [SIGSEGV handler chaining]).
  void install_handler() {
    struct sigaction cur {};
    if (::sigaction(SIGSEGV, nullptr, &cur) != 0) throw os_error("sigaction(SIGSEGV) query", errno);
    if (handler_is_ours(cur)) return;
    if (g_.installed.load()) {
      displaced_ = true;  // a program handler replaced ours earlier; by the rule it chains to us
      return;
    }
    g_.previous = cur;
    struct sigaction sa {};
    sa.sa_sigaction = &on_sigsegv;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (::sigaction(SIGSEGV, &sa, nullptr) != 0) throw os_error("sigaction(SIGSEGV) install", errno);
    g_.installed.store(true);
  }

  SignalState& g_;
  const std::size_t page_;
  std::unique_ptr<std::atomic<std::uintptr_t>[]> ring_;
  mutable std::mutex mu_;
  std::vector<TrackedRange> ranges_;  ///< sorted by begin
  std::vector<std::uintptr_t> touched_;
  std::uint64_t windows_ = 0, reported_ = 0, rearm_failures_ = 0;
  std::uint64_t seen_dropped_ = 0, seen_fallbacks_ = 0;
  std::uint64_t base_faults_ = 0, base_dropped_ = 0, base_fallbacks_ = 0;
  bool displaced_ = false;
};

}  // namespace

std::unique_ptr<PageTracer> make_mprotect_tracer(std::size_t fault_buffer_entries) {
  return std::make_unique<MprotectTracer>(fault_buffer_entries);
}

}  // namespace tierpack::detail

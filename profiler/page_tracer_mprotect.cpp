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
// object, mprotect(2), process_vm_readv(2), sigaction(2), raise(3); no allocation, no locks, no
// stdio. The tracer's other paths (track/untrack/end_window) take a mutex the handler never takes.
//
// Note [tracked-range table]
// Ranges live in a fixed table of slots read by the handler without locks; a per-slot sequence
// number (odd while a slot is rewritten) lets the handler skip a slot that is changing. Untracking
// restores access first and only then retires the slot; a fault raised while the range was armed
// but delivered after that finds the slot "retired", sees that the page is readable now and simply
// retries the access. Retired slots are freed two windows later. untrack() then waits until no
// handler that saw the slot as tracked is still running and restores access once more (such a
// handler may have just set PROT_READ on a page), so when it returns the range is fully accessible
// and the caller may unmap it.
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
// When the tracer is destroyed it restores the previous handler if its own is still on top;
// otherwise it stays installed, inert, so the chain the program built keeps working.
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
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

enum SlotState : std::uint32_t { kFree = 0, kTracked = 1, kRetired = 2 };

struct Slot {
  std::atomic<std::uint32_t> seq{0};  ///< odd while the slot is being rewritten
  std::atomic<std::uint32_t> state{kFree};
  std::atomic<std::uintptr_t> begin{0};
  std::atomic<std::uintptr_t> end{0};
  std::uint64_t retired_window = 0;  ///< not read by the handler
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
  std::atomic<std::uint32_t> in_flight{0};  ///< handlers inside the table / buffer

  std::atomic<std::uint64_t> faults{0};
  std::atomic<std::uint64_t> dropped{0};
  std::atomic<std::uint64_t> unprotect_fallbacks{0};

  std::uintptr_t page_mask = ~std::uintptr_t{4095};
  struct sigaction previous {};      ///< written before our handler is installed, read-only after
  std::atomic<bool> installed{false};
  std::atomic<bool> owned{false};    ///< a tracer is alive
  std::mutex install_mu;             ///< non-signal paths only
};

constinit SignalState g_signal_state;

enum class Access { read, write, unknown };

/// Whether the faulting access was a write, from the page-fault error code the kernel puts in the
/// signal context (x86-64: bit 1 of REG_ERR). Other architectures: unknown (treated as a write
/// for the protection restored, reported as not known written).
Access fault_access(const void* ctx) {
#if defined(__x86_64__)
  const auto* uc = static_cast<const ucontext_t*>(ctx);
  return (uc->uc_mcontext.gregs[REG_ERR] & 0x2) ? Access::write : Access::read;
#else
  (void)ctx;
  return Access::unknown;
#endif
}

/// Whether `page` can be read now, without touching it (a syscall copying one byte from ourselves).
bool page_is_readable(std::uintptr_t page) {
  char byte;
  iovec local{&byte, 1};
  iovec remote{reinterpret_cast<void*>(page), 1};
  if (::syscall(SYS_process_vm_readv, ::getpid(), &local, 1, &remote, 1, 0) == 1) return true;
  // EFAULT: really inaccessible. Anything else (e.g. a seccomp filter): assume the benign race.
  return errno != EFAULT;
}

/// Appends one entry to the fault buffer; counts a drop when it is full.
void record(SignalState& g, std::uintptr_t value) {
  auto* ring = g.ring.load(std::memory_order_acquire);
  const std::size_t cap = g.capacity.load(std::memory_order_relaxed);
  if (!ring || cap == 0) {
    g.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::uint64_t w = g.write_pos.load(std::memory_order_relaxed);
  do {
    if (w - g.read_pos.load(std::memory_order_acquire) >= cap) {
      g.dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  } while (!g.write_pos.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_relaxed));
  ring[w % cap].store(value, std::memory_order_release);
}

/// Handles a fault at `addr` if it lies in a tracked (or just untracked) range. Returns false when
/// the fault is not ours.
bool handle_fault(SignalState& g, std::uintptr_t addr, const void* ctx) {
  const std::uintptr_t page = addr & g.page_mask;
  bool retired_match = false;
  std::uintptr_t tb = 0, te = 0;
  bool tracked_match = false;
  const std::uint32_t n = g.used.load(std::memory_order_acquire);
  for (std::uint32_t i = 0; i < n && !tracked_match; ++i) {
    Slot& s = g.slots[i];
    const std::uint32_t seq = s.seq.load(std::memory_order_acquire);
    if (seq & 1) continue;
    const std::uint32_t st = s.state.load(std::memory_order_relaxed);
    const std::uintptr_t b = s.begin.load(std::memory_order_relaxed);
    const std::uintptr_t e = s.end.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.seq.load(std::memory_order_relaxed) != seq) continue;
    if (st == kFree || page < b || page >= e) continue;
    if (st == kTracked) {
      tracked_match = true;
      tb = b;
      te = e;
    } else {
      retired_match = true;
    }
  }
  if (tracked_match) {
    const Access access = fault_access(ctx);
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
  return retired_match && page_is_readable(page);
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
    g.in_flight.fetch_add(1, std::memory_order_seq_cst);
    handled = handle_fault(g, reinterpret_cast<std::uintptr_t>(info->si_addr), ctx);
    g.in_flight.fetch_sub(1, std::memory_order_seq_cst);
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
  s.seq.fetch_add(1, std::memory_order_acq_rel);  // odd: the handler skips the slot
  std::atomic_thread_fence(std::memory_order_release);
  s.state.store(state, std::memory_order_relaxed);
  s.begin.store(b, std::memory_order_relaxed);
  s.end.store(e, std::memory_order_relaxed);
  s.seq.fetch_add(1, std::memory_order_release);
}

void retire_slot(Slot& s, std::uint64_t window) {
  s.retired_window = window;
  s.seq.fetch_add(1, std::memory_order_acq_rel);
  s.state.store(kRetired, std::memory_order_relaxed);
  s.seq.fetch_add(1, std::memory_order_release);
}

/// A free slot, else the oldest retired one, else -1 (table full).
int allocate_slot(SignalState& g) {
  const std::uint32_t n = g.used.load(std::memory_order_relaxed);
  int oldest = -1;
  for (std::uint32_t i = 0; i < n; ++i) {
    const auto st = g.slots[i].state.load(std::memory_order_relaxed);
    if (st == kFree) return static_cast<int>(i);
    if (st == kRetired && (oldest < 0 || g.slots[i].retired_window < g.slots[oldest].retired_window)) oldest = static_cast<int>(i);
  }
  if (n < kMaxRanges) {
    g.used.store(n + 1, std::memory_order_release);  // slot n is free: the handler skips it
    return static_cast<int>(n);
  }
  return oldest;
}

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
      // Slots a previous tracer retired restart their grace period on our window count.
      for (std::uint32_t i = 0; i < g_.used.load(); ++i) g_.slots[i].retired_window = 0;
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
      std::vector<std::pair<std::uintptr_t, std::uintptr_t>> freed;
      for (const auto& r : ranges_) {
        freed.emplace_back(r.begin, r.end);
        ::mprotect(reinterpret_cast<void*>(r.begin), r.end - r.begin, PROT_READ | PROT_WRITE);
        retire_slot(g_.slots[r.slot], windows_);
      }
      ranges_.clear();
      restore_after_handlers(freed);
    }
    g_.ring.store(nullptr, std::memory_order_seq_cst);
    wait_for_handlers(g_);
    {
      std::lock_guard lock(g_.install_mu);
      struct sigaction cur {};
      if (::sigaction(SIGSEGV, nullptr, &cur) == 0 && handler_is_ours(cur)) {
        ::sigaction(SIGSEGV, &g_.previous, nullptr);
        g_.installed.store(false);
      }
    }
    g_.owned.store(false);
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
    std::vector<TrackedRange> kept;
    std::vector<std::pair<std::uintptr_t, std::uintptr_t>> freed;
    kept.reserve(ranges_.size() + 2);
    for (const auto& r : ranges_) {
      if (!(r.begin < e && b < r.end)) {
        kept.push_back(r);
        continue;
      }
      // Order matters (Note [tracked-range table]): publish the parts that stay tracked, restore
      // access to the part removed, then retire the old slot.
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
        retire_slot(g_.slots[r.slot], windows_);
        continue;
      }
      freed.emplace_back(cut_b, cut_e);
      ::mprotect(reinterpret_cast<void*>(cut_b), cut_e - cut_b, PROT_READ | PROT_WRITE);
      retire_slot(g_.slots[r.slot], windows_);
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

    // Free slots retired at least two windows ago (Note [tracked-range table]).
    ++windows_;
    const std::uint32_t n = g_.used.load(std::memory_order_relaxed);
    for (std::uint32_t i = 0; i < n; ++i) {
      Slot& s = g_.slots[i];
      if (s.state.load(std::memory_order_relaxed) == kRetired && s.retired_window + 2 <= windows_) write_slot(s, kFree, 0, 0);
    }
    std::uint32_t used = n;
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
  /// first mprotect (Note [tracked-range table]). Handlers arriving later see the slots retired and
  /// change no protection.
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

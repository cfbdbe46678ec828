// PageTracer: the OS side of profiling host memory. It watches registered address ranges and, at
// each op boundary, reports which pages were touched (and, where the kernel can tell, written)
// since the previous boundary, then re-arms them. The event recorder joins these windows with the
// framework's op events (see profiler/event_recorder.hpp).
//
// Implementations (profiler/page_tracer_*.cpp), chosen at run time by make_page_tracer():
//   - uffd-wp: userfaultfd write-protect with WP_ASYNC + the PAGEMAP_SCAN ioctl: written pages found
//     and re-armed in one call, no signal handler (Linux >= 6.7). Sees writes only.
//   - mprotect: PROT_NONE + a SIGSEGV handler that records the page and restores access; sees reads
//     and writes. The handler does only async-signal-safe work and chains to any previous handler
//     for faults outside tracked ranges.
//   - soft-dirty: /proc/self/clear_refs + pagemap bit 55 (kernels with CONFIG_MEM_SOFT_DIRTY);
//     the write-tracking fallback when uffd-wp is missing. Sees writes only.
//   - none: records nothing (tracing off or unavailable).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.hpp"

namespace tierpack {

/// One page seen in a window.
struct PageTouch {
  std::uintptr_t page = 0;  ///< page-aligned address
  bool written = false;     ///< known written (false: read, or the tracer cannot tell)
};

/// Counters a tracer keeps since it was created; fields a tracer has no use for stay zero.
struct PageTracerStats {
  std::uint64_t windows = 0;         ///< end_window calls
  std::uint64_t pages_reported = 0;  ///< PageTouch entries appended by end_window
  std::uint64_t faults = 0;          ///< faults the tracer handled (mprotect)
  std::uint64_t dropped = 0;         ///< touches lost because the fault buffer was full (their
                                     ///< pages are still re-armed; the next window sees them again)
  std::uint64_t unprotect_fallbacks = 0;  ///< faults that had to unprotect a whole range (VMA limit)
  std::uint64_t rearm_failures = 0;  ///< ranges the kernel refused to re-arm (e.g. unmapped while tracked)
  bool handler_displaced = false;    ///< mprotect: another SIGSEGV handler was installed over ours
};

class PageTracer {
 public:
  virtual ~PageTracer() = default;

  /// "uffd-wp", "soft-dirty", "mprotect" or "none" (recorded in Profile::meta.page_tracer).
  virtual std::string_view name() const = 0;
  /// Whether the tracer reports reads (mprotect) or only writes (uffd-wp).
  virtual bool sees_reads() const = 0;

  /// Starts watching [addr, addr + bytes); both page-aligned. Throws os_error when the kernel refuses.
  virtual void track(void* addr, std::size_t bytes) = 0;
  /// Stops watching a range and restores normal access. Never throws.
  virtual void untrack(void* addr, std::size_t bytes) noexcept = 0;

  /// Closes the current window: appends the pages touched since the previous call and re-arms them.
  /// Call at op boundaries from any one thread at a time.
  virtual void end_window(std::vector<PageTouch>& out) = 0;

  /// Counters so far (overflow, re-arm failures...). Safe to call alongside end_window.
  virtual PageTracerStats stats() const { return {}; }
};

/// Creates the tracer asked for. `automatic` picks uffd-wp where the kernel supports it, else
/// mprotect; `uffd` falls back to soft-dirty, then mprotect; `off` gives the none tracer. `why`
/// (optional) receives a one-line reason when a fallback was taken (empty otherwise). Only one
/// mprotect tracer may live in a process at a time (it owns the SIGSEGV handler's state).
std::unique_ptr<PageTracer> make_page_tracer(PageTracerKind kind, std::string* why = nullptr);

/// NUMA node of each page (move_pages with nodes = NULL): a node number, or a negative errno
/// (-ENOENT: not yet touched, -EFAULT: not mapped). Works on one-node machines.
std::vector<int> query_page_nodes(const std::vector<void*>& pages);

}  // namespace tierpack

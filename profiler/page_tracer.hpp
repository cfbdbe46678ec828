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

class PageTracer {
 public:
  virtual ~PageTracer() = default;

  /// "uffd-wp", "mprotect" or "none" (recorded in Profile::meta.page_tracer).
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
};

/// Creates the tracer asked for. `automatic` picks uffd-wp where the kernel supports it, else
/// mprotect. `why` (optional) receives a one-line reason when a fallback was taken.
std::unique_ptr<PageTracer> make_page_tracer(PageTracerKind kind, std::string* why = nullptr);

/// NUMA node of each page (move_pages with nodes = NULL): a node number, or a negative errno
/// (-ENOENT: not yet touched, -EFAULT: not mapped). Works on one-node machines.
std::vector<int> query_page_nodes(const std::vector<void*>& pages);

}  // namespace tierpack

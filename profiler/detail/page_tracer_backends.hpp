// The PageTracer implementations behind make_page_tracer(), and the run-time probes that decide
// which ones this kernel supports. Private to profiler/ (and its tests and benchmarks, which name a
// backend directly instead of going through the automatic choice).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "profiler/detail/range_list.hpp"
#include "profiler/page_tracer.hpp"

namespace tierpack::detail {

/// Whether a backend can run here; `why` says what is missing (one line) when it cannot.
struct TracerSupport {
  bool available = false;
  std::string why;
};

/// userfaultfd with UFFD_FEATURE_WP_ASYNC (+ WP_UNPOPULATED) and the PAGEMAP_SCAN ioctl.
TracerSupport probe_uffd_wp();
/// Soft-dirty bits: /proc/self/clear_refs "4" clears them, pagemap bit 55 reports them. Probed by
/// behaviour (a written page must show the bit), since the files exist even without the feature.
TracerSupport probe_soft_dirty();

/// Throw os_error / logic_error when the backend is not available (call the probe first).
std::unique_ptr<PageTracer> make_uffd_wp_tracer();
std::unique_ptr<PageTracer> make_soft_dirty_tracer();

/// Default capacity of the mprotect tracer's fault buffer (entries; 8 bytes each).
inline constexpr std::size_t kDefaultFaultBufferEntries = std::size_t{1} << 18;
/// At most one mprotect tracer lives in a process at a time (it owns the SIGSEGV handler's state);
/// creating a second while one lives is a logic_error.
std::unique_ptr<PageTracer> make_mprotect_tracer(std::size_t fault_buffer_entries = kDefaultFaultBufferEntries);

std::unique_ptr<PageTracer> make_none_tracer();

/// What the scanning tracers (soft-dirty, uffd-wp) count, read by stats() from any thread.
struct ScanCounters {
  std::atomic<std::uint64_t> windows{0}, pages_reported{0}, rearm_failures{0};

  /// One end_window that appended `reported` touches.
  void window(std::uint64_t reported) noexcept {
    windows.fetch_add(1, std::memory_order_relaxed);
    pages_reported.fetch_add(reported, std::memory_order_relaxed);
  }
  void rearm_failed() noexcept { rearm_failures.fetch_add(1, std::memory_order_relaxed); }
  PageTracerStats stats() const noexcept {
    PageTracerStats st;
    st.windows = windows.load(std::memory_order_relaxed);
    st.pages_reported = pages_reported.load(std::memory_order_relaxed);
    st.rearm_failures = rearm_failures.load(std::memory_order_relaxed);
    return st;
  }
};

/// The host page size (the OS layer's, platform/host_os.hpp).
std::size_t host_page_size() noexcept;

/// The scanning tracers (soft-dirty, uffd-wp): the tracked ranges in a list, each armed when tracked, so
/// that end_window() finds their written pages by scanning them. Reads are invisible to them.
class ScanningTracer : public PageTracer {
 public:
  bool sees_reads() const override { return false; }
  /// Checks the range (page-aligned, non-empty, overlapping no tracked one), arms it and lists it.
  void track(void* addr, std::size_t bytes) final;
  /// Drops [addr, addr + bytes) from the list (any part of a tracked range) and disarms what it held.
  void untrack(void* addr, std::size_t bytes) noexcept final;
  PageTracerStats stats() const override { return counters_.stats(); }

 protected:
  /// Arms [b, e): writes from now on show in the next scan, earlier ones not. Throws os_error. mu_ held.
  virtual void arm(std::uintptr_t b, std::uintptr_t e) = 0;
  /// Undoes arm() for [b, e), a part of a tracked range. mu_ held.
  virtual void disarm(std::uintptr_t b, std::uintptr_t e) noexcept = 0;

  const std::size_t page_ = host_page_size();
  std::mutex mu_;
  std::vector<AddressRange> ranges_;  ///< under mu_
  ScanCounters counters_;
};

}  // namespace tierpack::detail

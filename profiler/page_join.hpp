// PageJoin: joins the OS's view of host memory (pages touched per op window, from a PageTracer) with
// the framework's view (which tensors live on which pages, which tensors the running ops use).
// The EventRecorder drives it during the profiled iteration: add() when a trackable tensor appears,
// remove() when it is freed, end_window() at every op boundary, stop() when the iteration ends;
// apply() then writes per-tensor page counts, flags and tiers and returns the notable pages.
//
// Note [Page windows]
// A window is the time between two op boundaries (any op's begin or end, on any thread). Pages the
// tracer reports for a window are attributed to every tensor living on them in that window: the OS
// cannot tell which bytes of a page were touched, which is exactly the page false sharing that
// placement must avoid. A touched page none of whose tensors is used by an op running in the window
// (its inputs, its outputs, tensors allocated while it runs, or allocated in the window) is a hidden
// access: something the framework did not
// report touched it (a custom kernel, numpy or ctypes writing into a tensor, a stray pointer).
// Freed tensors stay attributed until the window that saw the free closes, so the writes of the op
// that freed them still count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor_class.hpp"
#include "core/tensor_record.hpp"
#include "profiler/page_tracer.hpp"

namespace tierpack {

/// NUMA node per page (query_page_nodes' contract: node, or negative errno).
using PageNodeQuery = std::function<std::vector<int>(const std::vector<void*>&)>;

class PageJoin {
 public:
  /// `tracer` must outlive the join. `nodes` (optional) reads page residency before pages are released.
  PageJoin(PageTracer& tracer, std::size_t page_size, PageNodeQuery nodes = {});
  ~PageJoin();  // stops watching whatever is still tracked
  PageJoin(const PageJoin&) = delete;
  PageJoin& operator=(const PageJoin&) = delete;

  /// Starts attributing the pages of [addr, addr + bytes) to `tensor`. Pages not yet watched are
  /// handed to the tracer (runs of pages coalesced into one track() call). A range the tracer refuses
  /// is left untracked and noted in warnings().
  void add(std::uint32_t tensor, std::uintptr_t addr, std::size_t bytes);
  /// The tensor was freed. Its pages stay attributed to it until the current window closes.
  void remove(std::uint32_t tensor) noexcept;
  /// Closes the current window. `used`: tensors that ops running in the window read, wrote or
  /// allocated (any order, duplicates allowed).
  void end_window(std::vector<std::uint32_t>& used);
  /// Closes the last window (with `used`), reads residency of the pages still watched and stops
  /// watching them. Further calls do nothing.
  void stop(std::vector<std::uint32_t>& used);

  /// Writes pages, pages_touched, page_touches, pages_written, tier (majority node of its resident
  /// pages, through node_to_tier) and the hidden-access / false-sharing flags into `tensors`
  /// (indexed by tensor id; `classes` likewise) and appends the notable pages (shared by several
  /// tensors, or touched behind the framework's back) to `pages`.
  void apply(std::vector<TensorRecord>& tensors, std::span<const TensorClass> classes,
             const std::function<TierId(int)>& node_to_tier, std::vector<PageRecord>& pages) const;

  std::uint64_t windows() const { return window_; }
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  struct Occupant {
    std::uint32_t tensor = 0;
    std::uint32_t first_window = 0;
    std::uint32_t last_window = UINT32_MAX;  ///< window that closed after its free
    std::uint32_t touch_windows = 0;         ///< windows in which the page was touched while it lived
    bool written = false;
    bool hidden = false;                     ///< touched in a window where no op used a tensor here
  };
  struct Page {
    std::vector<Occupant> occupants;  ///< every tensor that lived on it, in arrival order
    std::uint32_t live = 0;           ///< occupants not yet freed
    std::uint32_t touch_windows = 0;
    std::uint32_t hidden_windows = 0;
    int node = -1;
    bool written = false;
    bool tracked = false;
  };
  struct Span {
    std::uintptr_t first = 0;  ///< first page address
    std::uint32_t count = 0;   ///< pages
    bool present = false;
  };

  void attribute(std::vector<std::uint32_t>& used);
  void release_freed();
  void release_pages(std::vector<std::uintptr_t>& pages);
  void track_run(std::uintptr_t first, std::size_t count);

  PageTracer& tracer_;
  std::size_t page_size_;
  PageNodeQuery nodes_;
  std::unordered_map<std::uintptr_t, Page> pages_;
  std::vector<Span> spans_;              ///< by tensor id
  std::vector<std::uint32_t> freed_;     ///< removed in the current window
  std::vector<PageTouch> touches_;       ///< scratch
  std::uint32_t window_ = 0;
  bool stopped_ = false;
  std::vector<std::string> warnings_;
};

}  // namespace tierpack

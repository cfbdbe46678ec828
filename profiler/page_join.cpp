// The page join (see page_join.hpp, Note [Page windows]).
#include "profiler/page_join.hpp"

#include <algorithm>
#include <map>

#include "core/error.hpp"

namespace tierpack {

PageJoin::PageJoin(PageTracer& tracer, std::size_t page_size, PageNodeQuery nodes)
    : tracer_(tracer), page_size_(page_size), nodes_(std::move(nodes)) {
  TIERPACK_EXPECTS(page_size_ > 0 && (page_size_ & (page_size_ - 1)) == 0, "page size must be a power of two");
}

PageJoin::~PageJoin() {
  if (stopped_) return;
  for (auto& [addr, page] : pages_)
    if (page.tracked) tracer_.untrack(reinterpret_cast<void*>(addr), page_size_);
}

void PageJoin::track_run(std::uintptr_t first, std::size_t count) {
  try {
    tracer_.track(reinterpret_cast<void*>(first), count * page_size_);
  } catch (const std::exception& e) {
    if (warnings_.size() < 16) warnings_.push_back(std::string("page tracer refused a range: ") + e.what());
    return;
  }
  for (std::size_t i = 0; i < count; ++i) pages_[first + i * page_size_].tracked = true;
}

void PageJoin::add(std::uint32_t tensor, std::uintptr_t addr, std::size_t bytes) {
  if (stopped_ || bytes == 0) return;
  const std::uintptr_t mask = ~static_cast<std::uintptr_t>(page_size_ - 1);
  const std::uintptr_t first = addr & mask;
  const std::uintptr_t end = (addr + bytes + page_size_ - 1) & mask;
  const auto count = static_cast<std::uint32_t>((end - first) / page_size_);
  if (spans_.size() <= tensor) spans_.resize(std::size_t{tensor} + 1);
  spans_[tensor] = Span{first, count, true};
  // Register the occupant everywhere, and hand runs of not-yet-watched pages to the tracer as one
  // range each (one mprotect / one uffd registration instead of one per page).
  std::uintptr_t run_start = 0;
  std::size_t run_len = 0;
  for (std::uintptr_t p = first; p < end; p += page_size_) {
    Page& page = pages_[p];
    page.occupants.push_back(Occupant{tensor, window_});
    ++page.live;
    if (!page.tracked) {
      if (run_len == 0) run_start = p;
      ++run_len;
    } else if (run_len) {
      track_run(run_start, run_len);
      run_len = 0;
    }
  }
  if (run_len) track_run(run_start, run_len);
}

void PageJoin::remove(std::uint32_t tensor) noexcept {
  if (stopped_ || tensor >= spans_.size() || !spans_[tensor].present) return;
  try {
    freed_.push_back(tensor);
  } catch (...) {
    // Out of memory while recording: the tensor's pages stay watched until stop().
  }
}

void PageJoin::attribute(std::vector<std::uint32_t>& used) {
  touches_.clear();
  tracer_.end_window(touches_);
  const std::uint32_t window = window_++;
  if (touches_.empty()) return;
  std::sort(used.begin(), used.end());
  for (const PageTouch& t : touches_) {
    auto it = pages_.find(t.page);
    if (it == pages_.end()) continue;  // no tensor ever lived here (allocator-owned, or foreign)
    Page& page = it->second;
    auto alive = [window](const Occupant& o) { return o.first_window <= window && o.last_window >= window; };
    bool any = false, reported = false;
    for (const Occupant& o : page.occupants) {
      if (!alive(o)) continue;
      any = true;
      if (std::binary_search(used.begin(), used.end(), o.tensor)) reported = true;
    }
    if (!any) continue;  // touched between the last tensor's free and re-use: allocator bookkeeping
    ++page.touch_windows;
    page.written = page.written || t.written;
    if (!reported) ++page.hidden_windows;
    for (Occupant& o : page.occupants) {
      if (!alive(o)) continue;
      ++o.touch_windows;
      o.written = o.written || t.written;
      o.hidden = o.hidden || !reported;
    }
  }
}

void PageJoin::release_pages(std::vector<std::uintptr_t>& addrs) {
  if (addrs.empty()) return;
  std::sort(addrs.begin(), addrs.end());
  // Residency first (the pages are still mapped and watched), in one batch.
  if (nodes_) {
    std::vector<void*> ptrs;
    ptrs.reserve(addrs.size());
    for (auto a : addrs) ptrs.push_back(reinterpret_cast<void*>(a));
    std::vector<int> nodes;
    try {
      nodes = nodes_(ptrs);
    } catch (const std::exception& e) {
      if (warnings_.size() < 16) warnings_.push_back(std::string("page residency query failed: ") + e.what());
    }
    for (std::size_t i = 0; i < nodes.size() && i < addrs.size(); ++i) pages_[addrs[i]].node = nodes[i];
  }
  // Untrack runs of contiguous tracked pages.
  std::size_t i = 0;
  while (i < addrs.size()) {
    if (!pages_[addrs[i]].tracked) {
      ++i;
      continue;
    }
    std::size_t j = i + 1;
    while (j < addrs.size() && addrs[j] == addrs[j - 1] + page_size_ && pages_[addrs[j]].tracked) ++j;
    tracer_.untrack(reinterpret_cast<void*>(addrs[i]), (j - i) * page_size_);
    for (std::size_t k = i; k < j; ++k) pages_[addrs[k]].tracked = false;
    i = j;
  }
}

void PageJoin::release_freed() {
  if (freed_.empty()) return;
  const std::uint32_t closed = window_ - 1;  // the window that saw the frees
  std::vector<std::uintptr_t> unwatched;
  for (std::uint32_t tensor : freed_) {
    Span& span = spans_[tensor];
    if (!span.present) continue;
    span.present = false;
    for (std::uint32_t i = 0; i < span.count; ++i) {
      const std::uintptr_t addr = span.first + i * page_size_;
      Page& page = pages_[addr];
      for (Occupant& o : page.occupants)
        if (o.tensor == tensor && o.last_window == UINT32_MAX) o.last_window = closed;
      if (page.live > 0 && --page.live == 0 && page.tracked) unwatched.push_back(addr);
    }
  }
  freed_.clear();
  release_pages(unwatched);
}

void PageJoin::end_window(std::vector<std::uint32_t>& used) {
  if (stopped_) return;
  attribute(used);
  release_freed();
}

void PageJoin::stop(std::vector<std::uint32_t>& used) {
  if (stopped_) return;
  end_window(used);
  std::vector<std::uintptr_t> tracked;
  for (auto& [addr, page] : pages_)
    if (page.tracked) tracked.push_back(addr);
  release_pages(tracked);
  stopped_ = true;
}

void PageJoin::apply(std::vector<TensorRecord>& tensors, std::span<const TensorClass> classes,
                     const std::function<TierId(int)>& node_to_tier, std::vector<PageRecord>& out) const {
  std::vector<std::map<int, std::uint32_t>> node_pages(tensors.size());  // tensor -> node -> pages
  std::vector<std::uintptr_t> order;
  order.reserve(pages_.size());
  for (const auto& [addr, page] : pages_) order.push_back(addr);
  std::sort(order.begin(), order.end());
  for (std::uintptr_t addr : order) {
    const Page& page = pages_.at(addr);
    bool false_shared = false;
    for (std::size_t a = 0; a < page.occupants.size() && !false_shared; ++a)
      for (std::size_t b = a + 1; b < page.occupants.size() && !false_shared; ++b) {
        const Occupant& x = page.occupants[a];
        const Occupant& y = page.occupants[b];
        if (x.tensor == y.tensor || x.tensor >= classes.size() || y.tensor >= classes.size()) continue;
        const bool overlap = x.first_window <= y.last_window && y.first_window <= x.last_window;
        if (overlap && classes[x.tensor] != classes[y.tensor]) false_shared = true;
      }
    std::vector<std::uint32_t> ids;
    for (const Occupant& o : page.occupants) {
      if (o.tensor >= tensors.size()) continue;
      TensorRecord& t = tensors[o.tensor];
      if (std::find(ids.begin(), ids.end(), o.tensor) == ids.end()) {
        ids.push_back(o.tensor);
        ++t.pages;
      }
      if (o.touch_windows > 0) ++t.pages_touched;
      t.page_touches += o.touch_windows;
      if (o.written) ++t.pages_written;
      if (o.hidden) t.flags |= kTensorHiddenAccess;
      if (false_shared) t.flags |= kTensorFalseShared;
      if (page.node >= 0) ++node_pages[o.tensor][page.node];
    }
    if (ids.size() > 1 || page.hidden_windows > 0) {
      PageRecord r;
      r.address = addr;
      r.numa_node = page.node;
      r.tensors = ids;
      std::sort(r.tensors.begin(), r.tensors.end());
      r.touch_windows = page.touch_windows;
      r.hidden_windows = page.hidden_windows;
      r.written = page.written;
      r.false_shared = false_shared;
      out.push_back(std::move(r));
    }
  }
  if (!node_to_tier) return;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (node_pages[i].empty()) continue;
    auto best = std::max_element(node_pages[i].begin(), node_pages[i].end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    tensors[i].tier = node_to_tier(best->first);
  }
}

}  // namespace tierpack

// Choosing a page tracer at run time, the `none` tracer, the scanning tracers' list of ranges, and per-page
// NUMA residency through move_pages(2) of the OS layer (platform/host_os.hpp; see page_tracer.hpp).
#include "profiler/page_tracer.hpp"

#include <algorithm>
#include <cerrno>
#include <span>

#include "core/error.hpp"
#include "platform/host_os.hpp"
#include "profiler/detail/page_tracer_backends.hpp"

namespace tierpack {
namespace detail {
namespace {

/// Records nothing: tracing is off, or no backend could run.
class NoneTracer final : public PageTracer {
 public:
  std::string_view name() const override { return "none"; }
  bool sees_reads() const override { return false; }
  void track(void*, std::size_t) override {}
  void untrack(void*, std::size_t) noexcept override {}
  void end_window(std::vector<PageTouch>&) override { ++windows_; }
  PageTracerStats stats() const override {
    PageTracerStats s;
    s.windows = windows_;
    return s;
  }

 private:
  std::uint64_t windows_ = 0;
};

}  // namespace

std::unique_ptr<PageTracer> make_none_tracer() { return std::make_unique<NoneTracer>(); }

std::size_t host_page_size() noexcept { return host::system_os().page_size(); }

void ScanningTracer::track(void* addr, std::size_t bytes) {
  const auto b = reinterpret_cast<std::uintptr_t>(addr);
  TIERPACK_EXPECTS(b % page_ == 0 && bytes % page_ == 0 && bytes > 0,
                   "track: range must be page-aligned and non-empty");
  std::lock_guard lock(mu_);
  TIERPACK_EXPECTS(!overlaps_any(ranges_, b, b + bytes), "track: range overlaps a tracked range");
  arm(b, b + bytes);
  ranges_.push_back({b, b + bytes});
}

void ScanningTracer::untrack(void* addr, std::size_t bytes) noexcept {
  const auto b = reinterpret_cast<std::uintptr_t>(addr);
  std::lock_guard lock(mu_);
  for (const AddressRange& r : subtract_range(ranges_, b, b + bytes)) disarm(r.begin, r.end);
}

}  // namespace detail

std::unique_ptr<PageTracer> make_page_tracer(PageTracerKind kind, std::string* why) {
  auto say = [&](std::string text) {
    if (why) *why = std::move(text);
  };
  say({});
  switch (kind) {
    case PageTracerKind::off:
      return detail::make_none_tracer();
    case PageTracerKind::mprotect:
      return detail::make_mprotect_tracer();
    case PageTracerKind::automatic: {
      // uffd-wp costs nothing per write and needs no signal handler, but sees only writes;
      // mprotect sees reads too at a few microseconds per first touch.
      const auto uffd = detail::probe_uffd_wp();
      if (uffd.available) return detail::make_uffd_wp_tracer();
      say("uffd-wp unavailable (" + uffd.why + "); using mprotect");
      return detail::make_mprotect_tracer();
    }
    case PageTracerKind::uffd: {
      // Asked for write tracking: prefer the other write tracker before changing what is seen.
      const auto uffd = detail::probe_uffd_wp();
      if (uffd.available) return detail::make_uffd_wp_tracer();
      const auto sd = detail::probe_soft_dirty();
      if (sd.available) {
        say("uffd-wp unavailable (" + uffd.why + "); using soft-dirty bits");
        return detail::make_soft_dirty_tracer();
      }
      say("uffd-wp unavailable (" + uffd.why + "); soft-dirty unavailable (" + sd.why + "); using mprotect");
      return detail::make_mprotect_tracer();
    }
  }
  throw logic_error("make_page_tracer: unknown tracer kind");
}

std::vector<int> query_page_nodes(const std::vector<void*>& pages) {
  // move_pages with nodes = NULL only reports; the kernel copies the whole array in, so large queries
  // go in batches to bound its temporary allocations.
  constexpr std::size_t kBatch = 16384;
  auto& os = host::system_os();
  std::vector<int> status(pages.size(), 0);
  for (std::size_t first = 0; first < pages.size(); first += kBatch) {
    const std::size_t n = std::min(kBatch, pages.size() - first);
    int err;
    do err = os.move_pages(std::span<void* const>(pages.data() + first, n), {}, std::span<int>(status.data() + first, n));
    while (err == EINTR);
    if (err != 0) throw os_error("move_pages (query " + std::to_string(n) + " pages)", err);
  }
  return status;
}

}  // namespace tierpack

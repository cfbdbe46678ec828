// soft-dirty page tracer: write tracking for kernels that have CONFIG_MEM_SOFT_DIRTY but not
// uffd WP_ASYNC + PAGEMAP_SCAN. Writing "4" to /proc/self/clear_refs clears every soft-dirty bit of
// the process (and write-protects the pages so the next write sets the bit again); bit 55 of a
// /proc/self/pagemap entry reports it. Reads are invisible (sees_reads() == false).
//
// Note [soft-dirty is process-wide]
// clear_refs cannot be limited to a range: each window end clears the bits of the whole process.
// That is correct for tierpack (only tracked ranges are read back) but costs time proportional to
// the process's resident memory, and it disturbs any other soft-dirty user in the process (CRIU).
// It is therefore only the fallback for write tracking, after uffd-wp.
//
// The files exist even on kernels without the feature (clear_refs accepts "4" and does nothing;
// bit 55 stays 0), so probe_soft_dirty() checks behaviour: a page written after a clear must show
// the bit.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>

#include "core/error.hpp"
#include "platform/host_os.hpp"
#include "profiler/detail/linux_uapi.hpp"
#include "profiler/detail/page_tracer_backends.hpp"
#include "profiler/detail/range_list.hpp"
#include "profiler/detail/unique_fd.hpp"

namespace tierpack::detail {
namespace {

/// Clears all soft-dirty bits of the process. Returns 0 or an errno.
int clear_soft_dirty(int clear_refs) {
  if (::pwrite(clear_refs, "4", 1, 0) != 1) return errno ? errno : EIO;
  return 0;
}

/// Reads the pagemap entries of `n` pages from `first`. Returns 0 or an errno.
int read_pagemap(int pagemap, std::uintptr_t first, std::size_t n, std::size_t page, std::uint64_t* entries) {
  const auto offset = static_cast<off_t>(first / page * sizeof(std::uint64_t));
  std::size_t want = n * sizeof(std::uint64_t), got = 0;
  while (got < want) {
    const ssize_t r = ::pread(pagemap, reinterpret_cast<char*>(entries) + got, want - got, offset + static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return r < 0 ? errno : EIO;
    got += static_cast<std::size_t>(r);
  }
  return 0;
}

struct SoftDirtyFiles {
  UniqueFd pagemap;
  UniqueFd clear_refs;
};

bool open_files(SoftDirtyFiles& f, std::string& why) {
  f.pagemap = UniqueFd(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
  if (!f.pagemap) {
    why = "cannot open /proc/self/pagemap: " + errno_text(errno);
    return false;
  }
  f.clear_refs = UniqueFd(::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC));
  if (!f.clear_refs) {
    why = "cannot open /proc/self/clear_refs: " + errno_text(errno);
    return false;
  }
  return true;
}

class SoftDirtyTracer final : public ScanningTracer {
 public:
  explicit SoftDirtyTracer(SoftDirtyFiles f) : f_(std::move(f)) {}

  std::string_view name() const override { return "soft-dirty"; }

  void end_window(std::vector<PageTouch>& out) override {
    std::lock_guard lock(mu_);
    std::uint64_t reported = 0;
    constexpr std::size_t kChunk = 4096;
    entries_.resize(kChunk);
    for (const auto& r : ranges_) {
      for (std::uintptr_t first = r.begin; first < r.end; first += kChunk * page_) {
        const std::size_t n = std::min<std::size_t>(kChunk, (r.end - first) / page_);
        if (read_pagemap(f_.pagemap.get(), first, n, page_, entries_.data()) != 0) {
          counters_.rearm_failed();
          break;
        }
        for (std::size_t i = 0; i < n; ++i)
          if (entries_[i] & uapi::kPagemapSoftDirty) {
            out.push_back({first + i * page_, true});
            ++reported;
          }
      }
    }
    if (const int err = clear_soft_dirty(f_.clear_refs.get())) throw os_error("write /proc/self/clear_refs", err);
    counters_.window(reported);
  }

 private:
  // Pages written before track() must not count in the first window.
  void arm(std::uintptr_t, std::uintptr_t) override {
    if (const int err = clear_soft_dirty(f_.clear_refs.get())) throw os_error("write /proc/self/clear_refs", err);
  }
  void disarm(std::uintptr_t, std::uintptr_t) noexcept override {}  // nothing to undo in the kernel

  SoftDirtyFiles f_;
  std::vector<std::uint64_t> entries_;  ///< pagemap entries of a chunk of a range (under mu_)
};

}  // namespace

TracerSupport probe_soft_dirty() {
  TracerSupport s;
  SoftDirtyFiles f;
  if (!open_files(f, s.why)) return s;
  const std::size_t page = host_page_size();
  auto& os = host::system_os();
  void* m = nullptr;
  if (const int map_err = os.map(page, &m); map_err != 0) {
    s.why = "mmap for the soft-dirty probe failed: " + errno_text(map_err);
    return s;
  }
  auto* p = static_cast<volatile char*>(m);
  p[0] = 1;
  std::uint64_t before = 0, after = 0;
  int err = clear_soft_dirty(f.clear_refs.get());
  if (err == 0) err = read_pagemap(f.pagemap.get(), reinterpret_cast<std::uintptr_t>(m), 1, page, &before);
  p[0] = 2;
  if (err == 0) err = read_pagemap(f.pagemap.get(), reinterpret_cast<std::uintptr_t>(m), 1, page, &after);
  os.unmap(m, page);
  if (err != 0) {
    s.why = "soft-dirty probe: clear_refs/pagemap failed: " + errno_text(err);
    return s;
  }
  if (!(after & uapi::kPagemapSoftDirty)) {
    s.why = "soft-dirty bits not supported by this kernel (a written page does not show pagemap bit 55; "
            "CONFIG_MEM_SOFT_DIRTY off)";
    return s;
  }
  if (before & uapi::kPagemapSoftDirty) {
    s.why = "soft-dirty bits are not cleared by /proc/self/clear_refs";
    return s;
  }
  s.available = true;
  return s;
}

std::unique_ptr<PageTracer> make_soft_dirty_tracer() {
  std::string why;
  SoftDirtyFiles f;
  if (!open_files(f, why)) throw logic_error("soft-dirty page tracer unavailable: " + why);
  return std::make_unique<SoftDirtyTracer>(std::move(f));
}

}  // namespace tierpack::detail

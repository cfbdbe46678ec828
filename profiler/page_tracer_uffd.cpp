// uffd-wp page tracer: write tracking without a signal handler. Tracked ranges are registered with
// a userfaultfd in write-protect mode with UFFD_FEATURE_WP_ASYNC, so the kernel resolves a write
// to a protected page by itself (no message, no handler thread) and leaves the page "written".
// At each window end one PAGEMAP_SCAN ioctl per range lists the written pages and write-protects
// them again (PM_SCAN_WP_MATCHING). Reads are invisible to this tracer (sees_reads() == false).
//
// Note [uffd-wp arming]
// UFFD_FEATURE_WP_UNPOPULATED makes UFFDIO_WRITEPROTECT install markers on never-touched pages too.
// Without it a first read of a fresh anonymous page would map the zero page without the wp bit and
// PAGEMAP_SCAN would call it written; with it, only real writes show up. Both features (Linux 6.4
// and 6.7) are required; probe_uffd_wp() says which one is missing.
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <mutex>
#include <optional>

#include "core/error.hpp"
#include "platform/host_os.hpp"
#include "profiler/detail/linux_uapi.hpp"
#include "profiler/detail/page_tracer_backends.hpp"
#include "profiler/detail/range_list.hpp"
#include "profiler/detail/unique_fd.hpp"

namespace tierpack::detail {
namespace {

using namespace uapi;

/// A userfaultfd negotiated for async write-protect, and /proc/self/pagemap for PAGEMAP_SCAN.
struct UffdSession {
  UniqueFd uffd;
  UniqueFd pagemap;
};

/// Opens and negotiates a session; on failure returns nullopt and says why.
std::optional<UffdSession> open_session(std::string& why) {
  // UFFD_USER_MODE_ONLY lets unprivileged processes in (vm.unprivileged_userfaultfd=0); it does not
  // limit WP_ASYNC, which the kernel resolves without handle_userfault(). Kernels before 5.11 reject
  // the flag: retry without it.
  int fd = static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | kUffdUserModeOnly));
  if (fd < 0 && errno == EINVAL) fd = static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
  if (fd < 0) {
    why = "userfaultfd() failed: " + errno_text(errno);
    return std::nullopt;
  }
  UffdSession s{UniqueFd(fd), UniqueFd()};
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = kUffdFeatureWpAsync | kUffdFeatureWpUnpopulated;
  if (::ioctl(fd, UFFDIO_API, &api) != 0) {
    // Older kernels answer EINVAL to a feature bit they do not know.
    why = errno == EINVAL ? "userfaultfd lacks WP_ASYNC/WP_UNPOPULATED (Linux >= 6.7 needed)"
                          : "UFFDIO_API failed: " + errno_text(errno);
    return std::nullopt;
  }
  if (!(api.features & kUffdFeatureWpAsync)) {
    why = "userfaultfd lacks UFFD_FEATURE_WP_ASYNC (Linux >= 6.7 needed)";
    return std::nullopt;
  }
  if (!(api.features & kUffdFeatureWpUnpopulated)) {
    why = "userfaultfd lacks UFFD_FEATURE_WP_UNPOPULATED (Linux >= 6.4 needed)";
    return std::nullopt;
  }
  s.pagemap = UniqueFd(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
  if (!s.pagemap) {
    why = "cannot open /proc/self/pagemap: " + errno_text(errno);
    return std::nullopt;
  }
  return s;
}

/// Registers [b, e) for async write-protect and protects it. Returns 0 or an errno.
int register_and_protect(int uffd, std::uintptr_t b, std::uintptr_t e) {
  uffdio_register reg{};
  reg.range.start = b;
  reg.range.len = e - b;
  reg.mode = UFFDIO_REGISTER_MODE_WP;
  if (::ioctl(uffd, UFFDIO_REGISTER, &reg) != 0) return errno;
  uffdio_writeprotect wp{};
  wp.range.start = b;
  wp.range.len = e - b;
  wp.mode = UFFDIO_WRITEPROTECT_MODE_WP;
  if (::ioctl(uffd, UFFDIO_WRITEPROTECT, &wp) != 0) {
    const int err = errno;
    ::ioctl(uffd, UFFDIO_UNREGISTER, &reg.range);
    return err;
  }
  return 0;
}

void unregister_range(int uffd, std::uintptr_t b, std::uintptr_t e) noexcept {
  uffdio_range r{};
  r.start = b;
  r.len = e - b;
  // Fails harmlessly (EINVAL/ENOMEM) when the range was unmapped meanwhile: nothing is left to undo.
  ::ioctl(uffd, UFFDIO_UNREGISTER, &r);
}

/// One PAGEMAP_SCAN call: written pages of [start, end) into vec, re-protecting them.
/// Returns the number of regions filled (>= 0) or -errno; `walk_end` is where the kernel stopped.
long scan_written(int pagemap, std::uintptr_t start, std::uintptr_t end, PageRegion* vec, std::size_t vec_len,
                  std::uintptr_t& walk_end) {
  PmScanArg a{};
  a.size = sizeof a;
  a.flags = kPmScanWpMatching | kPmScanCheckWpAsync;
  a.start = start;
  a.end = end;
  a.vec = reinterpret_cast<std::uintptr_t>(vec);
  a.vec_len = vec_len;
  a.category_mask = kPageIsWritten;
  a.return_mask = kPageIsWritten;
  long n;
  do n = ::ioctl(pagemap, kPagemapScan, &a);
  while (n < 0 && errno == EINTR);
  if (n < 0) return -errno;
  walk_end = static_cast<std::uintptr_t>(a.walk_end);
  return n;
}

class UffdWpTracer final : public ScanningTracer {
 public:
  explicit UffdWpTracer(UffdSession s) : s_(std::move(s)) {}

  ~UffdWpTracer() override {
    for (const auto& r : ranges_) unregister_range(s_.uffd.get(), r.begin, r.end);
  }

  std::string_view name() const override { return "uffd-wp"; }

  void end_window(std::vector<PageTouch>& out) override {
    std::lock_guard lock(mu_);
    std::uint64_t reported = 0;
    for (const auto& r : ranges_) {
      std::uintptr_t start = r.begin;
      while (start < r.end) {
        std::uintptr_t walk_end = r.end;
        const long n = scan_written(s_.pagemap.get(), start, r.end, vec_.data(), vec_.size(), walk_end);
        if (n < 0) {
          // The range changed under us (unmapped or remapped without untrack): count and move on.
          counters_.rearm_failed();
          break;
        }
        for (long i = 0; i < n; ++i)
          for (std::uint64_t p = vec_[i].start; p < vec_[i].end; p += page_) out.push_back({static_cast<std::uintptr_t>(p), true});
        for (long i = 0; i < n; ++i) reported += (vec_[i].end - vec_[i].start) / page_;
        // walk_end == end: the whole range was scanned. Otherwise the output vector filled up.
        if (walk_end >= r.end || walk_end <= start) break;
        start = walk_end;
      }
    }
    counters_.window(reported);
  }

 private:
  void arm(std::uintptr_t b, std::uintptr_t e) override {
    if (const int err = register_and_protect(s_.uffd.get(), b, e))
      throw os_error("userfaultfd register (write-protect)", err);
  }
  void disarm(std::uintptr_t b, std::uintptr_t e) noexcept override { unregister_range(s_.uffd.get(), b, e); }

  UffdSession s_;
  std::array<PageRegion, 512> vec_{};  ///< scan output; regions are runs, so 512 covers many pages
};

/// Maps `bytes` of anonymous memory for a probe (the OS layer's map); unmaps on scope exit.
struct ProbeMapping {
  explicit ProbeMapping(std::size_t bytes) : bytes_(bytes), err(host::system_os().map(bytes, &p)) {}
  ~ProbeMapping() {
    if (err == 0) host::system_os().unmap(p, bytes_);
  }
  ProbeMapping(const ProbeMapping&) = delete;
  ProbeMapping& operator=(const ProbeMapping&) = delete;
  std::size_t bytes_;
  void* p = nullptr;
  int err;  ///< 0, or the errno of the failed mapping
};

}  // namespace

TracerSupport probe_uffd_wp() {
  TracerSupport s;
  auto session = open_session(s.why);
  if (!session) return s;
  // Exercise the whole cycle on a scratch mapping: a written page must be found, a read one not,
  // and a second scan must find nothing (the first re-armed it).
  const std::size_t page = host_page_size();
  ProbeMapping m(2 * page);
  if (m.err != 0) {
    s.why = "mmap for the uffd-wp probe failed: " + errno_text(m.err);
    return s;
  }
  const auto b = reinterpret_cast<std::uintptr_t>(m.p);
  if (const int err = register_and_protect(session->uffd.get(), b, b + 2 * page)) {
    s.why = "userfaultfd write-protect registration failed: " + errno_text(err);
    return s;
  }
  static_cast<volatile char*>(m.p)[0] = 1;
  (void)static_cast<volatile char*>(m.p)[page];
  std::array<PageRegion, 4> vec{};
  std::uintptr_t walk_end = 0;
  long n = scan_written(session->pagemap.get(), b, b + 2 * page, vec.data(), vec.size(), walk_end);
  if (n < 0) {
    s.why = -n == ENOTTY || -n == EINVAL ? "PAGEMAP_SCAN ioctl not supported (Linux >= 6.7 needed)"
                                         : "PAGEMAP_SCAN failed: " + errno_text(static_cast<int>(-n));
    unregister_range(session->uffd.get(), b, b + 2 * page);
    return s;
  }
  const bool found = n == 1 && vec[0].start == b && vec[0].end == b + page;
  n = scan_written(session->pagemap.get(), b, b + 2 * page, vec.data(), vec.size(), walk_end);
  unregister_range(session->uffd.get(), b, b + 2 * page);
  if (!found || n != 0) {
    s.why = "PAGEMAP_SCAN with uffd WP_ASYNC did not report the probe's write as expected";
    return s;
  }
  s.available = true;
  return s;
}

std::unique_ptr<PageTracer> make_uffd_wp_tracer() {
  std::string why;
  auto session = open_session(why);
  if (!session) throw logic_error("uffd-wp page tracer unavailable: " + why);
  return std::make_unique<UffdWpTracer>(std::move(*session));
}

}  // namespace tierpack::detail

// Kernel interfaces newer than the C library headers tierpack builds against (Debian 12 ships
// 6.1 UAPI headers; PAGEMAP_SCAN and UFFD_FEATURE_WP_ASYNC arrived in 6.7). The layouts are the
// kernel's stable ABI (include/uapi/linux/fs.h, userfaultfd.h); the names are ours so they never
// clash with newer system headers. Whether the running kernel has them is probed at run time.
#pragma once

#include <cstdint>

#include <sys/ioctl.h>

namespace tierpack::detail::uapi {

// ---- userfaultfd (include/uapi/linux/userfaultfd.h) ----------------------------------------------
inline constexpr int kUffdUserModeOnly = 1;                  ///< UFFD_USER_MODE_ONLY (5.11)
inline constexpr std::uint64_t kUffdFeatureWpUnpopulated = 1u << 13;  ///< 6.4
inline constexpr std::uint64_t kUffdFeatureWpAsync = 1u << 15;        ///< 6.7

// ---- PAGEMAP_SCAN (include/uapi/linux/fs.h) -----------------------------------------------------
inline constexpr std::uint64_t kPageIsWpAllowed = 1u << 0;
inline constexpr std::uint64_t kPageIsWritten = 1u << 1;
inline constexpr std::uint64_t kPageIsPresent = 1u << 3;
inline constexpr std::uint64_t kPageIsSoftDirty = 1u << 7;

inline constexpr std::uint64_t kPmScanWpMatching = 1u << 0;     ///< write-protect the pages matched
inline constexpr std::uint64_t kPmScanCheckWpAsync = 1u << 1;   ///< fail if a page is not WP_ASYNC-registered

/// struct page_region: [start, end) and the PAGE_IS_* categories of the run.
struct PageRegion {
  std::uint64_t start;
  std::uint64_t end;
  std::uint64_t categories;
};

/// struct pm_scan_arg.
struct PmScanArg {
  std::uint64_t size;
  std::uint64_t flags;
  std::uint64_t start;
  std::uint64_t end;
  std::uint64_t walk_end;  ///< written by the kernel: where the walk stopped
  std::uint64_t vec;
  std::uint64_t vec_len;
  std::uint64_t max_pages;
  std::uint64_t category_inverted;
  std::uint64_t category_mask;
  std::uint64_t category_anyof_mask;
  std::uint64_t return_mask;
};
static_assert(sizeof(PmScanArg) == 96, "pm_scan_arg is 12 u64 in the kernel ABI");

inline constexpr unsigned long kPagemapScan = _IOWR('f', 16, PmScanArg);

// ---- /proc/<pid>/pagemap entries (Documentation/admin-guide/mm/pagemap.rst) ----------------------
inline constexpr std::uint64_t kPagemapSoftDirty = 1ull << 55;
inline constexpr std::uint64_t kPagemapPresent = 1ull << 63;

}  // namespace tierpack::detail::uapi

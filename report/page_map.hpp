// The report's page map: which pages (or, when there are too many, runs of pages) held tensors of
// which lifetime classes during the iteration, with the profile's false-shared and hidden-access
// pages marked; and, when a plan is given, its page groups by class. Bounded in size whatever the
// profile (ReportOptions::page_map_cells).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/plan.hpp"
#include "core/profile.hpp"
#include "core/tensor_class.hpp"

namespace tierpack::report {

/// Bits of a page-map cell (a cell holds pages_per_cell pages; bits are OR-ed over them).
enum PageCellBits : std::uint32_t {
  kCellClassMask = 0xf,        ///< bit (1 << TensorClass) per class with bytes on the page
  kCellFalseShared = 1u << 4,  ///< the profile marks a page of the cell false-shared
  kCellHidden = 1u << 5,       ///< the profile saw hidden accesses on a page of the cell
};

struct DevicePageMap {
  int device = -1;
  std::string name;
  std::uint64_t page_size = 4096;
  std::uint64_t pages = 0;             ///< distinct pages that held tensor bytes
  std::uint64_t pages_per_cell = 1;
  std::vector<std::uint8_t> cells;     ///< PageCellBits per cell, in address order (gaps elided)
  std::uint64_t address_gaps = 0;      ///< jumps between used address ranges that were elided
  std::array<std::uint64_t, kTensorClassCount> single_class_pages{};  ///< pages with one class only
  std::uint64_t mixed_pages = 0;       ///< pages that held tensors of more than one class (over the iteration)
  std::uint64_t false_shared_pages = 0;  ///< from the profile's page records
  std::uint64_t hidden_pages = 0;
  std::uint64_t tensors_without_address = 0;
};

struct GroupCell {
  std::uint64_t bytes = 0;
  TensorClass cls = TensorClass::temporary;
  bool pinned = false;
  std::uint32_t groups = 1;  ///< >1 when neighbouring groups share a cell (too many to draw one each)
  bool mixed = false;        ///< the groups sharing the cell are of more than one class
};

struct GroupMap {
  std::uint64_t groups = 0;
  std::array<std::uint64_t, kTensorClassCount> groups_by_class{};
  std::array<std::uint64_t, kTensorClassCount> bytes_by_class{};
  std::uint64_t pinned = 0;
  std::vector<GroupCell> cells;  ///< in offset order
};

/// Page maps of every device whose tensors carry addresses. `classes` is indexed by TensorId.
std::vector<DevicePageMap> build_page_maps(const Profile& profile, const std::vector<TensorClass>& classes,
                                           std::size_t max_cells);
GroupMap build_group_map(const Plan& plan, std::size_t max_cells);

}  // namespace tierpack::report

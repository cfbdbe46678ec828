// Profile: everything the profiler learned about one training iteration. The value that flows from
// profiler/ to placer/ and to the report. File format: docs/formats.md ("Profile files").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/tensor_record.hpp"
#include "core/topology.hpp"

namespace tierpack {

struct ProfileMeta {
  std::string tool_version;     ///< tierpack version that wrote it
  std::string command;          ///< profiled command line
  std::string framework;        ///< "torch 2.11.0", "libtorch 1.13.0", "synthetic"
  std::string page_tracer;      ///< "mprotect", "uffd-wp", "pagemap-scan", "none"
  std::uint64_t host_page_size = 4096;
  std::int64_t created_unix = 0;
  std::int32_t iterations_observed = 0;
  std::int32_t profiled_iteration = -1;  ///< which observed iteration the records describe
  std::string iteration_source;  ///< "optimizer-step", "explicit", "periodicity", "whole-run"
  std::int32_t rank = -1;        ///< rank in a distributed job (-1: not part of one)
  std::int32_t world_size = 0;   ///< ranks in that job (0: not part of one)

  friend bool operator==(const ProfileMeta&, const ProfileMeta&) = default;
};

/// One observed iteration: its allocation sequence signature, used to detect divergence.
struct IterationInfo {
  std::int32_t index = 0;
  std::uint64_t duration_ns = 0;
  std::uint32_t allocations = 0;
  std::uint64_t signature = 0;  ///< hash of the allocation sizes, per device, over the allocation sequence
  bool matches_profiled = true;

  friend bool operator==(const IterationInfo&, const IterationInfo&) = default;
};

/// Where a later iteration stopped matching the profiled one (dynamic shapes, data-dependent paths).
struct Divergence {
  std::int32_t iteration = 0;
  std::int64_t seq = -1;     ///< first allocation position that differed
  std::string reason;        ///< "size 4096 != 8192 at seq 17 (aten::empty)"

  friend bool operator==(const Divergence&, const Divergence&) = default;
};

struct Profile {
  static constexpr int kFormatVersion = 1;

  ProfileMeta meta;
  Topology topology;
  std::vector<OpRecord> ops;            ///< ops of the profiled iteration, in order
  std::vector<TensorRecord> tensors;    ///< tensors alive at some point in it
  std::vector<PageRecord> pages;        ///< notable pages (shared, hidden accesses)
  std::vector<IterationInfo> iterations;
  std::vector<Divergence> divergences;
  std::uint64_t iteration_ns = 0;       ///< duration of the profiled iteration

  /// Peak of live tensor bytes on a device (-1 host) over the op timeline.
  std::uint64_t peak_bytes(int device) const;
  /// Checks internal consistency (ids, op indices in range, uses sorted); throws format_error.
  void validate() const;

  friend bool operator==(const Profile&, const Profile&) = default;
};

void to_json(nlohmann::json& j, const Profile& p);
void from_json(const nlohmann::json& j, Profile& p);

/// Writes a profile file (header line + JSON payload + CRC; docs/formats.md). Throws os_error.
void write_profile(const Profile& p, const std::string& path);
/// Reads and validates a profile file. Unknown/newer version, truncation and corruption are
/// format_error with a one-line message naming the file.
Profile read_profile(const std::string& path);
/// read_profile on a file's bytes already in memory; `name` starts error messages. Throws format_error.
Profile parse_profile(std::string_view bytes, std::string_view name);

}  // namespace tierpack

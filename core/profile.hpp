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
  std::string id;               ///< the profile's identity (Note [Profile identity]); "" unknown
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
  /// 2: `sources` and the tensors' `source` (version 1 files read with every source unknown).
  /// 3: a source's `module` (version 1 and 2 files read with every module unknown).
  static constexpr int kFormatVersion = 3;

  ProfileMeta meta;
  Topology topology;
  std::vector<OpRecord> ops;            ///< ops of the profiled iteration, in order
  std::vector<TensorRecord> tensors;    ///< tensors alive at some point in it
  std::vector<SourceLocation> sources;  ///< where tensors were allocated (TensorRecord::source indexes it)
  std::vector<PageRecord> pages;        ///< notable pages (shared, hidden accesses)
  std::vector<IterationInfo> iterations;
  std::vector<Divergence> divergences;
  std::uint64_t iteration_ns = 0;       ///< duration of the profiled iteration

  /// Where `t` was allocated, or nullptr when unknown.
  const SourceLocation* source_of(const TensorRecord& t) const {
    return t.source >= 0 && static_cast<std::size_t>(t.source) < sources.size()
               ? &sources[static_cast<std::size_t>(t.source)] : nullptr;
  }
  /// source_of(t)->short_text() ("model.py:63 forward"), "" when unknown.
  std::string source_text(const TensorRecord& t) const;
  /// The module `t` was allocated in (Note [Module paths] in integrations/torch/python_source.cpp):
  /// its source's module path; "(backward)" when it has none and its allocating op ran in backward
  /// (torch names no module there); "" otherwise (no module running, or not known).
  std::string module_text(const TensorRecord& t) const;
  /// Peak of live tensor bytes on a device (-1 host) over the op timeline.
  std::uint64_t peak_bytes(int device) const;
  /// Checks internal consistency (ids, op indices in range, uses sorted); throws format_error.
  void validate() const;

  friend bool operator==(const Profile&, const Profile&) = default;
};

void to_json(nlohmann::json& j, const Profile& p);
void from_json(const nlohmann::json& j, Profile& p);

// Note [Profile identity]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A profile carries an identity (meta.id, 16 hex digits): the profiler draws it at random when it first
// takes a snapshot of a recording and keeps it for every later snapshot of that recording, so the profile
// `tierpack run -o` writes at exit has the identity of the snapshot it planned from. Everything made from a
// profile carries its identity: a plan (`profile_id`, copied by the planner) and a run's statistics
// (`profile_id`, the applied plan's). `report`, `replay` (and the run, through its plan) compare it with the
// profile they are given and refuse another profile's file (check_profile_identity). A file written before
// identities existed (a profile without meta.id, a plan or statistics without profile_id, and so a plan
// made now from such a profile) has "identity unknown": it is read, with a warning that says so, and only
// the older checks apply (replay's structural check, the report's allocation-signature warning).

/// A fresh random identity (16 hex digits).
std::string new_profile_id();
/// Checks that a file made from a profile (`what`: "plan", "run statistics"; `file` names it) belongs to
/// `profile` (read from `profile_file`): throws logic_error naming both identities when `made_from` is
/// another profile's; returns a warning when either identity is unknown ("" when they match).
std::string check_profile_identity(const Profile& profile, std::string_view profile_file, std::string_view made_from,
                                   std::string_view what, std::string_view file);

/// Writes a profile file (header line + JSON payload + CRC; docs/formats.md). Throws os_error.
void write_profile(const Profile& p, const std::string& path);
/// Reads and validates a profile file. Unknown/newer version, truncation and corruption are
/// format_error with a one-line message naming the file.
Profile read_profile(const std::string& path);
/// read_profile on a file's bytes already in memory; `name` starts error messages. Throws format_error.
Profile parse_profile(std::string_view bytes, std::string_view name);

}  // namespace tierpack

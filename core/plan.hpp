// Plan: where each tensor goes (class, page group, offset) and when each page group moves between
// tiers, with the predicted cost. A plain declarative value (like a DAMON scheme): the placer makes
// it from a Profile, alloc/ and migrate/ execute it, the report and the simulator read it.
// File format: docs/formats.md ("Plan files").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/page_group.hpp"
#include "core/topology.hpp"

namespace tierpack {

/// Where one tensor of the iteration is placed. Tensors allocated inside the iteration are found
/// again by their allocation sequence position on their device (`seq`); tensors that outlive
/// iterations (seq -1: parameters, optimizer state) keep their address, so they are found by it.
struct TensorPlacement {
  TensorId tensor = 0;
  std::int64_t seq = -1;
  std::uint64_t address = 0;  ///< profiled address (used for seq -1 tensors)
  std::uint64_t bytes = 0;
  TensorClass cls = TensorClass::temporary;
  GroupId group = 0;
  std::uint64_t offset_in_group = 0;

  friend bool operator==(const TensorPlacement&, const TensorPlacement&) = default;
};

enum class MoveKind : std::uint8_t { evict, prefetch };
std::string_view to_string(MoveKind k);
/// "evict" or "prefetch"; throws format_error naming the accepted kinds otherwise.
MoveKind parse_move_kind(std::string_view text);

/// One scheduled migration of a page group.
struct Move {
  GroupId group = 0;
  MoveKind kind = MoveKind::evict;
  TierId from = kNoTier;
  TierId to = kNoTier;
  std::uint64_t bytes = 0;
  OpIndex issue_after = kBeforeIteration;  ///< issue once this op has ended (-1: at iteration start)
  OpIndex needed_by = kAfterIteration;     ///< must have arrived before this op begins (prefetches)
  double predicted_start_ns = 0;
  double predicted_end_ns = 0;

  friend bool operator==(const Move&, const Move&) = default;
};

struct PlanPrediction {
  std::uint64_t fast_peak_bytes = 0;     ///< highest fast-tier occupancy over the timeline
  std::uint64_t natural_peak_bytes = 0;  ///< peak with no budget (everything resident)
  std::uint64_t bytes_to_fast = 0;       ///< per iteration, slow -> fast
  std::uint64_t bytes_to_slow = 0;       ///< per iteration, fast -> slow
  double stall_ns = 0;
  double step_ns = 0;                    ///< predicted iteration time with the plan
  double baseline_step_ns = 0;           ///< profiled iteration time (no tierpack)

  friend bool operator==(const PlanPrediction&, const PlanPrediction&) = default;
};

struct Plan {
  static constexpr int kFormatVersion = 1;

  std::string policy = "page-aware";      ///< which packing/assignment policy produced it
  std::string profile_command;            ///< from the profile, for humans
  std::uint64_t profile_signature = 0;    ///< allocation-sequence signature the plan was made for
  std::string profile_id;                 ///< identity of the profile it was made from ("" unknown;
                                          ///< Note [Profile identity] in core/profile.hpp)
  int device = -1;                        ///< device whose tensors it places (-1 host)
  TierId fast_tier = kNoTier;
  TierId slow_tier = kNoTier;
  std::uint64_t fast_budget_bytes = 0;
  Topology topology;
  std::vector<PageGroup> groups;
  std::vector<TensorPlacement> placements;  ///< sorted by seq
  std::vector<Move> schedule;               ///< sorted by issue_after
  PlanPrediction prediction;
  std::vector<std::string> notes;           ///< warnings and decisions worth telling the user

  /// True when nothing ever moves (the run fits its budget).
  bool empty() const { return schedule.empty(); }
  /// Checks internal consistency (group ids, tiers, tensor ids); throws format_error.
  void validate() const;

  friend bool operator==(const Plan&, const Plan&) = default;
};

void to_json(nlohmann::json& j, const Plan& p);
void from_json(const nlohmann::json& j, Plan& p);

void write_plan(const Plan& p, const std::string& path);
/// Reads and validates a plan file; version mismatch or corruption is a format_error naming the file.
Plan read_plan(const std::string& path);
/// read_plan on a file's text already in memory; `name` starts error messages. Throws format_error.
Plan parse_plan(std::string_view text, std::string_view name);

}  // namespace tierpack

// What the GPU tier's plan does with each saved storage (keep, offload, recompute, or run its block again),
// with its recipe and what the run measured: one value that `tierpack gpu-replay --storages` and `tierpack
// report` both show (docs/run.md, "Reading the choices").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/saved_trace.hpp"

namespace tierpack {

struct SavedChoice {
  enum class Kind { keep, offload, recompute, block };
  std::int32_t storage = 0;
  std::uint64_t bytes = 0;
  bool movable = true;
  bool held_in_forward = false;  ///< autocast holds it until forward ends
  std::int32_t held_until = -1;  ///< >= 0: the program held it until this call (Note [Held storages])
  bool optimizer_state = false;  ///< the optimizer's state (SavedStorage::optimizer_state)
  Kind kind = Kind::keep;
  std::int32_t released_at = -1;  ///< the call where it is let go (not kept)
  std::int32_t back_at = -1;      ///< where its copy back starts (offload) or where it is made again
  double recompute_ms = -1;       ///< its own recipe's estimate (< 0: none)
  std::vector<std::int32_t> recompute_from;
  std::int32_t group = -1;        ///< its module call (recompute_group)
  std::int32_t block = -1;        ///< its block (SavedStorage::block)
  double block_ms = -1;           ///< one run of that block
  std::optional<SavedRecord::Measured> measured;  ///< the run's measurement of its remaking
};

/// Every storage of `rec`'s trace, in storage order, under `plan` (the run's own, or one planned again).
std::vector<SavedChoice> saved_choices(const SavedRecord& rec, const SavedPlan& plan);

/// "keep", "offload", "recompute", "recompute-block" (the JSON names).
const char* choice_name(SavedChoice::Kind kind);
/// "offload: out at 12, back from 40", "offload: out at 12, the optimizer step fetches it" (a streamed step's: Note
/// [Streamed step]), "block run again: let go at 30, made at 77", "keep (never moves)".
std::string choice_text(const SavedChoice& c);
/// Its recipe and measurement in words ("0.050 ms from 3,4 (call 2); block 1 (2.100 ms a run); the run took
/// ..."), or "-".
std::string recipe_text(const SavedChoice& c);

}  // namespace tierpack

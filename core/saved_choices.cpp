// Each saved storage's choice under a GPU plan (see saved_choices.hpp).
#include "core/saved_choices.hpp"

#include "core/error.hpp"
#include "core/units.hpp"

namespace tierpack {

std::vector<SavedChoice> saved_choices(const SavedRecord& rec, const SavedPlan& plan) {
  const SavedTrace& t = rec.trace;
  std::vector<SavedChoice> out(t.storages.size());
  for (std::size_t s = 0; s < t.storages.size(); ++s) {
    const SavedStorage& st = t.storages[s];
    SavedChoice& c = out[s];
    c.storage = static_cast<std::int32_t>(s);
    c.bytes = st.bytes;
    c.movable = st.movable;
    c.held_in_forward = st.held_in_forward;
    c.held_until = st.held_until;
    c.optimizer_state = st.optimizer_state;
    c.recompute_ms = st.recompute_ms;
    c.recompute_from = st.recompute_from;
    c.group = st.recompute_group;
    c.block = st.block;
    if (st.block >= 0 && static_cast<std::size_t>(st.block) < t.blocks.size())
      c.block_ms = t.blocks[static_cast<std::size_t>(st.block)].ms;
  }
  for (const SavedMove& m : plan.moves) {
    if (m.storage < 0 || static_cast<std::size_t>(m.storage) >= out.size())
      throw format_error("GPU plan: a move names storage " + std::to_string(m.storage) + " of " +
                         std::to_string(out.size()));
    SavedChoice& c = out[static_cast<std::size_t>(m.storage)];
    c.kind = !m.recompute ? SavedChoice::Kind::offload : m.by_block ? SavedChoice::Kind::block : SavedChoice::Kind::recompute;
    c.released_at = m.release_at;
    c.back_at = m.fetch_at;
  }
  for (const SavedRecord::Measured& m : rec.measured)
    if (m.storage >= 0 && static_cast<std::size_t>(m.storage) < out.size()) out[static_cast<std::size_t>(m.storage)].measured = m;
  return out;
}

const char* choice_name(SavedChoice::Kind kind) {
  switch (kind) {
    case SavedChoice::Kind::keep: return "keep";
    case SavedChoice::Kind::offload: return "offload";
    case SavedChoice::Kind::recompute: return "recompute";
    case SavedChoice::Kind::block: return "recompute-block";
  }
  return "keep";
}

std::string choice_text(const SavedChoice& c) {
  switch (c.kind) {
    case SavedChoice::Kind::keep: return c.movable ? "keep" : "keep (never moves)";
    case SavedChoice::Kind::offload:
      if (c.back_at < 0)  // (a streamed step's state: Note [Streamed step] in placer/saved_plan.cpp)
        return printf_string(c.optimizer_state ? "offload: out at %d, the optimizer step fetches it"
                                               : "offload: out at %d, not back in the iteration",
                             c.released_at);
      return printf_string("offload: out at %d, back from %d", c.released_at, c.back_at);
    case SavedChoice::Kind::recompute: return printf_string("recompute: let go at %d, made at %d", c.released_at, c.back_at);
    case SavedChoice::Kind::block:
      return printf_string("block run again: let go at %d, made at %d", c.released_at, c.back_at);
  }
  return "keep";
}

std::string recipe_text(const SavedChoice& c) {
  std::string recipe;
  if (c.recompute_ms >= 0) {
    recipe = printf_string("%.3f ms from", c.recompute_ms);
    for (std::size_t k = 0; k < c.recompute_from.size(); ++k) recipe += (k ? "," : " ") + std::to_string(c.recompute_from[k]);
  }
  if (c.group >= 0) recipe += printf_string(" (call %d)", c.group);
  if (c.block >= 0) recipe += printf_string("%sblock %d (%.3f ms a run)", recipe.empty() ? "" : "; ", c.block, c.block_ms);
  if (recipe.empty()) recipe = "-";
  if (c.measured)
    recipe += printf_string("; the run took %.3f ms (predicted %.3f)", c.measured->measured_ms, c.measured->predicted_ms);
  if (c.held_in_forward) recipe += " (autocast holds it in forward)";
  if (c.held_until >= 0) recipe += printf_string(" (the program holds it until call %d)", c.held_until);
  return recipe;
}

}  // namespace tierpack

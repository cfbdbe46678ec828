// The tier-model presets built into tierpack: the JSON files of core/presets/, embedded at build time
// (core/presets/tier_presets.cpp.in). Private to core/; use core/tier_spec.hpp.
#pragma once

#include <span>
#include <string_view>

namespace tierpack::detail {

struct TierPresetText {
  std::string_view name;  ///< file name without .json
  std::string_view json;  ///< the file's content
};

std::span<const TierPresetText> builtin_tier_presets();

}  // namespace tierpack::detail

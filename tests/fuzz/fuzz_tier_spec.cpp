// libFuzzer target: the tier-spec parser (`--tiers dram:16G+cxl:64G@+80ns/36GB/s`) and the JSON tier
// model reader. Whatever they accept is then checked by validate_tier_model, which may reject it,
// but only with a tierpack error.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/tier_spec.hpp"
#include "tests/fuzz/fuzz_guard.hpp"

using namespace tierpack;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  TierModel m;
  if (fuzz::accepts([&] { m = parse_tier_spec(input); })) fuzz::accepts([&] { validate_tier_model(m); });
  if (fuzz::accepts([&] { m = tier_model_from_json_text(input, "fuzz.json"); })) fuzz::accepts([&] { validate_tier_model(m); });
  return 0;
}

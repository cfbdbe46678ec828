// libFuzzer target: the plan reader (parse_plan = read_plan on text). An accepted plan must survive
// a write/read round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/plan.hpp"
#include "tests/fuzz/fuzz_guard.hpp"

using namespace tierpack;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  Plan p;
  if (!fuzz::accepts([&] { p = parse_plan(input, "fuzz.json"); })) return 0;
  Plan again;
  if (!fuzz::accepts([&] { again = parse_plan(nlohmann::json(p).dump(1), "roundtrip.json"); }))
    fuzz::bug("an accepted plan is rejected after writing it back");
  if (!(again == p)) fuzz::bug("an accepted plan changes when written back and read again");
  return 0;
}

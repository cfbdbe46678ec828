// libFuzzer target: the profile reader (parse_profile = read_profile on bytes). Input that does not
// start like a profile file is also wrapped in a valid envelope (right length and CRC) so the fuzzer
// gets past the checksum into the JSON and validation code. An accepted profile must survive a
// write/read round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "core/file_envelope.hpp"
#include "core/profile.hpp"
#include "tests/fuzz/fuzz_guard.hpp"

using namespace tierpack;

namespace {

std::string with_envelope(std::string_view payload) {
  char header[128];
  std::snprintf(header, sizeof header, "tierpack-profile %d %zu %08x\n", Profile::kFormatVersion, payload.size(), crc32(payload));
  return std::string(header) + std::string(payload);
}

void check(const std::string& file) {
  Profile p;
  if (!fuzz::accepts([&] { p = parse_profile(file, "fuzz.tpk"); })) return;
  Profile again;
  if (!fuzz::accepts([&] { again = parse_profile(with_envelope(nlohmann::json(p).dump()), "roundtrip.tpk"); }))
    fuzz::bug("an accepted profile is rejected after writing it back");
  if (!(again == p)) fuzz::bug("an accepted profile changes when written back and read again");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  check(input);
  if (input.rfind("tierpack-profile ", 0) != 0) check(with_envelope(input));
  return 0;
}

// libFuzzer target: the TIERPACK_CONF parser. An accepted configuration must format and parse back
// to the same configuration.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/config.hpp"
#include "tests/fuzz/fuzz_guard.hpp"

using namespace tierpack;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  Config c;
  if (!fuzz::accepts([&] { c = parse_config(input); })) return 0;
  const std::string text = format_config(c);
  Config again;
  if (!fuzz::accepts([&] { again = parse_config(text); })) fuzz::bug("format_config output is rejected", text);
  if (format_config(again) != text) fuzz::bug("config changes when formatted and parsed again", text);
  return 0;
}

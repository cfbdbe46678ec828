// tierpack-synth: writes a synthetic training-iteration profile (.tpk) for tests, benchmarks and
// what-if experiments. A developer tool, built with the tests (build/bin/tierpack-synth); not installed.
//   tierpack-synth -o x.tpk [--tensors N] [--seed S] [--host] [--hidden FRACTION]
//                  [--activation-bytes SIZE] [--param-bytes SIZE] [--small-max SIZE]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "core/units.hpp"
#include "tests/support/synthetic_profile.hpp"

namespace {
int usage(const char* msg) {
  std::fprintf(stderr, "tierpack-synth: %s\nusage: tierpack-synth -o x.tpk [--tensors N] [--seed S] [--host] "
               "[--hidden FRACTION] [--activation-bytes SIZE] [--param-bytes SIZE] [--small-max SIZE]\n"
               "       [--bytes-per-ns X] [--matmul-work X]\n", msg);
  return 2;
}

unsigned long long to_number(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0') throw std::invalid_argument(flag + " needs a number, got '" + v + "'");
  return n;
}
}  // namespace

int main(int argc, char** argv) {
  tierpack::synth::SyntheticOptions o;
  std::string out;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
        return argv[++i];
      };
      if (a == "-o") out = value();
      else if (a == "--tensors") o.tensors = static_cast<std::uint32_t>(to_number(a, value()));
      else if (a == "--seed") o.seed = to_number(a, value());
      else if (a == "--host") o.device = -1;
      else if (a == "--hidden") o.hidden_access_fraction = std::stod(value());
      else if (a == "--activation-bytes") o.activation_bytes = tierpack::parse_bytes(value());
      else if (a == "--param-bytes") o.param_bytes = tierpack::parse_bytes(value());
      else if (a == "--small-max") o.small_max_bytes = tierpack::parse_bytes(value());
      else if (a == "--bytes-per-ns") o.bytes_per_ns = std::stod(value());  // op speed (calibrating a step time)
      else if (a == "--matmul-work") o.matmul_work = std::stod(value());
      else if (a == "-h" || a == "--help") return usage("writes a synthetic profile"), 0;
      else return usage(("unknown argument '" + a + "'").c_str());
    }
    if (out.empty()) return usage("missing -o FILE");
    if (o.tensors == 0) return usage("--tensors must be positive");
    tierpack::synth::write_synthetic_profile(o, out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tierpack-synth: %s\n", e.what());
    return 1;
  }
  return 0;
}

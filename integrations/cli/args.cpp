// Strict argument parsing for the CLI (see args.hpp).
#include "integrations/cli/args.hpp"

namespace tierpack::cli {

std::optional<std::string> Args::get(const std::string& flag) const {
  auto it = values.find(flag);
  if (it == values.end()) return std::nullopt;
  return it->second;
}

std::string Args::get_or(const std::string& flag, const std::string& fallback) const {
  return get(flag).value_or(fallback);
}

Args parse_args(const std::vector<std::string>& argv, const ArgSpec& spec) {
  Args a;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg == "--") {
      if (!spec.allow_child) throw usage_error("unexpected '--': this command runs no child command");
      a.child.assign(argv.begin() + static_cast<long>(i) + 1, argv.end());
      if (a.child.empty()) throw usage_error("missing command after '--'");
      break;
    }
    if (arg.size() > 1 && arg[0] == '-') {
      std::string flag = arg, value;
      bool has_value = false;
      if (auto eq = arg.find('='); eq != std::string::npos) {
        flag = arg.substr(0, eq);
        value = arg.substr(eq + 1);
        has_value = true;
      }
      if (spec.switches.count(flag)) {
        if (has_value) throw usage_error("flag " + flag + " takes no value");
        a.switches.insert(flag);
      } else if (spec.valued.count(flag)) {
        if (!has_value) {
          if (i + 1 >= argv.size()) throw usage_error("flag " + flag + " needs a value");
          value = argv[++i];
        }
        if (value.empty()) throw usage_error("flag " + flag + " needs a non-empty value");
        a.values[flag] = value;
      } else {
        throw usage_error("unknown flag '" + flag + "' (try --help)");
      }
      continue;
    }
    a.positional.push_back(arg);
  }
  if (a.positional.size() < spec.min_positional)
    throw usage_error(spec.min_positional == 1 ? "missing argument (try --help)" : "missing arguments (try --help)");
  if (a.positional.size() > spec.max_positional)
    throw usage_error("unexpected argument '" + a.positional[spec.max_positional] + "' (try --help)");
  return a;
}

int count_flag(const Args& args, const std::string& flag, int fallback, int min) {
  const auto v = args.get(flag);
  if (!v) return fallback;
  try {
    std::size_t used = 0;
    const int n = std::stoi(*v, &used);
    if (used != v->size() || n < min) throw std::invalid_argument("range");
    return n;
  } catch (const std::exception&) {
    throw usage_error("flag " + flag + " needs an integer >= " + std::to_string(min) + ", not '" + *v + "'");
  }
}

}  // namespace tierpack::cli

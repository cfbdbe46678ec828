// A small, strict command-line parser for the tierpack subcommands: "--flag value", "--flag=value",
// boolean switches, positionals and "--" followed by a child command. Anything unexpected is a
// usage_error with a one-line message; main() prints it and exits with status 2.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace tierpack::cli {

/// Wrong flags or arguments: printed as "tierpack <cmd>: <message>" with exit status 2.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ArgSpec {
  std::set<std::string> valued;    ///< flags that take a value ("--gpu-budget")
  std::set<std::string> switches;  ///< flags without a value ("--json")
  std::size_t min_positional = 0;
  std::size_t max_positional = 0;
  bool allow_child = false;        ///< accepts "-- command ..."
};

struct Args {
  std::map<std::string, std::string> values;
  std::set<std::string> switches;
  std::vector<std::string> positional;
  std::vector<std::string> child;

  bool has(const std::string& flag) const { return values.count(flag) || switches.count(flag); }
  std::optional<std::string> get(const std::string& flag) const;
  std::string get_or(const std::string& flag, const std::string& fallback) const;
};

/// Parses argv (after the subcommand name) against spec; throws usage_error.
Args parse_args(const std::vector<std::string>& argv, const ArgSpec& spec);

/// The integer value of `flag` (`fallback` when absent); usage_error unless it is an integer >= min.
int count_flag(const Args& args, const std::string& flag, int fallback, int min);

}  // namespace tierpack::cli

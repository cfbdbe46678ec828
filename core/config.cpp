// TIERPACK_CONF parser (see config.hpp).
#include "core/config.hpp"

#include <charconv>
#include <cstdlib>

#include "core/error.hpp"
#include "core/process_rank.hpp"

namespace tierpack {
namespace {

[[noreturn]] void bad_value(std::string_view key, std::string_view value, std::string_view accepted) {
  throw logic_error("TIERPACK_CONF: invalid value " + quote_input(value) + " for key " + quote_input(key) +
                    " (accepted: " + std::string(accepted) + ")");
}

int parse_int(std::string_view key, std::string_view value, int min) {
  int v = 0;
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc{} || p != value.data() + value.size() || v < min)
    bad_value(key, value, "an integer >= " + std::to_string(min));
  return v;
}

Budget parse_budget_value(std::string_view key, std::string_view value) {
  try {
    return parse_budget(value);
  } catch (const logic_error& e) {
    throw logic_error("TIERPACK_CONF: key '" + std::string(key) + "': " + e.what());
  }
}

template <class E, std::size_t N>
E parse_enum(std::string_view key, std::string_view value, const std::pair<std::string_view, E> (&table)[N]) {
  std::string accepted;
  for (const auto& [name, e] : table) {
    if (name == value) return e;
    if (!accepted.empty()) accepted += ", ";
    accepted += name;
  }
  bad_value(key, value, accepted);
}

constexpr std::pair<std::string_view, RunMode> kModes[] = {
    {"off", RunMode::off}, {"profile", RunMode::profile}, {"run", RunMode::run}};
constexpr std::pair<std::string_view, PageTracerKind> kTracers[] = {{"auto", PageTracerKind::automatic},
                                                                   {"mprotect", PageTracerKind::mprotect},
                                                                   {"uffd", PageTracerKind::uffd},
                                                                   {"off", PageTracerKind::off}};
constexpr std::pair<std::string_view, LogLevel> kLogs[] = {
    {"quiet", LogLevel::quiet}, {"info", LogLevel::info}, {"debug", LogLevel::debug}};

template <class E, std::size_t N>
std::string_view name_of(E e, const std::pair<std::string_view, E> (&table)[N]) {
  for (const auto& [name, v] : table)
    if (v == e) return name;
  return "?";
}

}  // namespace

const std::vector<std::string_view>& Config::keys() {
  static const std::vector<std::string_view> k = {
      "mode",       "gpu_budget",        "fast_budget",        "tiers",          "profile_out", "plan",
      "stats_out",  "warmup_iterations", "profile_iterations", "max_iterations", "page_tracer", "page_window_depth", "log", "python_source"};
  return k;
}

Config parse_config(std::string_view text) {
  Config c;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find(',', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos) throw logic_error("TIERPACK_CONF: " + quote_input(item) + " is not key:value");
    const std::string_view key = item.substr(0, colon);
    const std::string_view value = item.substr(colon + 1);
    if (key == "mode") c.mode = parse_enum(key, value, kModes);
    else if (key == "gpu_budget") c.gpu_budget = parse_budget_value(key, value);
    else if (key == "fast_budget") c.fast_budget = parse_budget_value(key, value);
    else if (key == "tiers") c.tiers = std::string(value);
    else if (key == "profile_out") c.profile_out = std::string(value);
    else if (key == "plan") c.plan_in = std::string(value);
    else if (key == "stats_out") c.stats_out = std::string(value);
    else if (key == "warmup_iterations") c.warmup_iterations = parse_int(key, value, 0);
    else if (key == "profile_iterations") c.profile_iterations = parse_int(key, value, 1);
    else if (key == "max_iterations") c.max_iterations = parse_int(key, value, 0);
    else if (key == "page_tracer") c.page_tracer = parse_enum(key, value, kTracers);
    else if (key == "page_window_depth") c.page_window_depth = parse_int(key, value, 1);
    else if (key == "log") c.log = parse_enum(key, value, kLogs);
    else if (key == "python_source") {
      if (value != "on" && value != "off")
        throw logic_error("TIERPACK_CONF: python_source must be on or off, not " + quote_input(value));
      c.python_source = value == "on";
    } else {
      std::string accepted;
      for (auto k : Config::keys()) accepted += (accepted.empty() ? "" : ", ") + std::string(k);
      throw logic_error("TIERPACK_CONF: unknown key " + quote_input(key) + " (accepted keys: " + accepted + ")");
    }
    if ((key == "tiers" || key == "profile_out" || key == "plan" || key == "stats_out") && value.empty())
      bad_value(key, value, "a non-empty value");
  }
  return c;
}

Config config_from_env() {
  const char* env = std::getenv("TIERPACK_CONF");
  return config_for_process(env ? std::string_view(env) : std::string_view());
}

Config config_for_process(std::string_view text) {
  Config c = parse_config(text);
  const int rank = [] {
    const auto r = process_rank_from_env();
    return r ? r->rank : 0;
  }();
  for (std::string* path : {&c.profile_out, &c.plan_in, &c.stats_out}) *path = expand_rank_pattern(*path, rank);
  return c;
}

bool host_side_needed(const Config& c) {
  return c.mode != RunMode::run || c.fast_budget.is_set() || !c.plan_in.empty() || !c.tiers.empty() ||
         !c.profile_out.empty() || !c.gpu_budget.is_set();
}

std::string format_config(const Config& c) {
  const Config d;
  std::string out;
  auto add = [&](std::string_view k, const std::string& v) {
    if (!out.empty()) out += ',';
    out += std::string(k) + ":" + v;
  };
  auto budget = [](const Budget& b) {
    // With the unit: a bare number below one page is refused as a typo (Note [Budget typos]).
    return b.bytes ? std::to_string(*b.bytes) + "B" : b.fraction ? b.to_string() : std::string();
  };
  if (c.mode != d.mode) add("mode", std::string(name_of(c.mode, kModes)));
  if (c.gpu_budget.is_set()) add("gpu_budget", budget(c.gpu_budget));
  if (c.fast_budget.is_set()) add("fast_budget", budget(c.fast_budget));
  if (!c.tiers.empty()) add("tiers", c.tiers);
  if (!c.profile_out.empty()) add("profile_out", c.profile_out);
  if (!c.plan_in.empty()) add("plan", c.plan_in);
  if (!c.stats_out.empty()) add("stats_out", c.stats_out);
  if (c.warmup_iterations != d.warmup_iterations) add("warmup_iterations", std::to_string(c.warmup_iterations));
  if (c.profile_iterations != d.profile_iterations) add("profile_iterations", std::to_string(c.profile_iterations));
  if (c.max_iterations != d.max_iterations) add("max_iterations", std::to_string(c.max_iterations));
  if (c.page_tracer != d.page_tracer) add("page_tracer", std::string(name_of(c.page_tracer, kTracers)));
  if (c.page_window_depth != d.page_window_depth) add("page_window_depth", std::to_string(c.page_window_depth));
  if (c.log != d.log) add("log", std::string(name_of(c.log, kLogs)));
  if (c.python_source != d.python_source) add("python_source", c.python_source ? "on" : "off");
  return out;
}

}  // namespace tierpack

// The settings parser (see config.hpp): one table of keys, each read from its text, written back as text (for
// format_config and for comparing a key given both ways) and read by name as JSON (settings_json).
#include "core/config.hpp"

#include <charconv>
#include <climits>
#include <cstdlib>
#include <functional>
#include <map>

#include "core/error.hpp"
#include "core/process_rank.hpp"

namespace tierpack {
namespace {

using Json = nlohmann::json;

/// Where a value came from, for error messages: "TIERPACK_CONF" or "TIERPACK_GPU", and the key as written there.
struct Where {
  std::string_view source;
  std::string_view key;
};

[[noreturn]] void bad_value(Where w, std::string_view value, std::string_view accepted) {
  throw logic_error(std::string(w.source) + ": invalid value " + quote_input(value) + " for key " + quote_input(w.key) +
                    " (accepted: " + std::string(accepted) + ")");
}

/// One key: how its value is read into a Config, written back as text that reads the same, and shown as JSON.
struct Key {
  std::string_view name;
  std::function<void(Config&, Where, std::string_view)> read;
  std::function<std::string(const Config&)> text;
  std::function<Json(const Config&)> json;
};

template <class T>
std::string number_text(T v) {
  char buf[32];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc{} ? std::string(buf, p) : std::string();
}

template <class T>
bool read_number(std::string_view v, T& out) {
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  return ec == std::errc{} && p == v.data() + v.size();
}

template <class T, class F, std::size_t N>
Key choice(std::string_view name, F field, const std::pair<std::string_view, T> (&table)[N]) {
  auto word = [field, &table](const Config& c) {
    for (const auto& [w, v] : table)
      if (v == field(c)) return std::string(w);
    return std::string("?");
  };
  return {name,
          [field, &table](Config& c, Where w, std::string_view value) {
            std::string accepted;
            for (const auto& [t, v] : table) {
              if (t == value) {
                field(c) = v;
                return;
              }
              if (!accepted.empty()) accepted += ", ";
              accepted += t;
            }
            bad_value(w, value, accepted);
          },
          word, [word](const Config& c) { return Json(word(c)); }};
}

/// on/off; `loose` also takes 1/0 and true/false.
template <class F>
Key on_off(std::string_view name, F field, bool loose = false) {
  return {name,
          [field, loose](Config& c, Where w, std::string_view v) {
            if (v == "on" || (loose && (v == "1" || v == "true"))) field(c) = true;
            else if (v == "off" || (loose && (v == "0" || v == "false"))) field(c) = false;
            else bad_value(w, v, "on, off");
          },
          [field](const Config& c) { return std::string(field(c) ? "on" : "off"); },
          [field](const Config& c) { return Json(field(c)); }};
}

int count_of(int v) { return v; }
int count_of(std::chrono::milliseconds v) { return static_cast<int>(v.count()); }

/// An integer in [lo, hi]; `accepted` says so in the error (default: "an integer >= lo").
template <class F>
Key integer(std::string_view name, F field, int lo, int hi = INT_MAX, std::string_view accepted = {}) {
  const std::string says = accepted.empty() ? "an integer >= " + std::to_string(lo) : std::string(accepted);
  return {name,
          [field, lo, hi, says](Config& c, Where w, std::string_view v) {
            int n = 0;
            if (!read_number(v, n) || n < lo || n > hi) bad_value(w, v, says);
            field(c) = std::remove_reference_t<decltype(field(c))>(n);
          },
          [field](const Config& c) { return std::to_string(count_of(field(c))); },
          [field](const Config& c) { return Json(count_of(field(c))); }};
}

/// A size ("32M"): a multiple of `multiple` bytes, at least `least`.
template <class F>
Key size(std::string_view name, F field, std::uint64_t multiple, std::uint64_t least, std::string_view accepted) {
  return {name,
          [field, multiple, least, accepted](Config& c, Where w, std::string_view v) {
            std::uint64_t n = 0;
            try {
              n = parse_bytes(v);
            } catch (const logic_error&) {
              bad_value(w, v, accepted);
            }
            if (n < least || n % multiple != 0) bad_value(w, v, accepted);
            field(c) = n;
          },
          [field](const Config& c) { return std::to_string(field(c)) + "B"; },
          [field](const Config& c) { return Json(field(c)); }};
}

/// A number in (0, 1]; 0 in the Config means "the default" (JSON null).
template <class F>
Key fraction(std::string_view name, F field) {
  return {name,
          [field](Config& c, Where w, std::string_view v) {
            double h = 0;
            if (!read_number(v, h) || !(h > 0 && h <= 1)) bad_value(w, v, "a number in (0, 1]");
            field(c) = h;
          },
          [field](const Config& c) { return field(c) > 0 ? number_text(field(c)) : std::string(); },
          [field](const Config& c) { return field(c) > 0 ? Json(field(c)) : Json(nullptr); }};
}

template <class F>
Key budget(std::string_view name, F field) {
  return {name,
          [field](Config& c, Where w, std::string_view v) {
            try {
              field(c) = parse_budget(v);
            } catch (const logic_error& e) {
              throw logic_error(std::string(w.source) + ": key " + quote_input(w.key) + ": " + e.what());
            }
          },
          // With the unit: a bare number below one page is refused as a typo (Note [Budget typos]).
          [field](const Config& c) {
            const Budget& b = field(c);
            return b.bytes ? std::to_string(*b.bytes) + "B" : b.fraction ? b.to_string() : std::string();
          },
          [field](const Config& c) {
            const Budget& b = field(c);
            return b.bytes ? Json{{"bytes", *b.bytes}} : b.fraction ? Json{{"fraction", *b.fraction}} : Json(nullptr);
          }};
}

/// Text as given (a path, a tier spec); `required`: not empty.
template <class F>
Key text(std::string_view name, F field, bool required) {
  return {name,
          [field, required](Config& c, Where w, std::string_view v) {
            if (required && v.empty()) bad_value(w, v, "a non-empty value");
            field(c) = std::string(v);
          },
          [field](const Config& c) { return field(c); }, [field](const Config& c) { return Json(field(c)); }};
}

constexpr std::pair<std::string_view, RunMode> kModes[] = {
    {"off", RunMode::off}, {"profile", RunMode::profile}, {"run", RunMode::run}};
constexpr std::pair<std::string_view, PageTracerKind> kTracers[] = {{"auto", PageTracerKind::automatic},
                                                                   {"mprotect", PageTracerKind::mprotect},
                                                                   {"uffd", PageTracerKind::uffd},
                                                                   {"off", PageTracerKind::off}};
constexpr std::pair<std::string_view, LogLevel> kLogs[] = {
    {"quiet", LogLevel::quiet}, {"info", LogLevel::info}, {"debug", LogLevel::debug}};
constexpr std::pair<std::string_view, gpu::Mechanism> kMechanisms[] = {{"storage", gpu::Mechanism::storage},
                                                                      {"vmm", gpu::Mechanism::vmm}};
constexpr std::pair<std::string_view, gpu::Verify> kVerify[] = {{"sampled", gpu::Verify::sampled},
                                                               {"all", gpu::Verify::all},
                                                               {"evictions", gpu::Verify::evictions},
                                                               {"off", gpu::Verify::off}};
constexpr std::pair<std::string_view, gpu::RemapWhen> kRemap[] = {{"eager", gpu::RemapWhen::eager},
                                                                 {"idle", gpu::RemapWhen::idle}};
constexpr std::pair<std::string_view, bool> kLimit[] = {{"soft", false}, {"hard", true}};
constexpr std::pair<std::string_view, bool> kGc[] = {{"freeze", true}, {"as-is", false}};
constexpr std::pair<std::string_view, bool> kStep[] = {{"whole", false}, {"stream", true}};
constexpr std::pair<std::string_view, bool> kCompile[] = {{"blocks", true}, {"whole", false}};
constexpr std::pair<std::string_view, gpu::AutocastCache> kAutocastCache[] = {
    {"auto", gpu::AutocastCache::automatic}, {"on", gpu::AutocastCache::on}, {"off", gpu::AutocastCache::off}};
constexpr std::pair<std::string_view, bool> kCopies[] = {{"raw", true}, {"torch", false}};

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::string_view kGpuPrefix = "gpu_";

// The keys in the order docs/config.md lists them; gpu_* are also TIERPACK_GPU's keys, without the prefix.
const std::vector<Key>& all_keys() {
#define FIELD(member) [](auto& c) -> auto& { return c.member; }
  static const std::vector<Key> keys = {
      choice("mode", FIELD(mode), kModes),
      budget("gpu_budget", FIELD(gpu_budget)),
      budget("fast_budget", FIELD(fast_budget)),
      text("tiers", FIELD(tiers), true),
      text("profile_out", FIELD(profile_out), true),
      text("plan", FIELD(plan_in), true),
      text("stats_out", FIELD(stats_out), true),
      integer("warmup_iterations", FIELD(warmup_iterations), 0),
      integer("profile_iterations", FIELD(profile_iterations), 1),
      integer("max_iterations", FIELD(max_iterations), 0),
      choice("page_tracer", FIELD(page_tracer), kTracers),
      integer("page_window_depth", FIELD(page_window_depth), 1),
      choice("log", FIELD(log), kLogs),
      on_off("python_source", FIELD(python_source)),
      choice("gpu_mechanism", FIELD(gpu.mechanism), kMechanisms),
      size("gpu_chunk", FIELD(gpu.chunk_bytes), 2 * kMiB, 2 * kMiB, "a multiple of 2M"),
      size("gpu_host_limit", FIELD(gpu.host_limit), 1, 0, "a size such as 64G"),
      on_off("gpu_spill", FIELD(gpu.spill), true),
      on_off("gpu_migrate", FIELD(gpu.migrate), true),
      size("gpu_group", FIELD(gpu.group_bytes), 1, 1, "a size above 0 such as 512M"),
      fraction("gpu_headroom", FIELD(gpu.headroom)),
      on_off("gpu_persistent", FIELD(gpu.move_persistent), true),
      on_off("gpu_resident", FIELD(gpu.host_resident), true),
      size("gpu_min_move", FIELD(gpu.min_move_bytes), 1, 0, "a size such as 1M"),
      integer("gpu_evict_lag", FIELD(gpu.eviction_lag), 0, 100000, "0..100000 (allocator events)"),
      integer("gpu_prewarm_threads", FIELD(gpu.prewarm_threads), 0, 64, "0..64"),
      integer("gpu_remap_threads", FIELD(gpu.remap_threads), 1, 16, "1..16"),
      choice("gpu_remap", FIELD(gpu.remap_when), kRemap),
      integer("gpu_remap_delay", FIELD(gpu.remap_max_delay), 0, 10000, "0..10000 (milliseconds)"),
      size("gpu_copy_piece", FIELD(gpu.copy_piece), kMiB, 0, "0 or a multiple of 1M"),
      integer("gpu_divergences", FIELD(gpu.phases.divergence_limit), 1, 1000000, "1..1000000"),
      choice("gpu_verify", FIELD(gpu.verify), kVerify),
      on_off("gpu_gate", FIELD(gpu.gate), true),
      fraction("gpu_fill", FIELD(gpu.fill)),
      choice("gpu_limit", FIELD(gpu.hard_limit), kLimit),
      on_off("gpu_recompute", FIELD(gpu.recompute)),
      choice("gpu_gc", FIELD(gpu.gc_freeze), kGc),
      choice("gpu_step", FIELD(gpu.stream_step), kStep),
      choice("gpu_compile", FIELD(gpu.compile_blocks), kCompile),
      choice("gpu_autocast_cache", FIELD(gpu.autocast_cache), kAutocastCache),
      choice("gpu_copies", FIELD(gpu.raw_copies), kCopies),
      text("gpu_plan_out", FIELD(gpu.plan_out), false),
      text("gpu_profile_out", FIELD(gpu.profile_out), false),
  };
#undef FIELD
  return keys;
}

std::string joined(const std::vector<std::string_view>& names) {
  std::string out;
  for (auto k : names) out += (out.empty() ? "" : ", ") + std::string(k);
  return out;
}

/// TIERPACK_GPU's keys: the gpu_* keys without their prefix.
std::vector<std::string_view> alias_keys() {
  std::vector<std::string_view> out;
  for (const Key& k : all_keys())
    if (k.name.starts_with(kGpuPrefix)) out.push_back(k.name.substr(kGpuPrefix.size()));
  return out;
}

const Key* find_key(std::string_view name) {
  for (const Key& k : all_keys())
    if (k.name == name) return &k;
  return nullptr;
}

/// Calls f(key, value) for each "key:value" of `text`, in order.
template <class F>
void each_item(std::string_view source, std::string_view text, F&& f) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find(',', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos)
      throw logic_error(std::string(source) + ": " + quote_input(item) + " is not key:value");
    f(item.substr(0, colon), item.substr(colon + 1));
  }
}

}  // namespace

const std::vector<std::string_view>& Config::keys() {
  static const std::vector<std::string_view> k = [] {
    std::vector<std::string_view> names;
    for (const Key& key : all_keys()) names.push_back(key.name);
    return names;
  }();
  return k;
}

Config parse_config(std::string_view text, std::string_view gpu_alias) {
  Config c;
  std::map<std::string_view, std::string_view> given;  // TIERPACK_CONF's values by key
  each_item("TIERPACK_CONF", text, [&](std::string_view key, std::string_view value) {
    const Key* k = find_key(key);
    if (!k)
      throw logic_error("TIERPACK_CONF: unknown key " + quote_input(key) + " (accepted keys: " +
                        joined(Config::keys()) + ")");
    k->read(c, {"TIERPACK_CONF", key}, value);
    given[k->name] = value;
  });
  each_item("TIERPACK_GPU", gpu_alias, [&](std::string_view key, std::string_view value) {
    const std::string name = std::string(kGpuPrefix) + std::string(key);
    const Key* k = find_key(name);
    if (!k)
      throw logic_error("TIERPACK_GPU: unknown key " + quote_input(key) + " (accepted keys: " + joined(alias_keys()) +
                        ")");
    const Where where{"TIERPACK_GPU", key};
    if (auto it = given.find(k->name); it != given.end()) {
      Config mine, theirs;
      k->read(mine, where, value);
      k->read(theirs, {"TIERPACK_CONF", k->name}, it->second);
      if (k->text(mine) != k->text(theirs))
        throw logic_error("TIERPACK_GPU: " + quote_input(std::string(key) + ":" + std::string(value)) +
                          " conflicts with TIERPACK_CONF's " +
                          quote_input(std::string(k->name) + ":" + std::string(it->second)) + " (give it once)");
    }
    k->read(c, where, value);
  });
  return c;
}

Config config_from_env() {
  const char* conf = std::getenv("TIERPACK_CONF");
  const char* gpu = std::getenv("TIERPACK_GPU");
  return config_for_process(conf ? std::string_view(conf) : std::string_view(),
                            gpu ? std::string_view(gpu) : std::string_view());
}

Config config_for_process(std::string_view text, std::string_view gpu_alias) {
  Config c = parse_config(text, gpu_alias);
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
  for (const Key& k : all_keys()) {
    const std::string v = k.text(c);
    if (v == k.text(d)) continue;
    if (!out.empty()) out += ',';
    out += std::string(k.name) + ":" + v;
  }
  return out;
}

nlohmann::json settings_json(const Config& c) {
  Json j = Json::object();
  for (const Key& k : all_keys()) j[std::string(k.name)] = k.json(c);
  return j;
}

}  // namespace tierpack

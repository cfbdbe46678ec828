// Tier spec parser, JSON tier models and built-in presets (see tier_spec.hpp).
#include "core/tier_spec.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "core/detail/json_util.hpp"
#include "core/detail/tier_presets.hpp"
#include "core/error.hpp"
#include "core/file_envelope.hpp"
#include "core/input_file.hpp"
#include "core/units.hpp"

namespace tierpack {

// Note [Tier spec]
// ~~~~~~~~~~~~~~~~
//   spec  := tier (sep tier)*            sep := ',' | '+'
//   tier  := KIND[N] ':' CAPACITY ['@' attr ('/' attr)*]
//   attr  := BANDWIDTH ("36GB/s") | LATENCY ("140ns", "+80ns": relative to the first tier)
// KIND is gpu, dram/host, cxl/far/numa (core/tier.hpp's parse_tier_kind). Tier 0 is the fast tier.
// A '+' directly after '@' or '/' starts a relative latency, not a new tier, so "dram:16G+cxl:64G@+80ns"
// reads as two tiers. Bandwidths end in "/s", so "+80ns/36GB/s" splits into "+80ns" and "36GB/s".
//
// What the figures mean:
//   - For a GPU first tier, a host or far tier's bandwidth is the PCIe link between it and the GPU (the
//     way GPU <-> host copies are quoted); the link is full duplex.
//   - Between host tiers a tier's bandwidth is the tier's own (CPU loads and copies); the link between
//     tier 0 and tier k runs at the slower of the two, and both directions share it (the CPU moves pages
//     with move_pages, which uses the same memory channels both ways).
//   - A relative latency adds to the first tier's latency; when the first tier has none, the nominal
//     local DRAM latency below is used and the tier's `source` says so.

namespace {

constexpr double kNominalDramLatencyNs = 100.0;  // nominal idle load latency of local DDR4/DDR5

[[noreturn]] void bad_spec(std::string_view spec, std::string_view part, const std::string& why) {
  throw logic_error("invalid tier spec " + quote_input(spec) + ": in " + quote_input(part) + ": " + why);
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Splits the spec into tier tokens at ',' and '+', except a '+' right after '@' or '/'.
std::vector<std::string_view> split_tiers(std::string_view spec) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= spec.size(); ++i) {
    const bool end = i == spec.size();
    if (!end && spec[i] != ',' && spec[i] != '+') continue;
    if (!end && spec[i] == '+' && i > 0 && (spec[i - 1] == '@' || spec[i - 1] == '/')) continue;
    out.push_back(spec.substr(start, i - start));
    start = i + 1;
  }
  return out;
}

// Splits "ATTR/ATTR/..." into attributes, keeping the "/s" of bandwidths with their number.
std::vector<std::string> split_attrs(std::string_view attrs) {
  std::vector<std::string> pieces;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= attrs.size(); ++i)
    if (i == attrs.size() || attrs[i] == '/') {
      pieces.emplace_back(attrs.substr(start, i - start));
      start = i + 1;
    }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    if (i + 1 < pieces.size() && lower(pieces[i + 1]) == "s") {
      out.push_back(pieces[i] + "/s");
      ++i;
    } else {
      out.push_back(pieces[i]);
    }
  }
  return out;
}

struct ParsedTier {
  Tier tier;
  std::optional<double> bandwidth;
  std::optional<double> latency;
  bool latency_relative = false;
  std::string token;
};

ParsedTier parse_tier_token(std::string_view spec, std::string_view token) {
  ParsedTier p;
  p.token = std::string(token);
  const std::size_t at = token.find('@');
  std::string_view head = token.substr(0, at);
  const std::size_t colon = head.find(':');
  const std::string_view name = head.substr(0, colon);
  if (name.empty()) bad_spec(spec, token, "missing tier kind (e.g. dram:16G)");
  std::size_t alpha = 0;
  while (alpha < name.size() && (std::isalpha(static_cast<unsigned char>(name[alpha])) || name[alpha] == '-')) ++alpha;
  const std::string_view kind_word = name.substr(0, alpha);
  const std::string_view digits = name.substr(alpha);
  if (kind_word.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    bad_spec(spec, token, "tier name '" + std::string(name) + "' must be a kind optionally followed by a number (gpu0, dram, cxl1)");
  try {
    p.tier.kind = parse_tier_kind(lower(kind_word));
  } catch (const logic_error&) {
    bad_spec(spec, token, "unknown tier kind '" + std::string(kind_word) + "' (accepted: gpu, dram, host, cxl, far, numa)");
  }
  p.tier.name = lower(name);
  if (colon == std::string_view::npos || colon + 1 == head.size())
    bad_spec(spec, token, "missing capacity (e.g. " + std::string(name) + ":16G)");
  try {
    p.tier.capacity_bytes = parse_bytes(head.substr(colon + 1));
  } catch (const logic_error& e) {
    bad_spec(spec, token, e.what());
  }
  if (p.tier.capacity_bytes == 0) bad_spec(spec, token, "capacity must be positive");
  if (at == std::string_view::npos) return p;
  const std::string_view attrs = token.substr(at + 1);
  if (attrs.empty()) bad_spec(spec, token, "nothing after '@' (expected a bandwidth such as 36GB/s or a latency such as +80ns)");
  for (const auto& a : split_attrs(attrs)) {
    if (a.empty()) bad_spec(spec, token, "empty attribute after '@' or '/'");
    try {
      if (a.size() > 2 && lower(a.substr(a.size() - 2)) == "/s") {
        if (p.bandwidth) bad_spec(spec, token, "bandwidth given twice");
        p.bandwidth = parse_bandwidth(a);
      } else {
        if (p.latency) bad_spec(spec, token, "latency given twice");
        bool rel = false;
        p.latency = parse_latency_ns(a, &rel);
        p.latency_relative = rel;
      }
    } catch (const logic_error& e) {
      if (std::string_view(e.what()).starts_with("invalid tier spec")) throw;
      bad_spec(spec, token, std::string(e.what()) + " (attributes are a bandwidth such as 36GB/s and/or a latency such as +80ns)");
    }
  }
  return p;
}

}  // namespace

TierModel parse_tier_spec(std::string_view spec) {
  if (spec.empty()) throw logic_error("invalid tier spec '': empty (e.g. gpu:24G,host:120G@55GB/s)");
  std::vector<ParsedTier> parsed;
  for (auto token : split_tiers(spec)) {
    if (token.empty()) bad_spec(spec, token, "empty tier (two separators in a row?)");
    parsed.push_back(parse_tier_token(spec, token));
  }
  TierModel model;
  model.hostname = "spec";
  // Tiers named by kind alone get a number per kind word: "dram,dram" -> dram0, dram1.
  std::map<std::string, int> per_word;
  int gpus = 0, host_nodes = 0;
  const bool gpu_first = parsed.front().tier.kind == TierKind::gpu;
  for (std::size_t i = 0; i < parsed.size(); ++i) {
    auto& p = parsed[i];
    Tier t = p.tier;
    const bool numbered = std::isdigit(static_cast<unsigned char>(t.name.back()));
    if (!numbered) t.name += std::to_string(per_word[t.name]++);
    if (model.find(t.name)) bad_spec(spec, p.token, "tier name '" + t.name + "' used twice");
    t.source = "spec";
    if (t.kind == TierKind::gpu) {
      t.device = gpus;
      if (numbered) {  // from_chars, not std::stoi: "gpu99999999999" must be a logic_error, not out_of_range
        const std::string digits = t.name.substr(t.name.find_first_of("0123456789"));
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), t.device);
        if (ec != std::errc{} || end != digits.data() + digits.size()) bad_spec(spec, p.token, "GPU number '" + digits + "' out of range");
      }
      ++gpus;
      t.page_size = 2ull << 20;
    } else {
      t.numa_node = host_nodes++;
      t.page_size = 4096;
    }
    if (p.latency) {
      if (p.latency_relative) {
        if (i == 0) bad_spec(spec, p.token, "a relative latency ('+') needs a tier before it");
        const Tier& first = model.tiers.front();
        double base = 0;
        if (first.latency_ns) {
          base = *first.latency_ns;
        } else if (first.kind == TierKind::host_dram) {
          base = kNominalDramLatencyNs;
          t.source = "spec (latency relative to nominal 100 ns local DRAM)";
        } else {
          bad_spec(spec, p.token, "a relative latency needs the first tier's latency (e.g. " + first.name + ":...@100ns)");
        }
        t.latency_ns = base + *p.latency;
      } else {
        t.latency_ns = *p.latency;
      }
    }
    const bool pcie_link = gpu_first && i > 0 && t.kind != TierKind::gpu;
    if (p.bandwidth && !pcie_link) t.bandwidth_bytes_per_s = *p.bandwidth;
    model.add(t);
    if (i == 0) continue;
    const Tier& first = model.tiers.front();
    const Tier& cur = model.tiers.back();
    if (pcie_link && p.bandwidth) {
      const Link l{first.id, cur.id, *p.bandwidth, true, "spec: " + cur.name + " bandwidth is the PCIe link"};
      model.links.push_back(l);
      model.links.push_back({cur.id, first.id, *p.bandwidth, true, l.source});
    } else if (!gpu_first && cur.kind != TierKind::gpu && cur.bandwidth_bytes_per_s) {
      const double bw = std::min(*cur.bandwidth_bytes_per_s, first.bandwidth_bytes_per_s.value_or(*cur.bandwidth_bytes_per_s));
      const std::string src = "spec: slower tier's bandwidth, shared by both directions";
      model.links.push_back({first.id, cur.id, bw, false, src});
      model.links.push_back({cur.id, first.id, bw, false, src});
    }
  }
  validate_tier_model(model);
  return model;
}

void validate_tier_model(const TierModel& model) {
  if (model.tiers.empty()) throw logic_error("tier model has no tiers");
  std::set<std::string> names;
  for (const auto& t : model.tiers) {
    if (t.name.empty()) throw logic_error("tier " + std::to_string(t.id) + " has no name");
    if (!names.insert(t.name).second) throw logic_error("tier name '" + t.name + "' used twice");
    if (t.capacity_bytes == 0) throw logic_error("tier '" + t.name + "' has no capacity");
    if (t.page_size == 0 || (t.page_size & (t.page_size - 1)) != 0)
      throw logic_error("tier '" + t.name + "': page size " + std::to_string(t.page_size) + " is not a power of two");
    if (t.bandwidth_bytes_per_s && !(*t.bandwidth_bytes_per_s > 0))
      throw logic_error("tier '" + t.name + "': bandwidth must be positive");
    if (t.latency_ns && !(*t.latency_ns >= 0)) throw logic_error("tier '" + t.name + "': latency must not be negative");
  }
  for (const auto& l : model.links) {
    if (l.from >= model.tiers.size() || l.to >= model.tiers.size() || l.from == l.to)
      throw logic_error("link " + std::to_string(l.from) + " -> " + std::to_string(l.to) + " does not join two tiers of the model");
    if (!(l.bandwidth_bytes_per_s > 0))
      throw logic_error("link " + model.tiers[l.from].name + " -> " + model.tiers[l.to].name + ": bandwidth must be positive");
    if (l.both_ways_bytes_per_s < 0)
      throw logic_error("link " + model.tiers[l.from].name + " -> " + model.tiers[l.to].name + ": both-ways bandwidth must not be negative");
  }
}

TierModel tier_model_from_json_text(std::string_view text, std::string_view origin) {
  TierModel model;
  try {
    const auto j = nlohmann::json::parse(text);
    if (!j.is_object() || !j.contains("tiers"))
      throw format_error("not a tier model (expected an object with \"tiers\", as `tierpack topo --json` writes)");
    j.get_to(model);
    validate_tier_model(model);
  } catch (const nlohmann::json::exception& e) {
    throw format_error(std::string(origin) + ": invalid tier model: " + detail::json_error_text(e));
  } catch (const logic_error& e) {
    throw format_error(std::string(origin) + ": invalid tier model: " + e.what());
  }
  return model;
}

TierModel read_tier_model(const std::string& path) {
  return tier_model_from_json_text(read_file(path, kMaxTierModelBytes), path);
}

std::vector<std::string> tier_preset_names() {
  std::vector<std::string> out;
  for (const auto& p : detail::builtin_tier_presets()) out.emplace_back(p.name);
  std::sort(out.begin(), out.end());
  return out;
}

namespace {
const detail::TierPresetText& find_preset(std::string_view name) {
  for (const auto& p : detail::builtin_tier_presets())
    if (p.name == name) return p;
  std::string known;
  for (const auto& n : tier_preset_names()) known += (known.empty() ? "" : ", ") + n;
  throw logic_error("unknown tier preset '" + std::string(name) + "' (known: " + known + ")");
}
}  // namespace

std::string tier_preset_description(std::string_view name) {
  const auto j = nlohmann::json::parse(find_preset(name).json);
  return j.value("description", std::string());
}

TierModel tier_preset(std::string_view name) {
  return tier_model_from_json_text(find_preset(name).json, "preset:" + std::string(name));
}

TierModel load_tier_model(std::string_view text) {
  if (text.starts_with("preset:")) return tier_preset(text.substr(7));
  // Anything there but a directory is read as a file, so a FIFO or device gets read_tier_model's error.
  std::error_code ec;
  const auto type = std::filesystem::status(std::filesystem::path(text), ec).type();
  if (!ec && type != std::filesystem::file_type::not_found && type != std::filesystem::file_type::directory)
    return read_tier_model(std::string(text));
  if (text.find(':') == std::string_view::npos)
    throw logic_error("--tiers " + quote_input(text) +
                      " is neither a tier spec (gpu:24G,host:120G@55GB/s), an existing file, nor preset:NAME");
  return parse_tier_spec(text);
}

}  // namespace tierpack

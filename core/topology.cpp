// Topology queries, JSON form and the table `tierpack topo` prints (see topology.hpp).
#include "core/topology.hpp"

#include <cstdio>

#include "core/detail/json_util.hpp"
#include "core/units.hpp"

namespace tierpack {

TierId Topology::add(Tier tier) {
  TIERPACK_EXPECTS(tiers.size() < kNoTier, "too many tiers");
  tier.id = static_cast<TierId>(tiers.size());
  tiers.push_back(std::move(tier));
  return tiers.back().id;
}

const Tier& Topology::at(TierId id) const {
  TIERPACK_EXPECTS(id < tiers.size(), "tier id " + std::to_string(id) + " out of range");
  return tiers[id];
}

const Tier* Topology::find(std::string_view name) const {
  for (const auto& t : tiers)
    if (t.name == name) return &t;
  return nullptr;
}

std::optional<TierId> Topology::fast_tier() const {
  std::optional<TierId> best;
  for (const auto& t : tiers) {
    if (t.kind == TierKind::gpu) return t.id;
    if (t.kind == TierKind::host_dram && (!best || t.capacity_bytes > tiers[*best].capacity_bytes)) best = t.id;
  }
  if (!best && !tiers.empty()) best = tiers.front().id;
  return best;
}

std::vector<TierId> Topology::of_kind(TierKind kind) const {
  std::vector<TierId> out;
  for (const auto& t : tiers)
    if (t.kind == kind) out.push_back(t.id);
  return out;
}

const Link* Topology::link(TierId from, TierId to) const {
  for (const auto& l : links)
    if (l.from == from && l.to == to) return &l;
  return nullptr;
}

void to_json(nlohmann::json& j, const Topology& t) {
  nlohmann::json links = nlohmann::json::array();
  for (const auto& l : t.links) {
    links.push_back({{"from", l.from},
                     {"to", l.to},
                     {"bandwidth_bytes_per_s", l.bandwidth_bytes_per_s},
                     {"full_duplex", l.full_duplex},
                     {"source", l.source}});
    if (l.both_ways_bytes_per_s > 0) links.back()["both_ways_bytes_per_s"] = l.both_ways_bytes_per_s;
  }
  j = nlohmann::json{{"hostname", t.hostname}, {"tiers", t.tiers}, {"links", links}};
}

void from_json(const nlohmann::json& j, Link& l) {
  using namespace detail;
  check_keys(j, {"from", "to", "bandwidth_bytes_per_s", "full_duplex", "source", "both_ways_bytes_per_s"});
  get(j, "from", l.from);
  get(j, "to", l.to);
  get(j, "bandwidth_bytes_per_s", l.bandwidth_bytes_per_s, 1.0, 1e15, "1e15");
  get_or(j, "full_duplex", l.full_duplex);
  get_or(j, "both_ways_bytes_per_s", l.both_ways_bytes_per_s, 0.0, 1e15, "1e15");
  get_or(j, "source", l.source);
}

void from_json(const nlohmann::json& j, Topology& t) {
  detail::get_or(j, "hostname", t.hostname);
  detail::get_records(j, "tiers", "tier", t.tiers);
  for (std::size_t i = 0; i < t.tiers.size(); ++i)
    if (t.tiers[i].id != i) throw format_error("tier ids must be 0..n-1 in order; tier " + std::to_string(i) +
                                               " has id " + std::to_string(t.tiers[i].id));
  detail::get_records(j, "links", "link", t.links, false);
  for (const auto& l : t.links)
    if (l.from >= t.tiers.size() || l.to >= t.tiers.size())
      throw format_error("link refers to tier " + std::to_string(std::max(l.from, l.to)) + " which does not exist");
}

std::string format_topology_table(const Topology& topo) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-4s %-10s %-11s %-5s %-6s %12s %12s %10s  %s\n", "id", "name", "kind", "node",
                "device", "capacity", "bandwidth", "latency", "source");
  out += line;
  for (const auto& t : topo.tiers) {
    char bw[32] = "-", lat[32] = "-";
    if (t.bandwidth_bytes_per_s) std::snprintf(bw, sizeof bw, "%.1f GB/s", *t.bandwidth_bytes_per_s / 1e9);
    if (t.latency_ns) std::snprintf(lat, sizeof lat, "%.0f ns", *t.latency_ns);
    std::snprintf(line, sizeof line, "%-4u %-10s %-11s %-5s %-6s %12s %12s %10s  %s\n", unsigned(t.id),
                  t.name.c_str(), std::string(to_string(t.kind)).c_str(),
                  t.numa_node >= 0 ? std::to_string(t.numa_node).c_str() : "-",
                  t.device >= 0 ? std::to_string(t.device).c_str() : "-", format_bytes(t.capacity_bytes).c_str(), bw,
                  lat, t.source.c_str());
    out += line;
  }
  for (const auto& l : topo.links) {
    char both[48] = "";
    if (l.both_ways_bytes_per_s > 0) std::snprintf(both, sizeof both, " (%.1f GB/s both ways)", l.both_ways_bytes_per_s / 1e9);
    std::snprintf(line, sizeof line, "link %s -> %s: %.1f GB/s per direction%s%s (%s)\n",
                  topo.at(l.from).name.c_str(), topo.at(l.to).name.c_str(), l.bandwidth_bytes_per_s / 1e9,
                  l.full_duplex ? ", full duplex" : "", both, l.source.c_str());
    out += line;
  }
  return out;
}

}  // namespace tierpack

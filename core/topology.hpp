// The set of tiers a run can use and the links between them. Discovered on a machine by
// core/topology_discovery.hpp, or built from a tier spec / model file for simulation.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/tier.hpp"

namespace tierpack {

/// A copy path between two tiers (e.g. GPU <-> host over PCIe).
struct Link {
  TierId from = kNoTier;
  TierId to = kNoTier;
  double bandwidth_bytes_per_s = 0;  ///< per direction
  bool full_duplex = true;           ///< both directions can run at once
  std::string source;
  /// Total of both directions when both run at once, where measured (H200 PCIe: ~100 GB/s against
  /// 2 x 55); 0 means 2 x bandwidth when full_duplex, else bandwidth.
  double both_ways_bytes_per_s = 0;

  friend bool operator==(const Link&, const Link&) = default;
};

struct Topology {
  std::vector<Tier> tiers;
  std::vector<Link> links;
  std::string hostname;

  /// Adds a tier, assigning its id; returns the id.
  TierId add(Tier tier);
  const Tier& at(TierId id) const;
  const Tier* find(std::string_view name) const;
  /// The fastest tier: a GPU if there is one, else the host DRAM node with the most capacity.
  std::optional<TierId> fast_tier() const;
  /// Tiers of the given kind, in id order.
  std::vector<TierId> of_kind(TierKind kind) const;
  /// The link between two tiers, if one is known.
  const Link* link(TierId from, TierId to) const;

  friend bool operator==(const Topology&, const Topology&) = default;
};

void to_json(nlohmann::json& j, const Topology& t);
void from_json(const nlohmann::json& j, Topology& t);

/// Human-readable table (what `tierpack topo` prints).
std::string format_topology_table(const Topology& topo);

}  // namespace tierpack

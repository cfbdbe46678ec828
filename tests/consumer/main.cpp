// Uses the installed tierpack package: parses a budget and discovers this machine's tiers.
#include <tierpack/core/discovery/topology_discovery.hpp>
#include <tierpack/core/units.hpp>
#include <tierpack/core/version.hpp>

#include <cstdio>

int main() {
  const auto budget = tierpack::parse_budget("24G");
  const auto topo = tierpack::discover_topology({.hwloc_xml = {}, .gpus = false});
  std::printf("tierpack %s: budget %s, %zu tier(s)\n", TIERPACK_VERSION, budget.to_string().c_str(), topo.tiers.size());
  return topo.tiers.empty() ? 1 : 0;
}

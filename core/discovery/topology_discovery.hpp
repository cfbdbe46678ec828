// Finds the memory tiers of a machine: NUMA nodes through hwloc (capacity, CPU-less nodes as the
// far/CXL tier, HMAT bandwidth and latency when the firmware provides them) and GPUs through the
// CUDA driver when one is present. This is the only place hwloc is used.
#pragma once

#include <string>

#include "core/topology.hpp"

namespace tierpack {

struct DiscoveryOptions {
  std::string hwloc_xml;  ///< load this hwloc XML instead of the live machine (tests, what-ifs)
  bool gpus = true;       ///< also enumerate CUDA devices (ignored with hwloc_xml)
};

/// Throws logic_error when the XML cannot be loaded, os_error when hwloc fails on the live system.
Topology discover_topology(const DiscoveryOptions& options = {});

}  // namespace tierpack

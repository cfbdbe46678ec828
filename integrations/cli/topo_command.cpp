// `tierpack topo`: the tiers found on this machine (or in an hwloc XML), as a table or JSON.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/discovery/topology_discovery.hpp"
#include "core/file_envelope.hpp"
#include "integrations/cli/args.hpp"
#include "integrations/cli/commands.hpp"

namespace tierpack::cli {

const ArgSpec& topo_spec() {
  static const ArgSpec spec{
      .description = "  Lists the memory tiers of this machine: host DRAM NUMA nodes, CPU-less (CXL / far) nodes,\n"
                     "  GPUs, with capacity and HMAT bandwidth/latency when the firmware reports them.\n",
      .options = {
          {"--json", "", "machine-readable output (the tier-model format `tierpack replay --tiers` reads)"},
          {"--xml", "FILE", "describe the topology in an hwloc XML file instead of this machine"},
          {"--no-gpu", "", "do not probe CUDA devices"},
          {"-o", "FILE", "write to FILE instead of standard output"},
      }};
  return spec;
}

int run_topo(const Args& args) {
  DiscoveryOptions opts;
  opts.hwloc_xml = args.get_or("--xml", "");
  opts.gpus = !args.has("--no-gpu");
  const Topology topo = discover_topology(opts);
  std::string text = args.has("--json") ? nlohmann::json(topo).dump(2) + "\n" : format_topology_table(topo);
  if (auto out = args.get("-o")) {
    write_file_atomic(*out, text);
  } else {
    std::fputs(text.c_str(), stdout);
  }
  return 0;
}

}  // namespace tierpack::cli

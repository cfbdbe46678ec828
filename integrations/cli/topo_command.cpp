// `tierpack topo`: the tiers found on this machine (or in an hwloc XML), as a table or JSON.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/discovery/topology_discovery.hpp"
#include "core/file_envelope.hpp"
#include "integrations/cli/args.hpp"
#include "integrations/cli/commands.hpp"

namespace tierpack::cli {

const char* const kTopoUsage =
    "usage: tierpack topo [--json] [--xml hwloc.xml] [--no-gpu] [-o file]\n"
    "  Lists the memory tiers of this machine: host DRAM NUMA nodes, CPU-less (CXL / far) nodes,\n"
    "  GPUs, with capacity and HMAT bandwidth/latency when the firmware reports them.\n"
    "  --json       machine-readable output (the tier-model format `tierpack replay --tiers` reads)\n"
    "  --xml FILE   describe the topology in an hwloc XML file instead of this machine\n"
    "  --no-gpu     do not probe CUDA devices\n"
    "  -o FILE      write to FILE instead of standard output\n";

int run_topo(const std::vector<std::string>& argv) {
  const Args args = parse_args(argv, {.valued = {"--xml", "-o"}, .switches = {"--json", "--no-gpu"}});
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

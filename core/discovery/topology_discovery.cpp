// hwloc-based tier discovery (see topology_discovery.hpp).
//
// Note [CPU-less nodes]: hwloc attaches every NUMA node to some ancestor object, so a node's cpuset
// is the locality of its parent, not "the CPUs inside it". On a live Linux system we ask sysfs
// whether the node has CPUs (/sys/devices/system/node/nodeN/cpulist). For a loaded XML we use the
// rule that matches how hwloc lays such machines out: a node is CPU-local when it is the first memory
// child (lowest OS index) of the nearest ancestor of some PU that has memory children; every other
// node is reached only through another node's CPUs and is classified as far memory (CXL, far NUMA).
#include "core/discovery/topology_discovery.hpp"

#include <hwloc.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <memory>
#include <set>

#include "core/discovery/gpu_probe.hpp"
#include "core/error.hpp"

namespace tierpack {
namespace {

struct TopologyHandle {
  hwloc_topology_t t = nullptr;
  ~TopologyHandle() {
    if (t) hwloc_topology_destroy(t);
  }
};

// Returns -1 when sysfs cannot tell, else whether node has CPUs.
int sysfs_node_has_cpus(unsigned node) {
  std::ifstream f("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
  if (!f) return -1;
  std::string line;
  std::getline(f, line);
  return line.find_first_not_of(" \n\t") != std::string::npos ? 1 : 0;
}

std::set<unsigned> cpu_local_nodes(hwloc_topology_t t) {
  std::set<unsigned> local;
  const int n_pu = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  for (int i = 0; i < n_pu; ++i) {
    hwloc_obj_t obj = hwloc_get_obj_by_type(t, HWLOC_OBJ_PU, i);
    for (; obj; obj = obj->parent) {
      if (obj->memory_arity == 0) continue;
      unsigned best = ~0u;
      for (hwloc_obj_t m = obj->memory_first_child; m; m = m->next_sibling)
        if (m->type == HWLOC_OBJ_NUMANODE && m->os_index < best) best = m->os_index;
      if (best != ~0u) local.insert(best);
      break;
    }
  }
  return local;
}

// HMAT figures seen from the CPUs of the first CPU-local node (the initiator the runtime runs on).
void read_memattrs(hwloc_topology_t t, hwloc_obj_t node, hwloc_const_cpuset_t initiator, Tier& tier) {
  hwloc_location loc{};
  loc.type = HWLOC_LOCATION_TYPE_CPUSET;
  loc.location.cpuset = const_cast<hwloc_cpuset_t>(initiator);  // hwloc API takes non-const
  hwloc_uint64_t value = 0;
  if (hwloc_memattr_get_value(t, HWLOC_MEMATTR_ID_BANDWIDTH, node, &loc, 0, &value) == 0 && value > 0) {
    tier.bandwidth_bytes_per_s = static_cast<double>(value) * 1024.0 * 1024.0;  // hwloc: MiB/s
    tier.source = "hwloc+hmat";
  }
  if (hwloc_memattr_get_value(t, HWLOC_MEMATTR_ID_LATENCY, node, &loc, 0, &value) == 0 && value > 0) {
    tier.latency_ns = static_cast<double>(value);  // hwloc: ns
    tier.source = "hwloc+hmat";
  }
}

}  // namespace

Topology discover_topology(const DiscoveryOptions& options) {
  TopologyHandle h;
  if (hwloc_topology_init(&h.t) != 0) throw os_error("hwloc_topology_init", errno);
  const bool from_xml = !options.hwloc_xml.empty();
  if (from_xml) {
    if (access(options.hwloc_xml.c_str(), R_OK) != 0)
      throw logic_error("cannot read hwloc XML '" + options.hwloc_xml + "'");
    if (hwloc_topology_set_xml(h.t, options.hwloc_xml.c_str()) != 0)
      throw logic_error("'" + options.hwloc_xml + "' is not a valid hwloc XML topology");
  }
  if (hwloc_topology_load(h.t) != 0) {
    if (from_xml) throw logic_error("'" + options.hwloc_xml + "' is not a valid hwloc XML topology");
    throw os_error("hwloc_topology_load", errno);
  }

  Topology topo;
  if (!from_xml) {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0) topo.hostname = host;
  } else {
    topo.hostname = "xml:" + options.hwloc_xml;
  }

  const std::set<unsigned> local = cpu_local_nodes(h.t);
  hwloc_const_cpuset_t initiator = nullptr;
  const int n_nodes = hwloc_get_nbobjs_by_type(h.t, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < n_nodes && !initiator; ++i) {
    hwloc_obj_t node = hwloc_get_obj_by_type(h.t, HWLOC_OBJ_NUMANODE, i);
    if (local.count(node->os_index)) initiator = node->cpuset;
  }

  // GPUs first: when present they are the fast tier.
  if (!from_xml && options.gpus) {
    for (const GpuInfo& g : probe_gpus().gpus) {
      Tier t;
      t.kind = TierKind::gpu;
      t.name = "gpu" + std::to_string(g.ordinal);
      t.device = g.ordinal;
      t.numa_node = g.host_numa_node;
      t.capacity_bytes = g.total_bytes;
      t.page_size = 2u << 20;
      t.source = "cuda:" + g.name;
      topo.add(std::move(t));
    }
  }

  for (int i = 0; i < n_nodes; ++i) {
    hwloc_obj_t node = hwloc_get_obj_by_type(h.t, HWLOC_OBJ_NUMANODE, i);
    bool has_cpus = local.count(node->os_index) > 0;
    if (!from_xml) {
      const int sys = sysfs_node_has_cpus(node->os_index);
      if (sys >= 0) has_cpus = sys == 1;
    }
    Tier t;
    t.kind = has_cpus ? TierKind::host_dram : TierKind::far_memory;
    t.name = std::string(has_cpus ? "dram" : "cxl") + std::to_string(node->os_index);
    t.numa_node = static_cast<int>(node->os_index);
    t.capacity_bytes = node->attr->numanode.local_memory;
    t.page_size = 4096;
    t.source = "hwloc";
    if (initiator) read_memattrs(h.t, node, initiator, t);
    topo.add(std::move(t));
  }
  // Some virtual machines hot-add memory without node association: /proc/meminfo then counts more
  // than the single node's meminfo. With one node, all of it is that node's.
  if (!from_xml && n_nodes == 1) {
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    unsigned long long kib = 0;
    if (meminfo >> key >> kib && key == "MemTotal:") {
      Tier& t = topo.tiers.back();
      if (kib * 1024 > t.capacity_bytes) {
        t.capacity_bytes = kib * 1024;
        t.source += "+meminfo";
      }
    }
  }
  if (n_nodes == 0) {
    // hwloc always reports at least one NUMA node on Linux; be explicit if it did not.
    throw logic_error("hwloc found no NUMA node in " + (from_xml ? options.hwloc_xml : std::string("this machine")));
  }
  return topo;
}

}  // namespace tierpack

// Enumerates CUDA devices through the driver API, loaded with dlopen so that binaries built with
// CUDA support still run (and report "no CUDA device") on machines without a driver.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tierpack {

struct GpuInfo {
  int ordinal = 0;
  std::string name;
  std::uint64_t total_bytes = 0;
  int host_numa_node = -1;  ///< NUMA node nearest the GPU (-1 unknown)
  std::string pci_bus_id;
};

struct GpuProbe {
  std::vector<GpuInfo> gpus;
  std::string status;  ///< "ok", or why none were found ("no CUDA driver (libcuda.so.1 not found)")
};

GpuProbe probe_gpus();

}  // namespace tierpack

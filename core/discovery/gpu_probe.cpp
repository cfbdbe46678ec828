// CUDA device enumeration via a dlopen'ed driver (see gpu_probe.hpp). Only the handful of driver
// entry points needed here are declared; their ABI has been stable since CUDA 4.
#include "core/discovery/gpu_probe.hpp"

#include <dlfcn.h>

#include <cctype>
#include <fstream>

namespace tierpack {
namespace {

using CUresult = int;
using CUdevice = int;
constexpr int kAttrHostNumaId = 134;  // CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID (CUDA >= 12.2)

struct Driver {
  void* handle = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*device_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_name)(char*, int, CUdevice) = nullptr;
  CUresult (*total_mem)(std::size_t*, CUdevice) = nullptr;
  CUresult (*attribute)(int*, int, CUdevice) = nullptr;
  CUresult (*pci_bus_id)(char*, int, CUdevice) = nullptr;

  template <class F>
  bool sym(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(handle, name));
    return f != nullptr;
  }
};

int numa_node_from_sysfs(std::string bus_id) {
  for (char& c : bus_id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::ifstream f("/sys/bus/pci/devices/" + bus_id + "/numa_node");
  int node = -1;
  if (f >> node) return node;
  return -1;
}

}  // namespace

GpuProbe probe_gpus() {
  GpuProbe out;
  Driver d;
  d.handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!d.handle) {
    out.status = "no CUDA driver (libcuda.so.1 not found)";
    return out;
  }
  if (!d.sym(d.init, "cuInit") || !d.sym(d.device_count, "cuDeviceGetCount") || !d.sym(d.device_get, "cuDeviceGet") ||
      !d.sym(d.device_name, "cuDeviceGetName") || !d.sym(d.total_mem, "cuDeviceTotalMem_v2") ||
      !d.sym(d.attribute, "cuDeviceGetAttribute") || !d.sym(d.pci_bus_id, "cuDeviceGetPCIBusId")) {
    out.status = "CUDA driver lacks required entry points";
    return out;  // the handle stays loaded: the driver is process-wide anyway
  }
  if (CUresult r = d.init(0); r != 0) {
    out.status = "no CUDA device (cuInit returned " + std::to_string(r) + ")";
    return out;
  }
  int n = 0;
  if (d.device_count(&n) != 0 || n == 0) {
    out.status = "no CUDA device";
    return out;
  }
  for (int i = 0; i < n; ++i) {
    CUdevice dev = 0;
    if (d.device_get(&dev, i) != 0) continue;
    GpuInfo g;
    g.ordinal = i;
    char name[256] = {};
    if (d.device_name(name, sizeof name, dev) == 0) g.name = name;
    std::size_t bytes = 0;
    if (d.total_mem(&bytes, dev) == 0) g.total_bytes = bytes;
    char bus[64] = {};
    if (d.pci_bus_id(bus, sizeof bus, dev) == 0) g.pci_bus_id = bus;
    int numa = -1;
    if (d.attribute(&numa, kAttrHostNumaId, dev) == 0 && numa >= 0) g.host_numa_node = numa;
    else if (!g.pci_bus_id.empty()) g.host_numa_node = numa_node_from_sysfs(g.pci_bus_id);
    out.gpus.push_back(std::move(g));
  }
  out.status = "ok";
  return out;
}

}  // namespace tierpack

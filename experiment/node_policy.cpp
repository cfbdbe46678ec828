// NUMA policy wrappers for the real-nodes experiment (see node_policy.hpp): the kernel's calls go
// through the OS layer (platform/host_os.hpp), which returns a positive errno where these return -errno.
#include "experiment/node_policy.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/units.hpp"
#include "platform/host_os.hpp"

namespace tierpack::experiment {

int set_process_policy(NodePolicy policy, const std::vector<int>& nodes) {
  return -host::system_os().set_thread_policy(policy, nodes);
}

void* map_with_policy(std::size_t bytes, NodePolicy policy, const std::vector<int>& nodes) {
  auto& os = host::system_os();
  void* p = nullptr;
  if (const int err = os.map(bytes, &p); err != 0) {
    errno = err;
    return nullptr;
  }
  // Base pages only: a transparent huge page would put 2 MiB on one node at once.
  os.advise_huge(p, bytes, false);
  if (policy == NodePolicy::local) return p;
  if (const int err = os.set_policy(p, bytes, policy, nodes); err != 0) {
    os.unmap(p, bytes);
    errno = err;
    return nullptr;
  }
  return p;
}

void unmap(void* p, std::size_t bytes) noexcept {
  if (p) host::system_os().unmap(p, bytes);
}

std::uint64_t node_free_bytes(int node) {
  std::ifstream in("/sys/devices/system/node/node" + std::to_string(node) + "/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    const auto at = line.find("MemFree:");
    if (at == std::string::npos) continue;
    std::istringstream rest(line.substr(at + 8));
    std::uint64_t kb = 0;
    rest >> kb;
    return kb * 1024;
  }
  return 0;
}

std::uint64_t node_low_watermark_bytes(int node) {
  std::ifstream in("/proc/zoneinfo");
  std::string line;
  bool ours = false;
  std::uint64_t pages = 0;
  while (std::getline(in, line)) {
    if (line.rfind("Node ", 0) == 0) {
      ours = std::atoi(line.c_str() + 5) == node;
      continue;
    }
    if (!ours) continue;
    std::istringstream s(line);
    std::string key;
    std::uint64_t v = 0;
    if (s >> key >> v && key == "low") pages += v;
  }
  return pages * host::system_os().page_size();
}

std::vector<int> memory_nodes() {
  std::ifstream in("/sys/devices/system/node/has_memory");
  std::string text;
  std::vector<int> out;
  if (!(in >> text)) return {0};
  std::istringstream s(text);
  std::string range;
  while (std::getline(s, range, ',')) {
    const auto dash = range.find('-');
    const int a = std::atoi(range.c_str());
    const int b = dash == std::string::npos ? a : std::atoi(range.c_str() + dash + 1);
    for (int n = a; n <= b; ++n) out.push_back(n);
  }
  if (out.empty()) out.push_back(0);
  return out;
}

std::map<std::string, std::uint64_t> read_vmstat() {
  std::map<std::string, std::uint64_t> out;
  std::ifstream in("/proc/vmstat");
  std::string key;
  std::uint64_t v = 0;
  while (in >> key >> v) out[key] = v;
  return out;
}

void add_residency(const void* p, std::size_t n, std::map<int, std::uint64_t>& bytes_per_node) {
  if (!p || n == 0) return;
  auto& os = host::system_os();
  const std::uintptr_t page = os.page_size();
  std::vector<void*> pages;
  const auto begin = reinterpret_cast<std::uintptr_t>(p) & ~(page - 1);
  for (std::uintptr_t a = begin; a < reinterpret_cast<std::uintptr_t>(p) + n; a += page) pages.push_back(reinterpret_cast<void*>(a));
  std::vector<int> status(pages.size(), -1);
  if (os.move_pages(pages, {}, status) != 0) return;
  for (int s : status)
    if (s >= 0) bytes_per_node[s] += page;
}

bool Balloon::add(std::uint64_t bytes) {
  const std::uint64_t page = host::system_os().page_size();
  bytes = bytes / page * page;
  if (bytes == 0) return true;
  // Preferred, not bind: if the node fills up meanwhile (another balloon part, the kernel's own
  // migrations), the rest lands elsewhere instead of waking the OOM killer.
  void* p = map_with_policy(bytes, NodePolicy::preferred, {node_});
  if (!p) return false;
  // mlock populates and pins the pages: reclaim (and so demotion) cannot take them.
  if (const int err = host::system_os().lock(p, bytes); err != 0) {
    unmap(p, bytes);
    errno = err;
    return false;
  }
  parts_.emplace_back(p, bytes);
  return true;
}

std::uint64_t Balloon::probe() const {
  // Touch pages with the local policy (this CPU's node is `node_`: node 0 holds the CPUs here) until
  // a chunk lands on another node; what landed on `node_` is the room left.
  const std::uint64_t page = host::system_os().page_size();
  const std::uint64_t chunk = 64 * page;
  const std::uint64_t limit = node_free_bytes(node_) + (64ull << 20);
  void* p = map_with_policy(limit, NodePolicy::local, {});
  if (!p) return 0;
  auto* b = static_cast<unsigned char*>(p);
  std::uint64_t on_node = 0;
  for (std::uint64_t off = 0; off < limit; off += chunk) {
    const std::uint64_t n = std::min(chunk, limit - off);
    for (std::uint64_t x = 0; x < n; x += page) b[off + x] = 1;
    std::map<int, std::uint64_t> where;
    add_residency(b + off, n, where);
    on_node += where[node_];
    if (where[node_] < n) break;
  }
  unmap(p, limit);
  return on_node;
}

Balloon::Balloon(int node, std::uint64_t leave) : node_(node) {
  const std::uint64_t free = node_free_bytes(node);
  const std::uint64_t first = free > leave + node_low_watermark_bytes(node) ? free - leave - node_low_watermark_bytes(node) : 0;
  if (!add(first)) throw os_error("mmap+mbind+mlock balloon of " + format_bytes(first) + " on node " + std::to_string(node), errno);
  // Probe, adjust, probe again until the room is within tolerance of `leave`.
  const std::uint64_t tolerance = std::max<std::uint64_t>(256u << 10, leave / 10);
  for (int round = 0; round < 10; ++round) {
    // Let freed probe pages and the kernel's background work (kswapd, migrations) settle first.
    usleep(50 * 1000);
    room_ = probe();
    if (room_ > leave + tolerance) {
      if (!add(room_ - leave)) break;
    } else if (room_ + tolerance < leave && !parts_.empty()) {
      // Too little room: give back the last part and re-add it smaller by the shortfall.
      auto [p, n] = parts_.back();
      parts_.pop_back();
      unmap(p, n);
      const std::uint64_t shortfall = leave - room_;
      if (!add(n > shortfall ? n - shortfall : 0)) break;
    } else {
      break;
    }
  }
  usleep(50 * 1000);
  room_ = probe();  // what the run starts with (reported)
  converged_ = room_ + tolerance >= leave && room_ <= leave + tolerance;
}

Balloon::~Balloon() {
  for (auto [p, n] : parts_) unmap(p, n);
}

std::uint64_t Balloon::bytes() const {
  std::uint64_t n = 0;
  for (const auto& part : parts_) n += part.second;
  return n;
}

}  // namespace tierpack::experiment

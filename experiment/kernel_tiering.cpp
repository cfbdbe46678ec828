// Kernel tiering and DAMON sessions for the real-nodes experiment (see kernel_tiering.hpp).
#include "experiment/kernel_tiering.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <fstream>

#include "core/error.hpp"

namespace tierpack::experiment {
namespace {

const std::string kBalancing = "/proc/sys/kernel/numa_balancing";
const std::string kDemotion = "/sys/kernel/mm/numa/demotion_enabled";
const std::string kDamon = "/sys/kernel/mm/damon/admin/kdamonds";

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

void write_text(const std::string& path, const std::string& value) {
  std::ofstream out(path);
  out << value;
  out.flush();
  if (!out) throw os_error("write '" + value + "' to " + path, errno ? errno : EIO);
}

// Top-level "System RAM" ranges of /proc/iomem as [start, end) (empty when unreadable or hidden).
std::vector<std::pair<std::uint64_t, std::uint64_t>> system_ram_ranges() {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  std::ifstream in("/proc/iomem");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == ' ' || line.find(" : System RAM") == std::string::npos) continue;
    const auto dash = line.find('-');
    const std::uint64_t a = std::stoull(line.substr(0, dash), nullptr, 16);
    const std::uint64_t b = std::stoull(line.substr(dash + 1), nullptr, 16) + 1;
    if (b > a + (1u << 20)) out.emplace_back(a, b);  // skip the tiny low ranges
  }
  return out;
}

}  // namespace

KernelFeature detect_kernel_tiering() {
  if (!exists(kBalancing)) return {false, "the kernel has no NUMA balancing (" + kBalancing + " missing)"};
  if (!exists(kDemotion)) return {false, "the kernel has no memory-tier demotion (" + kDemotion + " missing)"};
  if (access(kBalancing.c_str(), W_OK) != 0 || access(kDemotion.c_str(), W_OK) != 0)
    return {false, "cannot write " + kBalancing + " / " + kDemotion + " (needs root)"};
  return {true, "numa_balancing " + read_text(kBalancing) + ", demotion_enabled " + read_text(kDemotion)};
}

KernelFeature detect_damon_migrate() {
  if (!exists(kDamon)) return {false, "the kernel has no DAMON sysfs interface (" + kDamon + " missing)"};
  if (access((kDamon + "/nr_kdamonds").c_str(), W_OK) != 0) return {false, "cannot write " + kDamon + "/nr_kdamonds (needs root)"};
  if (read_text(kDamon + "/nr_kdamonds") != "0") return {false, "a kdamond is already configured; not touching it"};
  return {true, "DAMON sysfs present"};
}

KernelTieringSession::KernelTieringSession() : old_balancing_(read_text(kBalancing)), old_demotion_(read_text(kDemotion)) {
  write_text(kDemotion, "true");
  try {
    write_text(kBalancing, "2");
  } catch (...) {
    try { write_text(kDemotion, old_demotion_); } catch (...) {}
    throw;
  }
}

KernelTieringSession::~KernelTieringSession() {
  try {
    write_text(kBalancing, old_balancing_);
    write_text(kDemotion, old_demotion_);
  } catch (...) {
  }
}

DamonSession::DamonSession(int fast_node, int slow_node) {
  const std::string k = kDamon + "/0", c = k + "/contexts/0";
  try {
    write_text(kDamon + "/nr_kdamonds", "1");
    write_text(k + "/contexts/nr_contexts", "1");
    write_text(c + "/operations", "paddr");
    // Short intervals: experiment runs last seconds, not minutes.
    write_text(c + "/monitoring_attrs/intervals/sample_us", "1000");
    write_text(c + "/monitoring_attrs/intervals/aggr_us", "20000");
    write_text(c + "/monitoring_attrs/intervals/update_us", "200000");
    // paddr: the regions to monitor are physical address ranges; all of System RAM (/proc/iomem, root).
    write_text(c + "/targets/nr_targets", "1");
    const auto ram = system_ram_ranges();
    if (ram.empty()) throw os_error("read System RAM ranges from /proc/iomem", EACCES);
    write_text(c + "/targets/0/regions/nr_regions", std::to_string(ram.size()));
    for (std::size_t i = 0; i < ram.size(); ++i) {
      write_text(c + "/targets/0/regions/" + std::to_string(i) + "/start", std::to_string(ram[i].first));
      write_text(c + "/targets/0/regions/" + std::to_string(i) + "/end", std::to_string(ram[i].second));
    }
    write_text(c + "/schemes/nr_schemes", "2");
    const std::string hot = c + "/schemes/0", cold = c + "/schemes/1";
    // The sysfs access-pattern ranges start as [0, 0]: every bound is set, or a scheme matches nothing.
    const std::string any = "4294967295";
    for (const std::string& scheme : {hot, cold}) {
      write_text(scheme + "/access_pattern/sz/min", "4096");
      write_text(scheme + "/access_pattern/sz/max", "18446744073709551615");
      write_text(scheme + "/access_pattern/age/max", any);
    }
    write_text(hot + "/action", "migrate_hot");
    write_text(hot + "/target_nid", std::to_string(fast_node));
    write_text(hot + "/access_pattern/nr_accesses/max", any);
    write_text(hot + "/access_pattern/nr_accesses/min", "1");
    write_text(cold + "/action", "migrate_cold");
    write_text(cold + "/target_nid", std::to_string(slow_node));
    write_text(cold + "/access_pattern/nr_accesses/min", "0");
    write_text(cold + "/access_pattern/nr_accesses/max", "0");
    write_text(cold + "/access_pattern/age/min", "5");
    write_text(k + "/state", "on");
  } catch (...) {
    try { write_text(kDamon + "/nr_kdamonds", "0"); } catch (...) {}
    throw;
  }
}

DamonSession::~DamonSession() {
  try {
    write_text(kDamon + "/0/state", "off");
    write_text(kDamon + "/nr_kdamonds", "0");
  } catch (...) {
  }
}

std::uint64_t DamonSession::applied_bytes(int scheme) const {
  const std::string k = kDamon + "/0";
  try {
    write_text(k + "/state", "update_schemes_stats");
  } catch (...) {
    return 0;
  }
  const std::string v = read_text(k + "/contexts/0/schemes/" + std::to_string(scheme) + "/stats/sz_applied");
  return v.empty() ? 0 : std::stoull(v);
}

}  // namespace tierpack::experiment

namespace tierpack::experiment {

std::string DamonSession::stats(int scheme) const {
  const std::string d = kDamon + "/0/contexts/0/schemes/" + std::to_string(scheme) + "/stats/";
  try {
    write_text(kDamon + "/0/state", "update_schemes_stats");
  } catch (...) {
  }
  return "tried " + read_text(d + "nr_tried") + " regions (" + read_text(d + "sz_tried") + " B), applied " + read_text(d + "nr_applied") +
         " (" + read_text(d + "sz_applied") + " B), kdamond " + read_text(kDamon + "/0/state");
}

}  // namespace tierpack::experiment

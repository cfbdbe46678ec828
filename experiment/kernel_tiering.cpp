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
    write_text(c + "/targets/nr_targets", "1");  // paddr: the biggest System RAM region by default
    write_text(c + "/schemes/nr_schemes", "2");
    const std::string hot = c + "/schemes/0", cold = c + "/schemes/1";
    write_text(hot + "/action", "migrate_hot");
    write_text(hot + "/target_nid", std::to_string(fast_node));
    write_text(hot + "/access_pattern/nr_accesses/min", "1");
    write_text(cold + "/action", "migrate_cold");
    write_text(cold + "/target_nid", std::to_string(slow_node));
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

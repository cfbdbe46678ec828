// A memory tier: one kind of memory the runtime can place page groups in (GPU HBM, a host DRAM NUMA
// node, a CXL / far-NUMA node), with what is known of its capacity and speed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace tierpack {

/// Index of a tier inside its Topology (dense, 0-based).
using TierId = std::uint16_t;
inline constexpr TierId kNoTier = 0xffff;

enum class TierKind : std::uint8_t {
  gpu,        ///< device memory of one GPU
  host_dram,  ///< a host NUMA node with CPUs (ordinary DRAM)
  far_memory  ///< a CPU-less NUMA node (how CXL memory expanders appear) or a remote/slow node
};

std::string_view to_string(TierKind kind);
/// Parses "gpu", "host-dram"/"dram"/"host", "far"/"cxl"/"far-memory"; throws logic_error otherwise.
TierKind parse_tier_kind(std::string_view text);

struct Tier {
  TierId id = kNoTier;
  TierKind kind = TierKind::host_dram;
  std::string name;                          ///< "gpu0", "dram0", "cxl1", ...
  int numa_node = -1;                        ///< host NUMA node backing this tier (-1 for GPU memory)
  int device = -1;                           ///< CUDA device ordinal for GPU tiers, else -1
  std::uint64_t capacity_bytes = 0;          ///< total memory of the tier
  std::optional<double> bandwidth_bytes_per_s;  ///< read bandwidth, when known (HMAT, measured, model)
  std::optional<double> latency_ns;          ///< access latency, when known
  std::uint64_t page_size = 4096;            ///< migration granularity (4 KiB host, 2 MiB GPU)
  std::string source;                        ///< where the figures came from ("hwloc", "hmat", "cuda", "spec")

  friend bool operator==(const Tier&, const Tier&) = default;
};

void to_json(nlohmann::json& j, const Tier& t);
void from_json(const nlohmann::json& j, Tier& t);

}  // namespace tierpack

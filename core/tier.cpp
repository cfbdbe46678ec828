// Tier kinds and their JSON form (see tier.hpp).
#include "core/tier.hpp"

#include "core/detail/json_util.hpp"

namespace tierpack {
namespace {
constexpr std::pair<std::string_view, TierKind> kKinds[] = {
    {"gpu", TierKind::gpu}, {"host-dram", TierKind::host_dram}, {"far-memory", TierKind::far_memory}};
}

std::string_view to_string(TierKind kind) { return detail::enum_name(kind, kKinds); }

TierKind parse_tier_kind(std::string_view text) {
  if (text == "dram" || text == "host") return TierKind::host_dram;
  if (text == "cxl" || text == "far" || text == "numa") return TierKind::far_memory;
  try {
    return detail::enum_from_name("tier kind", text, kKinds);
  } catch (const format_error& e) {
    throw logic_error(std::string(e.what()) + "; also dram, host, cxl, far");
  }
}

void to_json(nlohmann::json& j, const Tier& t) {
  j = nlohmann::json{{"id", t.id},
                     {"kind", to_string(t.kind)},
                     {"name", t.name},
                     {"numa_node", t.numa_node},
                     {"device", t.device},
                     {"capacity_bytes", t.capacity_bytes},
                     {"page_size", t.page_size},
                     {"source", t.source}};
  detail::put_optional(j, "bandwidth_bytes_per_s", t.bandwidth_bytes_per_s);
  detail::put_optional(j, "latency_ns", t.latency_ns);
}

void from_json(const nlohmann::json& j, Tier& t) {
  using namespace detail;
  check_keys(j, {"id", "kind", "name", "numa_node", "device", "capacity_bytes", "page_size", "source",
                 "bandwidth_bytes_per_s", "latency_ns"});
  get(j, "id", t.id);
  t.kind = get_parsed(j, "kind", [](std::string_view text) { return enum_from_name("tier kind", text, kKinds); });
  get(j, "name", t.name);
  get(j, "capacity_bytes", t.capacity_bytes, std::uint64_t{0}, kMaxBytes, kMaxBytesText);
  get_or(j, "numa_node", t.numa_node, -1, kMaxDevice);
  get_or(j, "device", t.device, -1, kMaxDevice);
  get_or(j, "page_size", t.page_size, std::uint64_t{1}, kMaxPageSize, kMaxPageSizeText);
  check_page_size("page_size", t.page_size);
  get_or(j, "source", t.source);
  get_optional(j, "bandwidth_bytes_per_s", t.bandwidth_bytes_per_s);
  if (t.bandwidth_bytes_per_s) check_range("bandwidth_bytes_per_s", *t.bandwidth_bytes_per_s, 1.0, 1e15, "1e15");
  get_optional(j, "latency_ns", t.latency_ns);
  if (t.latency_ns) check_range("latency_ns", *t.latency_ns, 0.0, 1e9, "1e9");
}

}  // namespace tierpack

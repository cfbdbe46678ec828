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
  detail::read(j.at("id"), t.id);
  t.kind = detail::enum_from_name("tier kind", j.at("kind").get<std::string>(), kKinds);
  detail::read(j.at("name"), t.name);
  detail::read(j.at("capacity_bytes"), t.capacity_bytes);
  detail::get_or(j, "numa_node", t.numa_node);
  detail::get_or(j, "device", t.device);
  detail::get_or(j, "page_size", t.page_size);
  detail::get_or(j, "source", t.source);
  detail::get_optional(j, "bandwidth_bytes_per_s", t.bandwidth_bytes_per_s);
  detail::get_optional(j, "latency_ns", t.latency_ns);
}

}  // namespace tierpack

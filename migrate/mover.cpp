// Which mover serves which pair of tier kinds (the table in mover.hpp).
#include "migrate/mover.hpp"

namespace tierpack {

std::string_view to_string(MoverKind kind) {
  switch (kind) {
    case MoverKind::host_pages: return "host mover";
    case MoverKind::device_groups: return "GPU group mover";
    case MoverKind::none: break;
  }
  return "no mover";
}

MoverKind mover_for(TierKind from, TierKind to) {
  const bool from_gpu = from == TierKind::gpu, to_gpu = to == TierKind::gpu;
  if (!from_gpu && !to_gpu) return MoverKind::host_pages;
  if (from_gpu != to_gpu && (from == TierKind::host_dram || to == TierKind::host_dram)) return MoverKind::device_groups;
  return MoverKind::none;
}

}  // namespace tierpack

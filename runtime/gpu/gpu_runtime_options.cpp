// The GPU runtime's readings of the settings (see gpu_runtime_options.hpp).
#include "runtime/gpu/gpu_runtime_options.hpp"

#include "core/process_rank.hpp"

namespace tierpack::gpu {

double storage_fill(const Config& c) { return c.gpu.fill > 0 ? c.gpu.fill : c.gpu.hard_limit ? 0.88 : 0.95; }

double vmm_headroom(const Config& c) { return c.gpu.headroom > 0 ? c.gpu.headroom : 0.85; }

double fits_fraction(const Config& c) { return c.gpu.mechanism == Mechanism::storage ? 0.98 : 0.97; }

std::string gpu_profile_path(const Config& c) {
  if (!c.gpu.profile_out.empty()) return c.gpu.profile_out;
  return c.profile_out.empty() ? std::string() : device_sibling_path(c.profile_out, -1, ".tpk");
}

nlohmann::json runtime_settings_json(const Config& c) {
  nlohmann::json j = settings_json(c);
  j["gpu_fill"] = storage_fill(c);
  j["gpu_headroom"] = vmm_headroom(c);
  j["gpu_fits_fraction"] = fits_fraction(c);
  return j;
}

}  // namespace tierpack::gpu

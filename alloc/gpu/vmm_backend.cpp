// Small helpers shared by the VMM backends (see vmm_backend.hpp).
#include "alloc/gpu/vmm_backend.hpp"

namespace tierpack::gpu {

std::string_view to_string(Residence r) { return r == Residence::device ? "device" : "host"; }

}  // namespace tierpack::gpu

// Messages for the tierpack error family (see error.hpp).
#include "core/error.hpp"

#include <cstring>

#include "core/units.hpp"

namespace tierpack {

out_of_memory::out_of_memory(std::size_t requested, std::string tier, std::size_t free_bytes,
                             std::string detail)
    : error("out of memory on tier " + tier + ": requested " + format_bytes(requested) + ", " +
            format_bytes(free_bytes) + " free" + (detail.empty() ? std::string{} : "; " + detail)),
      requested_(requested),
      tier_(std::move(tier)),
      free_(free_bytes) {}

std::string errno_text(int err) { return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")"; }

os_error::os_error(std::string call, int err) : error(call + " failed: " + errno_text(err)), errno_(err) {}

cuda_error::cuda_error(std::string call, int status, std::string status_name)
    : error(call + " failed: " + status_name + " (" + std::to_string(status) + ")"), status_(status) {}

namespace detail {
void throw_logic_error(const char* cond, const char* file, int line, const std::string& msg) {
  throw logic_error(msg + " [" + cond + " at " + file + ":" + std::to_string(line) + "]");
}
}  // namespace detail

}  // namespace tierpack

// The C++ API for LibTorch programs: link tierpack::torch (libtierpack_torch.so) and call enable()
// once at startup and step() after each training iteration. The same library works as an LD_PRELOAD
// for unmodified programs (`tierpack profile -- ./train`): it enables itself from $TIERPACK_CONF.
// No torch headers here: the library is the only place that includes them.
#pragma once

#include <string>

#define TIERPACK_TORCH_API __attribute__((visibility("default")))

namespace tierpack {

/// Enables tierpack in this process (idempotent). `conf` uses TIERPACK_CONF syntax; empty reads
/// $TIERPACK_CONF. Returns false, after printing why, when it could not be enabled or mode is off.
TIERPACK_TORCH_API bool enable(const std::string& conf = {});
/// Marks the end of a training iteration (optional with a torch optimizer in Python; C++ optimizers
/// give no boundary, so LibTorch programs should call it, or rely on periodicity detection).
TIERPACK_TORCH_API void step();
/// Writes the profile now and stops observing; also done at exit. Returns false if it could not be written.
TIERPACK_TORCH_API bool finish();

}  // namespace tierpack

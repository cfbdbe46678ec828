// The torch-facing hooks of libtierpack_torch.so, behind a header without torch types: the c10 CPU
// allocator and the global RecordFunction observer. torch_hooks.cpp is the only file of tierpack that
// includes torch headers (they compile slowly; keep it that way).
#pragma once

#include <string>

namespace tierpack {
class Session;
}

namespace tierpack::torch_hooks {

/// Installs tierpack's CPU allocator (c10::SetAllocator) and registers the global op observer
/// (at::addGlobalCallback, never removed). Once per process; `session` must live until exit.
void install(Session* session);
/// Disables the observer when the session no longer wants ops (steady state costs nothing), or
/// re-enables it when it does again.
void refresh_observer() noexcept;
/// "torch 1.13.0" (the headers this library was built with).
std::string torch_version();

}  // namespace tierpack::torch_hooks

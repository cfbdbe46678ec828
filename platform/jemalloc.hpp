// The jemalloc entry points tierpack calls (its host arenas and the profiling arena), from a
// libjemalloc that tierpack loads privately. See Note [jemalloc loaded privately] in jemalloc.cpp.
#pragma once

#include <cstddef>
#include <string>

#include <jemalloc/jemalloc.h>  // MALLOCX_* flags and extent_hooks_t only: nothing here links jemalloc

namespace tierpack::platform::jemalloc {

/// Whether libjemalloc could be loaded; otherwise load_error() says why (callers throw it before their
/// first arena), every allocation returns nullptr and mallctl() returns ENOSYS.
bool available() noexcept;
const std::string& load_error() noexcept;

void* mallocx(std::size_t size, int flags) noexcept;
void sdallocx(void* p, std::size_t size, int flags) noexcept;
void dallocx(void* p, int flags) noexcept;
std::size_t nallocx(std::size_t size, int flags) noexcept;
std::size_t sallocx(const void* p, int flags) noexcept;
int mallctl(const char* name, void* oldp, std::size_t* oldlenp, void* newp, std::size_t newlen) noexcept;

}  // namespace tierpack::platform::jemalloc

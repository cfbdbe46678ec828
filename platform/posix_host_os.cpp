// Mappings, protection, mlock and madvise for both HostOs variants (see detail/posix_host_os.hpp):
// one system call per function, errno returned (Note [Host OS layer preconditions]).
#include "platform/detail/posix_host_os.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

namespace tierpack::host::detail {
namespace {

int mapping(std::size_t bytes, int prot, void** out) noexcept {
  void* p = ::mmap(nullptr, bytes, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return errno;
  *out = p;
  return 0;
}

}  // namespace

PosixHostOs::PosixHostOs() noexcept {
  const long s = ::sysconf(_SC_PAGESIZE);
  if (s > 0) page_ = static_cast<std::size_t>(s);
}

int PosixHostOs::map(std::size_t bytes, void** out) noexcept { return mapping(bytes, PROT_READ | PROT_WRITE, out); }

int PosixHostOs::reserve(std::size_t bytes, void** out) noexcept { return mapping(bytes, PROT_NONE, out); }

int PosixHostOs::commit(void* addr, std::size_t bytes) noexcept {
  return ::mprotect(addr, bytes, PROT_READ | PROT_WRITE) == 0 ? 0 : errno;
}

int PosixHostOs::unmap(void* addr, std::size_t bytes) noexcept { return ::munmap(addr, bytes) == 0 ? 0 : errno; }

int PosixHostOs::lock(void* addr, std::size_t bytes) noexcept { return ::mlock(addr, bytes) == 0 ? 0 : errno; }

int PosixHostOs::purge(void* addr, std::size_t bytes, bool lazy) noexcept {
  return ::madvise(addr, bytes, lazy ? MADV_FREE : MADV_DONTNEED) == 0 ? 0 : errno;
}

int PosixHostOs::advise_huge(void* addr, std::size_t bytes, bool huge) noexcept {
  return ::madvise(addr, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) == 0 ? 0 : errno;
}

}  // namespace tierpack::host::detail

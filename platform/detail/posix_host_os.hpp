// PosixHostOs: the part of HostOs that needs no NUMA library (page size, mappings, reservations,
// protection, mlock, madvise), shared by the libnuma variant (host_os_numa.cpp) and the one-node
// variant (host_os_single_node.cpp), which add the node calls. See Note [Host OS layer preconditions].
#pragma once

#include "platform/host_os.hpp"

namespace tierpack::host::detail {

class PosixHostOs : public HostOs {
 public:
  PosixHostOs() noexcept;

  std::size_t page_size() const noexcept final { return page_; }
  int map(std::size_t bytes, void** out) noexcept final;
  int reserve(std::size_t bytes, void** out) noexcept final;
  int commit(void* addr, std::size_t bytes) noexcept final;
  int unmap(void* addr, std::size_t bytes) noexcept final;
  int lock(void* addr, std::size_t bytes) noexcept final;
  int purge(void* addr, std::size_t bytes, bool lazy) noexcept final;
  int advise_huge(void* addr, std::size_t bytes, bool huge) noexcept final;

 private:
  std::size_t page_ = 4096;
};

}  // namespace tierpack::host::detail

// Differences between the torch versions tierpack builds against (Debian's 1.13, pip 2.x), in one
// place so the hooks have no version #ifs in their logic.
//   - c10::Allocator::allocate is const in 1.x and non-const since 2.3;
//   - c10::Allocator::copy_data is pure virtual since 2.3.
#pragma once

#include <torch/version.h>

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define TIERPACK_ALLOCATE_CONST
#define TIERPACK_ALLOCATOR_COPY_DATA                                              \
  void copy_data(void* dest, const void* src, std::size_t count) const override { \
    default_copy_data(dest, src, count);                                          \
  }
#else
#define TIERPACK_ALLOCATE_CONST const
#define TIERPACK_ALLOCATOR_COPY_DATA
#endif

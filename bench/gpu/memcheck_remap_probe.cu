// Does compute-sanitizer's memcheck judge a kernel's accesses against the mappings of its launch, not of the time it
// runs? (Yes, case 8 below.) The VMM mechanism's gate (Note [Remap gate]) holds a stream with a stream-ordered wait while a chunk's
// virtual range is unmapped and mapped to another physical handle; kernels queued behind the gate were launched
// while the old mapping stood and run after the new one is in place. GroupMoverTest/cuda.HiddenKernelDuring-
// MovesNeverFaults passes on the H200 and memcheck reports "Invalid __global__ read ... out of bounds" in it.
//
// This program does that one remap without tierpack: a reader kernel is launched on stream `s` behind an event of a
// spin kernel on stream `t`; while the spin kernel runs the host unmaps handle A from the range and maps handle B
// (filled with another pattern) there; then the reader runs. Its accesses are legal (B is mapped, with access, when
// it runs) and it must read B's pattern. A second case launches the reader only after the remap (the control). A
// third does what the gate does (Note [CUDA remap gate]): the reader waits behind a stream wait on a word in mapped
// pinned host memory; another host thread remaps back to A and then writes the word. Memcheck may make a launch
// return only once its kernel has run (case 1 shows whether it does), so here the remap cannot wait for the launch.
// A fourth maps no device memory at all: a chunk of host memory (a HOST_NUMA handle, as tierpack's VMM mechanism
// maps an evicted chunk, read in place over PCIe) filled and read by kernels with no remap in between.
// A fifth is case 3 with an eviction's remap, from a device handle to a host one (both hold the pattern first).
// A sixth closes the gate as CudaVmmBackend::close_gate does, behind a long reader already queued: an event, then one
// cuStreamBatchMemOp that writes a `reached` word and waits for a `release` word; the host remaps once `reached` is
// written and the event is done, and says whether the reader had finished when `reached` was written.
// A seventh maps two handles twice each, at shadow addresses and by turns at a chunk's (as migrate/gpu/handle_pool.hpp
// does), 40 cycles. An eighth launches the reader while the chunk's range is unmapped, behind a host-word wait, and
// maps it from another thread before opening the wait (a kernel reaching a closed gate inside a remap's window).
// Exit 0 when the reader read the pattern mapped when it ran in every case; run it with and without
// `compute-sanitizer --tool memcheck`. Cases 1-6 ran in bench/results/gpu-h200-2026-12-07-1 (calls 1-5: clean under
// memcheck), case 7 in gpu-h200-2026-12-08-1 (call 1: clean). Case 8 (call 2) reads right without the sanitizer and
// under memcheck gets GroupMoverTest/cuda.HiddenKernelDuringMovesNeverFaults's report ("out of bounds and is inside
// the nearest allocation") and is aborted: memcheck judges a kernel by the mappings at its launch, which is what the
// test's errors are. Build: CMake target memcheck_remap_probe (CUDA builds only).
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace {

#define CHECK_DRV(x)                                                               \
  do {                                                                             \
    CUresult r_ = (x);                                                             \
    if (r_ != CUDA_SUCCESS) {                                                      \
      const char* s_ = nullptr;                                                    \
      cuGetErrorString(r_, &s_);                                                   \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_ ? s_ : "?"); \
      std::exit(2);                                                                \
    }                                                                              \
  } while (0)

__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

__global__ void fill(unsigned* p, std::size_t n, unsigned v) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x)
    p[i] = v;
}

// Counts the words that are not `v`.
__global__ void read_check(const unsigned* p, std::size_t n, unsigned v, unsigned long long* bad) {
  unsigned long long local = 0;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x)
    local += p[i] != v;
  if (local) atomicAdd(bad, local);
}

void map_with_access(CUdeviceptr va, std::size_t size, CUmemGenericAllocationHandle h, int dev) {
  CHECK_DRV(cuMemMap(va, size, 0, h, 0));
  CUmemAccessDesc acc{};
  acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  acc.location.id = dev;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CHECK_DRV(cuMemSetAccess(va, size, &acc, 1));
}

// A thread that, 300 ms from now, maps `h` at `va` in place of what is there and then writes 1 to `word` (what a
// stream waits for: the gate's release).
// Stream `s` waits (cuStreamWaitValue32) until the host writes 1 to the returned word of mapped pinned memory, as
// tierpack's gate waits; *mem is what to free with cuMemFreeHost.
volatile unsigned* wait_for_host_word(cudaStream_t s, void** mem) {
  CHECK_DRV(cuMemHostAlloc(mem, sizeof(unsigned), CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
  auto* word = static_cast<volatile unsigned*>(*mem);
  *word = 0;
  CUdeviceptr word_dev = 0;
  CHECK_DRV(cuMemHostGetDevicePointer(&word_dev, *mem, 0));
  CHECK_DRV(cuStreamWaitValue32(reinterpret_cast<CUstream>(s), word_dev, 1, CU_STREAM_WAIT_VALUE_GEQ));
  return word;
}

std::thread remap_then_open(CUdeviceptr va, std::size_t size, CUmemGenericAllocationHandle h, CUdevice dev,
                            volatile unsigned* word) {
  return std::thread([=] {
    CUcontext ctx = nullptr;
    CHECK_DRV(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK_DRV(cuCtxSetCurrent(ctx));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK_DRV(cuMemUnmap(va, size));
    map_with_access(va, size, h, dev);
    __atomic_store_n(const_cast<unsigned*>(word), 1u, __ATOMIC_SEQ_CST);
    CHECK_DRV(cuDevicePrimaryCtxRelease(dev));
  });
}

}  // namespace

int main() {
  CHECK_DRV(cuInit(0));
  cudaFree(nullptr);  // the runtime's primary context
  CUdevice dev = 0;
  CHECK_DRV(cuCtxGetDevice(&dev));
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  std::size_t gran = 0;
  CHECK_DRV(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  const std::size_t size = gran;  // one chunk, 2 MiB on the H200 (the size memcheck named)
  const std::size_t words = size / sizeof(unsigned);
  CUmemGenericAllocationHandle a = 0, b = 0;
  CHECK_DRV(cuMemCreate(&a, size, &prop, 0));
  CHECK_DRV(cuMemCreate(&b, size, &prop, 0));
  CUdeviceptr va = 0, vb = 0;
  CHECK_DRV(cuMemAddressReserve(&va, size, 0, 0, 0));
  CHECK_DRV(cuMemAddressReserve(&vb, size, 0, 0, 0));
  // B gets its pattern through a range of its own, so its contents are there before it moves under `va`.
  map_with_access(vb, size, b, dev);
  fill<<<64, 256>>>(reinterpret_cast<unsigned*>(vb), words, 0xB0B0B0B0u);
  map_with_access(va, size, a, dev);
  fill<<<64, 256>>>(reinterpret_cast<unsigned*>(va), words, 0xA0A0A0A0u);
  if (cudaDeviceSynchronize() != cudaSuccess) return 2;
  CHECK_DRV(cuMemUnmap(vb, size));

  unsigned long long* bad = nullptr;
  if (cudaMallocManaged(&bad, 5 * sizeof(unsigned long long)) != cudaSuccess) return 2;
  bad[0] = bad[1] = bad[2] = bad[3] = bad[4] = 0;
  cudaStream_t s = nullptr, t = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking);
  cudaEvent_t gate = nullptr;
  cudaEventCreateWithFlags(&gate, cudaEventDisableTiming);

  // Case 1, the gate: the reader is launched while A is mapped and runs after B is.
  spin<<<1, 1, 0, t>>>(2000LL * 1000 * 1000);  // about a second at the H200's clock
  cudaEventRecord(gate, t);
  cudaStreamWaitEvent(s, gate, 0);
  read_check<<<64, 256, 0, s>>>(reinterpret_cast<const unsigned*>(va), words, 0xB0B0B0B0u, &bad[0]);
  if (cudaStreamQuery(t) != cudaErrorNotReady) std::printf("warning: the spin kernel ended before the remap\n");
  CHECK_DRV(cuMemUnmap(va, size));
  map_with_access(va, size, b, dev);
  const bool spin_still_running = cudaStreamQuery(t) == cudaErrorNotReady;
  if (cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("case 1 (reader launched before the remap, run after it): CUDA error %s\n",
                cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  // Case 2, the control: the reader is launched after the remap.
  read_check<<<64, 256, 0, s>>>(reinterpret_cast<const unsigned*>(va), words, 0xB0B0B0B0u, &bad[1]);
  if (cudaDeviceSynchronize() != cudaSuccess) return 2;
  std::printf("case 1 (reader launched before the remap, run after it; spin kernel still running when the remap "
              "was done: %s): %llu of %zu words not B's\n",
              spin_still_running ? "yes" : "NO", bad[0], words);
  std::printf("case 2 (reader launched after the remap): %llu of %zu words not B's\n", bad[1], words);

  // Case 3, the gate as tierpack closes it: a wait on a host word; a second thread remaps to A, then opens it.
  void* words_host = nullptr;
  volatile unsigned* release = wait_for_host_word(s, &words_host);
  std::thread remapper = remap_then_open(va, size, a, dev, release);
  const auto launched = std::chrono::steady_clock::now();
  read_check<<<64, 256, 0, s>>>(reinterpret_cast<const unsigned*>(va), words, 0xA0A0A0A0u, &bad[2]);
  const double launch_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - launched).count();
  remapper.join();
  if (cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("case 3 (reader behind a host-word wait, remapped by another thread): CUDA error %s\n",
                cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  std::printf("case 3 (reader behind a host-word wait while another thread remaps to A; the launch returned after "
              "%.1f ms, the remap began at 300 ms): %llu of %zu words not A's\n", launch_ms, bad[2], words);
  cuMemFreeHost(words_host);

  // Case 4: host memory mapped for the device (tierpack's evicted chunks), written and read by kernels.
  int host_numa = 0, numa_id = 0;
  cuDeviceGetAttribute(&host_numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
  if (cuDeviceGetAttribute(&numa_id, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev) != CUDA_SUCCESS || numa_id < 0) numa_id = 0;
  bad[3] = 0;
  CUmemGenericAllocationHandle host_handle = 0;
  if (host_numa) {
    CUmemAllocationProp hp{};
    hp.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    hp.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    hp.location.id = numa_id;
    CUmemGenericAllocationHandle h = 0;
    CHECK_DRV(cuMemCreate(&h, size, &hp, 0));
    host_handle = h;
    CUdeviceptr vh = 0;
    CHECK_DRV(cuMemAddressReserve(&vh, size, 0, 0, 0));
    map_with_access(vh, size, h, dev);
    fill<<<64, 256, 0, s>>>(reinterpret_cast<unsigned*>(vh), words, 0xC0C0C0C0u);
    read_check<<<64, 256, 0, s>>>(reinterpret_cast<const unsigned*>(vh), words, 0xC0C0C0C0u, &bad[3]);
    if (cudaDeviceSynchronize() != cudaSuccess) {
      std::printf("case 4 (host memory mapped for the device): CUDA error %s\n", cudaGetErrorString(cudaGetLastError()));
      return 1;
    }
    std::printf("case 4 (a HOST_NUMA chunk of node %d mapped for the device, filled and read by kernels): %llu of %zu "
                "words not its pattern\n", numa_id, bad[3], words);
    // Case 5: `va` (device handle A) is remapped to the host handle behind a host-word wait, as an eviction.
    CHECK_DRV(cuMemUnmap(vh, size));
    fill<<<64, 256, 0, s>>>(reinterpret_cast<unsigned*>(va), words, 0xC0C0C0C0u);  // A gets the host's pattern
    if (cudaDeviceSynchronize() != cudaSuccess) return 2;
    void* word5 = nullptr;
    bad[4] = 0;
    volatile unsigned* open5 = wait_for_host_word(s, &word5);
    std::thread evictor = remap_then_open(va, size, h, dev, open5);
    read_check<<<64, 256, 0, s>>>(reinterpret_cast<const unsigned*>(va), words, 0xC0C0C0C0u, &bad[4]);
    evictor.join();
    if (cudaDeviceSynchronize() != cudaSuccess) {
      std::printf("case 5 (device chunk remapped to host memory behind a host-word wait): CUDA error %s\n",
                  cudaGetErrorString(cudaGetLastError()));
      return 1;
    }
    std::printf("case 5 (the reader behind a host-word wait while another thread remaps the range from device to host "
                "memory): %llu of %zu words not the pattern\n", bad[4], words);
    cuMemFreeHost(word5);
    CHECK_DRV(cuMemAddressFree(vh, size));
  } else {
    std::printf("case 4: this device cannot map HOST_NUMA memory (not run)\n");
  }
  // Case 6: the gate behind a long reader (`va` maps host memory now when host_numa, else A): remap to B.
  {
    void* gw = nullptr;
    CHECK_DRV(cuMemHostAlloc(&gw, 2 * sizeof(unsigned), CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    auto* word = static_cast<volatile unsigned*>(gw);
    word[0] = word[1] = 0;
    CUdeviceptr gw_dev = 0;
    CHECK_DRV(cuMemHostGetDevicePointer(&gw_dev, gw, 0));
    const unsigned expect = host_numa ? 0xC0C0C0C0u : 0xA0A0A0A0u;
    unsigned long long* bad6 = nullptr;
    if (cudaMallocManaged(&bad6, 2 * sizeof(unsigned long long)) != cudaSuccess) return 2;
    bad6[0] = bad6[1] = 0;
    for (int r = 0; r < 200; ++r)  // the long reader: 200 passes over the chunk, queued before the gate
      read_check<<<8, 256, 0, s>>>(reinterpret_cast<const unsigned*>(va), words, expect, &bad6[0]);
    cudaEvent_t before = nullptr;
    cudaEventCreateWithFlags(&before, cudaEventDisableTiming);
    cudaEventRecord(before, s);
    CUstreamBatchMemOpParams ops[2] = {};
    ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[0].writeValue.address = gw_dev;
    ops[0].writeValue.value = 1;
    ops[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    ops[1].waitValue.address = gw_dev + sizeof(unsigned);
    ops[1].waitValue.value = 1;
    ops[1].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
    CHECK_DRV(cuStreamBatchMemOp(reinterpret_cast<CUstream>(s), 2, ops, 0));
    read_check<<<64, 256, 0, s>>>(reinterpret_cast<const unsigned*>(va), words, 0xB0B0B0B0u, &bad6[1]);  // after it
    const auto t0 = std::chrono::steady_clock::now();
    while (__atomic_load_n(const_cast<unsigned*>(&word[0]), __ATOMIC_ACQUIRE) != 1) {
      if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(60)) {
        std::printf("case 6: the gate was not reached in 60 s\n");
        return 1;
      }
    }
    const bool reader_done_at_reached = cudaEventQuery(before) == cudaSuccess;
    while (cudaEventQuery(before) != cudaSuccess) {
      if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(60)) {
        std::printf("case 6: the readers before the gate did not end in 60 s\n");
        return 1;
      }
    }
    CHECK_DRV(cuMemUnmap(va, size));
    map_with_access(va, size, b, dev);
    __atomic_store_n(const_cast<unsigned*>(&word[1]), 1u, __ATOMIC_SEQ_CST);
    if (cudaDeviceSynchronize() != cudaSuccess) {
      std::printf("case 6 (the gate behind a long reader): CUDA error %s\n", cudaGetErrorString(cudaGetLastError()));
      return 1;
    }
    std::printf("case 6 (the gate as close_gate closes it, behind 200 queued readers; the readers were done when "
                "`reached` was written: %s): %llu words read wrong before the gate, %llu after it\n",
                reader_done_at_reached ? "yes" : "NO", bad6[0], bad6[1]);
    bad[4] += bad6[0] + bad6[1] + (reader_done_at_reached ? 0 : 1);
    cudaFree(bad6);
    cuMemFreeHost(gw);
  }
  // Case 7: handles mapped twice (a shadow and the chunk's address), taking turns at the chunk's address.
  {
    CUmemGenericAllocationHandle x = 0, y = 0;
    CHECK_DRV(cuMemCreate(&x, size, &prop, 0));
    CHECK_DRV(cuMemCreate(&y, size, &prop, 0));
    CUdeviceptr shadow = 0, chunk = 0;
    CHECK_DRV(cuMemAddressReserve(&shadow, 2 * size, 0, 0, 0));
    CHECK_DRV(cuMemAddressReserve(&chunk, size, 0, 0, 0));
    map_with_access(shadow, size, x, dev);
    map_with_access(shadow + size, size, y, dev);
    fill<<<64, 256>>>(reinterpret_cast<unsigned*>(shadow), words, 0xD0D0D0D0u);
    fill<<<64, 256>>>(reinterpret_cast<unsigned*>(shadow + size), words, 0xE0E0E0E0u);
    unsigned long long* bad7 = nullptr;
    if (cudaMallocManaged(&bad7, sizeof(unsigned long long)) != cudaSuccess) return 2;
    *bad7 = 0;
    int cycles = 0;
    for (; cycles < 40; ++cycles) {
      const bool even = cycles % 2 == 0;
      map_with_access(chunk, size, even ? x : y, dev);
      read_check<<<64, 256, 0, s>>>(reinterpret_cast<const unsigned*>(chunk), words, even ? 0xD0D0D0D0u : 0xE0E0E0E0u,
                                    bad7);
      if (cudaStreamSynchronize(s) != cudaSuccess) {
        std::printf("case 7 (handles mapped twice): CUDA error %s at cycle %d\n", cudaGetErrorString(cudaGetLastError()),
                    cycles);
        return 1;
      }
      CHECK_DRV(cuMemUnmap(chunk, size));
    }
    std::printf("case 7 (two handles, each mapped at a shadow address, taking turns at a chunk's address for %d "
                "cycles): %llu words read wrong\n", cycles, *bad7);
    bad[4] += *bad7;
    // Case 8: a reader launched while the chunk's range is unmapped (behind a host-word wait, as a kernel reaching a
    // closed gate between a remap's unmap and its map); another thread maps handle x there, then opens the wait.
    {
      void* wh = nullptr;
      *bad7 = 0;
      volatile unsigned* go = wait_for_host_word(s, &wh);
      std::thread mapper([=] {
        CUcontext ctx = nullptr;
        CHECK_DRV(cuDevicePrimaryCtxRetain(&ctx, dev));
        CHECK_DRV(cuCtxSetCurrent(ctx));
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        map_with_access(chunk, size, x, dev);
        __atomic_store_n(const_cast<unsigned*>(go), 1u, __ATOMIC_SEQ_CST);
        CHECK_DRV(cuDevicePrimaryCtxRelease(dev));
      });
      read_check<<<64, 256, 0, s>>>(reinterpret_cast<const unsigned*>(chunk), words, 0xD0D0D0D0u, bad7);
      mapper.join();
      if (cudaStreamSynchronize(s) != cudaSuccess) {
        std::printf("case 8 (a reader launched while its range was unmapped): CUDA error %s\n",
                    cudaGetErrorString(cudaGetLastError()));
        return 1;
      }
      std::printf("case 8 (a reader launched while its range was unmapped, the range mapped before it ran): %llu words "
                  "read wrong\n", *bad7);
      bad[4] += *bad7;
      CHECK_DRV(cuMemUnmap(chunk, size));
      cuMemFreeHost(wh);
    }
    cudaFree(bad7);
    CHECK_DRV(cuMemUnmap(shadow, size));
    CHECK_DRV(cuMemUnmap(shadow + size, size));
    CHECK_DRV(cuMemAddressFree(shadow, 2 * size));
    CHECK_DRV(cuMemAddressFree(chunk, size));
    CHECK_DRV(cuMemRelease(x));
    CHECK_DRV(cuMemRelease(y));
  }
  const int rc = (bad[0] == 0 && bad[1] == 0 && bad[2] == 0 && bad[3] == 0 && bad[4] == 0 && spin_still_running) ? 0 : 1;
  CHECK_DRV(cuMemUnmap(va, size));
  if (host_numa) CHECK_DRV(cuMemRelease(host_handle));
  CHECK_DRV(cuMemAddressFree(va, size));
  CHECK_DRV(cuMemAddressFree(vb, size));
  CHECK_DRV(cuMemRelease(a));
  CHECK_DRV(cuMemRelease(b));
  cudaFree(bad);
  std::printf("%s\n", rc == 0 ? "PASS: the reader read the mapping in place when it ran" : "FAIL");
  return rc;
}

// memory_snapshot.json / .pickle: the profiled iteration's tensors as a PyTorch CUDA memory snapshot
// (the dictionary torch.cuda.memory._snapshot() returns: "segments" with their blocks, and
// "device_traces" with alloc / free_requested / free_completed entries per device), so the tools
// built for that schema, above all pytorch.org/memory_viz, show a tierpack profile. Tier and class
// travel under extra keys. See Note [Memory snapshot from a profile].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "report/summary.hpp"

namespace tierpack::report {

struct SnapshotBlock {
  std::uint64_t address = 0, size = 0, requested_size = 0;
  bool active = false;
  std::int64_t tensor = -1;
};

struct SnapshotSegment {
  int device = 0;  ///< index into device_traces
  std::uint64_t address = 0, total_size = 0;
  std::string tier;
  std::vector<SnapshotBlock> blocks;  ///< tile [address, address + total_size) in order
};

struct SnapshotEntry {
  enum Action : std::uint8_t { alloc, free_requested, free_completed, snapshot } action = alloc;
  std::uint64_t addr = 0, size = 0;
  std::uint64_t stream = 0;
  std::int64_t time_us = 0;
  std::int64_t tensor = -1;
};

struct SnapshotDevice {
  int index = 0;          ///< position in device_traces
  int device = -1;        ///< profile device (-1 host)
  std::string name;
  bool synthetic_addresses = false;  ///< profiled addresses missing or overlapping: a laid-out address space
  std::vector<SnapshotEntry> trace;
};

struct MemorySnapshot {
  std::vector<SnapshotSegment> segments;
  std::vector<SnapshotDevice> devices;  ///< by index
  /// Byte address of each tensor in the snapshot (profiled or laid out), by TensorId.
  std::vector<std::uint64_t> address;
};

MemorySnapshot build_snapshot(const ReportModel& model);
/// JSON text of the snapshot (memory_snapshot.json).
std::string snapshot_json(const ReportModel& model, const MemorySnapshot& snap);
/// The same dictionary as a pickle (memory_snapshot.pickle), which memory_viz loads.
std::string snapshot_pickle(const ReportModel& model, const MemorySnapshot& snap);
/// Streams the JSON (or, with `pickle`, the pickle) into `path` atomically; returns its size.
std::uint64_t write_snapshot_file(const ReportModel& model, const MemorySnapshot& snap, const std::string& path, bool pickle);

}  // namespace tierpack::report

// A small builder for hand-made profiles in the placer tests: ops of a fixed duration one after the
// other, tensors given by birth, death and uses; op inputs and outputs are filled in from the uses.
#pragma once

#include <string>
#include <vector>

#include "core/profile.hpp"
#include "core/tier_spec.hpp"

namespace tierpack::test {

class HandProfile {
 public:
  HandProfile(int n_ops, int device = -1, std::uint64_t op_ns = 1'000'000, std::uint64_t gap_ns = 0) : device_(device) {
    for (int i = 0; i < n_ops; ++i) {
      OpRecord op;
      op.index = i;
      op.name = "op" + std::to_string(i);
      op.begin_ns = static_cast<std::uint64_t>(i) * (op_ns + gap_ns);
      op.end_ns = op.begin_ns + op_ns;
      op.phase = i < n_ops / 2 ? Phase::forward : Phase::backward;
      p_.ops.push_back(op);
    }
    p_.iteration_ns = static_cast<std::uint64_t>(n_ops) * (op_ns + gap_ns);
    p_.meta.command = "hand-made";
  }

  /// A tensor; birth kBeforeIteration makes it pre-existing (seq -1), death kAfterIteration keeps it.
  TensorId tensor(std::uint64_t bytes, OpIndex birth, OpIndex death, std::vector<OpIndex> uses, std::uint32_t flags = 0) {
    TensorRecord t;
    t.id = static_cast<TensorId>(p_.tensors.size());
    t.bytes = bytes;
    t.device = device_;
    t.birth_op = birth;
    t.death_op = death;
    t.seq = birth == kBeforeIteration ? -1 : seq_++;
    t.address = next_address_;
    next_address_ += (bytes + 511) / 512 * 512;  // packed like a caching allocator
    t.uses = std::move(uses);
    t.flags = flags;
    p_.tensors.push_back(t);
    return t.id;
  }

  Profile done() {
    for (const auto& t : p_.tensors)
      for (auto u : t.uses) {
        auto& op = p_.ops[static_cast<std::size_t>(u)];
        (u == t.birth_op ? op.outputs : op.inputs).push_back(t.id);
      }
    p_.validate();
    return p_;
  }

 private:
  Profile p_;
  int device_;
  std::int64_t seq_ = 0;
  std::uint64_t next_address_ = 0x100000;
};

/// dram (fast) + cxl (slow) at `gbps` GB/s, half duplex, 4 KiB pages.
inline TierModel host_model(double gbps = 10) {
  return parse_tier_spec("dram:64G,cxl:256G@+80ns/" + std::to_string(static_cast<int>(gbps)) + "GB/s");
}

}  // namespace tierpack::test

// The real-nodes replayer on this machine (one node in CI; the guest test runs the rest): the
// workload it derives from a profile, every tensor allocated and freed once per iteration through
// the policy, residency sampled. The balloon, which pins most of a node, runs only in the guest
// (numa.experiment).
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "experiment/host_replayer.hpp"
#include "experiment/node_policy.hpp"
#include "tests/support/synthetic_profile.hpp"

using namespace tierpack;
using namespace tierpack::experiment;

namespace {

Profile small_host_profile() {
  synth::SyntheticOptions o;
  o.tensors = 120;
  o.device = -1;
  o.activation_bytes = 64 << 10;
  o.param_bytes = 32 << 10;
  return synth::make_synthetic_profile(o);
}

// Counts what the replayer asks for; memory from the local node.
class CountingPlacement final : public Placement {
 public:
  void* allocate(std::size_t bytes) override {
    ++allocs;
    void* p = map_with_policy(bytes, NodePolicy::local, {});
    live[p] = bytes;
    return p;
  }
  void deallocate(void* p, std::size_t bytes) noexcept override {
    ++frees;
    if (live.count(p) && live[p] == bytes) live.erase(p);
    else ++bad_frees;
    unmap(p, bytes);
  }
  void begin_iteration() override { ++iterations; }
  void op_begin(OpIndex) override { ++ops; }
  int allocs = 0, frees = 0, bad_frees = 0, iterations = 0, ops = 0;
  std::map<void*, std::size_t> live;
};

}  // namespace

TEST(HostReplayer, WorkloadFollowsTheProfile) {
  const Profile p = small_host_profile();
  const ReplayWorkload w = make_replay_workload(p, -1);
  std::size_t host = 0;
  for (const auto& t : p.tensors) host += t.device == -1 && t.bytes > 0;
  EXPECT_EQ(w.tensors.size(), host);
  EXPECT_EQ(w.before.size() + w.in_iteration.size(), w.tensors.size());
  EXPECT_EQ(w.births.size(), p.ops.size());
  EXPECT_EQ(w.peak_bytes, p.peak_bytes(-1));
  std::size_t born = 0;
  for (const auto& b : w.births) born += b.size();
  EXPECT_EQ(born, w.in_iteration.size());
  // Allocation order within the iteration follows birth op then sequence position.
  for (std::size_t i = 1; i < w.in_iteration.size(); ++i) {
    const auto &a = p.tensors[w.tensors[w.in_iteration[i - 1]].id], &b = p.tensors[w.tensors[w.in_iteration[i]].id];
    EXPECT_LE(std::tuple(a.birth_op, a.seq), std::tuple(b.birth_op, b.seq));
  }
  EXPECT_TRUE(make_replay_workload(p, 3).tensors.empty()) << "no tensors of another device";
}

TEST(HostReplayer, EveryTensorIsAllocatedAndFreedOncePerIteration) {
  const Profile p = small_host_profile();
  const ReplayWorkload w = make_replay_workload(p, -1);
  CountingPlacement c;
  ReplayRunOptions o;
  o.iterations = 3;
  o.fast_node = 0;
  o.slow_node = 1;
  std::size_t setup_seen = 0;
  o.after_setup = [&](const std::vector<void*>& by_id) {
    for (void* a : by_id) setup_seen += a != nullptr;
  };
  const ReplayRunStats s = replay_on_nodes(w, c, o);
  EXPECT_EQ(setup_seen, w.before.size());
  EXPECT_EQ(c.iterations, 3);
  EXPECT_EQ(c.ops, 3 * static_cast<int>(p.ops.size()));
  EXPECT_EQ(c.allocs, static_cast<int>(w.before.size() + 3 * w.in_iteration.size()));
  EXPECT_EQ(c.frees, c.allocs);
  EXPECT_EQ(c.bad_frees, 0);
  EXPECT_TRUE(c.live.empty());
  EXPECT_EQ(s.iterations, 2) << "the first iteration is a warm-up";
  EXPECT_GT(s.step_ns, 0);
  // Residency: every touched page is somewhere; on a one-node machine all on node 0.
  EXPECT_GT(s.fast_peak_bytes + s.slow_peak_bytes, 0u);
  if (memory_nodes().size() == 1) {
    EXPECT_EQ(s.slow_peak_bytes, 0u);
  }
}

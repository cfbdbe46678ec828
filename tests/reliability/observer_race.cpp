// A LibTorch program for issue 9, guarantee 8: the op observer is switched off and tierpack is
// finished while other threads keep running ops (removing or disabling RecordFunction callbacks while
// other threads run ops is a known PyTorch pitfall). Four threads run ops in user scopes for the
// whole run; the main thread marks iterations, so the recorder stops wanting ops after the recorded
// iteration (the observer is swapped for the step observer under the running threads), then calls
// tierpack::finish() with the threads still running, lets them run on, and exits. Exit status 0
// and a readable profile are the test (reliability.torch_observer_race); ASan/TSan builds with torch
// run it under the sanitizers.
//   observer_race OUT.tpk
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "integrations/torch/tierpack_torch.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: observer_race OUT.tpk\n");
    return 2;
  }
  if (!tierpack::enable("mode:profile,profile_out:" + std::string(argv[1]) +
                        ",warmup_iterations:1,page_tracer:off,log:quiet"))
    return 1;
  at::set_num_threads(1);
  std::atomic<bool> stop{false};
  std::atomic<long> ops{0};
  auto worker = [&](int id) {
    at::Tensor x = at::full({256}, static_cast<double>(id), at::kDouble);
    while (!stop.load(std::memory_order_relaxed)) {
      RECORD_USER_SCOPE("tp.worker");
      at::Tensor y = x + 1.0;
      y.mul_(2.0);
      ops.fetch_add(1, std::memory_order_relaxed);
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back(worker, i);

  at::Tensor w = at::ones({1000}, at::kDouble);
  for (int it = 0; it < 8; ++it) {
    const long seen = ops.load();
    {
      RECORD_USER_SCOPE("tp.main");
      at::Tensor a = w * 2.0;
      at::Tensor b = a + w;
    }
    while (ops.load() < seen + 200) std::this_thread::yield();  // the workers run ops in every phase
    tierpack::step();
  }
  const long before = ops.load();
  const bool finished = tierpack::finish();  // with the workers still running ops
  while (ops.load() < before + 2000) std::this_thread::yield();
  stop = true;
  for (auto& t : threads) t.join();
  std::printf("observer_race: %ld ops on 4 threads, finish %s\n", ops.load(), finished ? "ok" : "failed");
  return finished ? 0 : 1;
}

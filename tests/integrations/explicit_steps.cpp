// A LibTorch program that links tierpack and marks its own iterations (tierpack::enable/step/finish):
// the C++ twin of scripts/known_tensors.py, with the same known tensors, scopes and lifetimes.
//   explicit_steps OUT.tpk [page_tracer]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <cstdio>
#include <string>

#include "integrations/torch/tierpack_torch.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: explicit_steps OUT.tpk [page_tracer]\n");
    return 2;
  }
  const std::string tracer = argc > 2 ? argv[2] : "auto";
  if (!tierpack::enable("mode:profile,profile_out:" + std::string(argv[1]) + ",warmup_iterations:1,page_tracer:" + tracer))
    return 1;
  at::set_num_threads(1);
  at::Tensor w = at::full({1000}, 0.5, at::kDouble);
  at::Tensor keep = at::zeros({16}, at::kDouble);
  for (int it = 0; it < 3; ++it) {
    at::Tensor a, b, c, d;
    {
      RECORD_USER_SCOPE("tp.make_a");
      a = at::ones({3000}, at::kDouble);
    }
    {
      RECORD_USER_SCOPE("tp.make_b");
      b = at::empty({5000}, at::kDouble);
      b.fill_(2.0);
    }
    {
      RECORD_USER_SCOPE("tp.add");
      c = a.slice(0, 0, 1000) + b.slice(0, 1000, 2000) + w;
    }
    {
      RECORD_USER_SCOPE("tp.free_a");
      a.reset();
    }
    {
      RECORD_USER_SCOPE("tp.mul");
      d = c * 3.0;
    }
    {
      RECORD_USER_SCOPE("tp.free_bc");
      b.reset();
      c.reset();
    }
    {
      RECORD_USER_SCOPE("tp.keep");
      at::Tensor old = keep;
      keep = d.sum().reshape({1}).repeat({16});
      old.reset();
      d.reset();
    }
    tierpack::step();
  }
  std::printf("result %f\n", keep[0].item<double>());
  return tierpack::finish() ? 0 : 1;
}

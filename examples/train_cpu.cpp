// A small LibTorch training run (same idea as train_cpu.py): token embedding, one transformer
// encoder layer and an MLP head, AdamW, fixed seed, random data. A plain LibTorch program: tierpack
// reaches it through LD_PRELOAD with no code change, and finds iterations by the periodicity of its
// allocations (C++ optimizers have no Optimizer.step scope):
//
//     tierpack profile -o run.tpk -- build/bin/train_cpu [iterations] [truth.json]
//
// truth.json (optional): the parameter sizes, for tests.
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <string>

struct ModelImpl : torch::nn::Module {
  ModelImpl()
      : embed(register_module("embed", torch::nn::Embedding(256, 64))),
        block(register_module("block", torch::nn::TransformerEncoderLayer(
                                           torch::nn::TransformerEncoderLayerOptions(64, 4).dim_feedforward(128).dropout(0.0)))),
        fc1(register_module("fc1", torch::nn::Linear(64, 128))),
        fc2(register_module("fc2", torch::nn::Linear(128, 10))) {}

  torch::Tensor forward(const torch::Tensor& tokens) {
    auto x = embed(tokens).transpose(0, 1);  // (T, B, D): the 1.13 layer is sequence-first
    x = block(x).mean(0);
    return fc2(torch::relu(fc1(x)));
  }

  torch::nn::Embedding embed;
  torch::nn::TransformerEncoderLayer block;
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Model);

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::stoi(argv[1]) : 8;
  torch::manual_seed(0);
  torch::set_num_threads(1);
  Model model;
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(1e-3));
  auto gen = at::detail::createCPUGenerator(1);
  for (int it = 0; it < iterations; ++it) {
    auto tokens = torch::randint(0, 256, {16, 32}, gen, torch::kLong);
    auto labels = torch::randint(0, 10, {16}, gen, torch::kLong);
    opt.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model->forward(tokens), labels);
    loss.backward();
    opt.step();
    std::printf("iter %d loss %.6f\n", it, loss.item<double>());
  }
  if (argc > 2) {
    std::ofstream out(argv[2]);
    out << "{\"parameter_bytes\": [";
    bool first = true;
    for (const auto& p : model->parameters()) {
      out << (first ? "" : ", ") << p.numel() * static_cast<long>(p.element_size());
      first = false;
    }
    out << "]}\n";
  }
  return 0;
}

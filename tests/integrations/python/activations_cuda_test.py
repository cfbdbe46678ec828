"""python/tierpack/activations.py with its CUDA transport: copies on side streams, events, pinned memory.

Skipped without a CUDA device. With PyTorch's own caching allocator (the hooks do not need tierpack's):
a small transformer trained with bf16 autocast gives bit-identical losses and gradients with the hooks
as without, while every chosen activation is let go in forward and copied back in backward (some late,
some ahead). A wrong stream order (a copy back read before it landed, a block reused while its copy out
still reads it) shows up as different gradients.

Run: python3 tests/integrations/python/activations_cuda_test.py
"""
import os
import sys
import unittest

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # bitwise-repeatable matmuls (before CUDA starts)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tierpack.activations import ActivationOffloader  # noqa: E402
from tierpack.copy_streams import CudaTransport  # noqa: E402


def make_model(d=512, layers=6):
    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, 8, C // 8).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
            return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    return nn.Sequential(*[Block() for _ in range(layers)]).cuda()


def train(iterations, off=None):
    # Bitwise-repeatable kernels: flash attention's deterministic backward needs warn_only=False, and
    # cuDNN attention has none (as in bench/gpu/gpt2_bench.py --deterministic).
    torch.use_deterministic_algorithms(True, warn_only=False)
    torch.backends.cuda.enable_cudnn_sdp(False)
    model = make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator(device="cuda").manual_seed(3)
    xs = [torch.randn(8, 512, 512, device="cuda", generator=g) for _ in range(iterations)]
    losses = []
    for it in range(iterations):
        torch.cuda.reset_peak_memory_stats()  # the offloader reads each iteration's peak
        opt.zero_grad(set_to_none=True)
        ctx = torch.autograd.graph.saved_tensors_hooks(off.pack, off.unpack) if off else None
        if ctx:
            ctx.__enter__()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(xs[it]).float().pow(2).mean()
        if ctx:
            ctx.__exit__(None, None, None)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if off:
            off.iteration_end(opt)
    torch.cuda.synchronize()
    return losses, [p.grad.clone() for p in model.parameters()]


@unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
class CudaActivationOffloadTest(unittest.TestCase):
    def run_with(self, live, limit=lambda d: 1 << 20):
        plain = train(6)
        off = ActivationOffloader(torch, lambda dev: CudaTransport(torch, dev), live_bytes=live,
                                  peak_bytes=lambda d: torch.cuda.max_memory_allocated(d), limit_bytes=limit,
                                  record_iteration=2, log=lambda m: None)
        hooked = train(6, off)
        self.assertEqual(plain[0], hooked[0])
        for a, b in zip(plain[1], hooked[1]):
            self.assertTrue(torch.equal(a, b))
        self.assertEqual(len(off.history), 4)
        return off

    def test_every_activation_let_go_and_copied_back_late(self):
        off = self.run_with(lambda d: 1 << 40)
        for c in off.history:
            self.assertGreater(c["released_bytes"], 0)
            self.assertEqual(c["to_device_bytes"], c["released_bytes"])
            self.assertEqual(c["fetched_late"], c["offloaded"])

    def test_under_a_real_limit_copies_back_run_ahead_of_use(self):
        off = self.run_with(lambda d: torch.cuda.memory_allocated(d),
                            limit=lambda d: 0.7 * torch.cuda.max_memory_allocated(d))
        for c in off.history:
            self.assertGreater(c["released_bytes"], 0)
            self.assertEqual(c["to_device_bytes"], c["released_bytes"])
            self.assertLess(c["fetched_late"], c["offloaded"])
        print("\n", off.plan_summary, off.history[-1], file=sys.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)

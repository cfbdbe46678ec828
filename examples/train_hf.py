"""Trains a Hugging Face GPT-2 (random weights, no download) the way a user's script does: bf16 autocast,
AdamW, one optimizer step per iteration. Nothing in it knows about tierpack; run it under tierpack with

    tierpack run --gpu-budget 60% -o run.tpk --stats s.json -- python3 examples/train_hf.py

Needs torch and transformers; on a machine without CUDA it trains a small model on the CPU.
Options: --layers N --hidden N --heads N --batch N --seq N --steps N (defaults: GPT-2 medium's shape,
24 x 1024, 16 heads, batch 8 x 1024 tokens on a GPU; 2 x 64, batch 2 x 64 on the CPU).
"""

import argparse
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def main():
    cuda = torch.cuda.is_available()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=24 if cuda else 2)
    ap.add_argument("--hidden", type=int, default=1024 if cuda else 64)
    ap.add_argument("--heads", type=int, default=16 if cuda else 2)
    ap.add_argument("--batch", type=int, default=8 if cuda else 2)
    ap.add_argument("--seq", type=int, default=1024 if cuda else 64)
    ap.add_argument("--steps", type=int, default=12)
    a = ap.parse_args()
    device = "cuda" if cuda else "cpu"

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=a.layers, n_embd=a.hidden, n_head=a.heads, n_positions=max(a.seq, 64),
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(cfg).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), device=device)
    for step in range(a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        opt.step()
        value = loss.item()  # waits for the step
        peak = torch.cuda.max_memory_reserved() / 2**30 if cuda else 0.0
        print("step %d loss %.6f %.1f ms%s" % (step, value, (time.perf_counter() - t0) * 1e3,
                                               " reserved peak %.2f GiB" % peak if cuda else ""), flush=True)


if __name__ == "__main__":
    main()

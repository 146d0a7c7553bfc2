#!/usr/bin/env python3
"""Loads the model part of an ampc GPT checkpoint into PyTorch and evaluates it.

    python3 examples/pytorch_load.py CHECKPOINT TEXT_FILE

CHECKPOINT comes from `ampc train --data text:TEXT_FILE --checkpoint CHECKPOINT`. The tensors are read
with safetensors' own loader, the parameters (every tensor but optim.* and master.*) go into a PyTorch
module with ampc's module names through load_state_dict(strict=True), and the validation loss is
computed the way `ampc train` computes eval_loss (the last 10% of the file, windows of context + 1 bytes
at a stride of context, the mean cross-entropy over every target byte). The two numbers agree to float
rounding: the names, layouts and the model itself are the same. Needs torch and safetensors (pip).
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.ModuleDict({"qkv": nn.Linear(d, 3 * d), "proj": nn.Linear(d, d)})
        self.mlp = nn.ModuleDict({"fc": nn.Linear(d, 4 * d), "proj": nn.Linear(4 * d, d)})

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2)
                   for t in self.attn["qkv"](self.ln1(x)).split(C, dim=2))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.heads)
        att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf")).softmax(-1)
        x = x + self.attn["proj"]((att @ v).transpose(1, 2).reshape(B, T, C))
        return x + self.mlp["proj"](F.gelu(self.mlp["fc"](self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, d, layers, heads, context):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        return F.linear(self.ln_f(x), self.wte.weight)   # the output is tied to the token embedding


def main(ckpt, text):
    with safe_open(ckpt, "pt") as f:
        meta = f.metadata()
    cfg = {k: int(meta["ampc.model." + k]) for k in ("vocab", "d_model", "layers", "heads", "context")}
    if meta["ampc.model.kind"] != "gpt":
        sys.exit(f"{ckpt}: a {meta['ampc.model.kind']} checkpoint; this example loads the gpt")
    tensors = load_file(ckpt)
    params = {k: v.float() for k, v in tensors.items() if not k.startswith(("optim.", "master."))}
    model = GPT(cfg["vocab"], cfg["d_model"], cfg["layers"], cfg["heads"], cfg["context"])
    model.load_state_dict(params, strict=True)
    data = open(text, "rb").read()
    val = torch.tensor(list(data[len(data) - round(len(data) * 0.1):]), dtype=torch.long)
    T = cfg["context"]
    windows = torch.stack([val[i * T:i * T + T + 1] for i in range((len(val) - 1) // T)])
    with torch.no_grad():
        losses = [F.cross_entropy(model(w[:, :-1]).flatten(0, 1), w[:, 1:].flatten(), reduction="sum")
                  for w in windows.split(64)]
    n = windows.shape[0] * T
    print(f"{ckpt}: step {meta['ampc.step']}, {sum(p.numel() for p in params.values())} parameters loaded "
          f"strictly; validation loss in PyTorch {float(sum(losses)) / n:.6f} over {n} bytes")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])

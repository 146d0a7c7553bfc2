"""pytorch_step.py: the PyTorch side of bench/vs_pytorch.sh: the same models as ampc (src/nn/) trained the
same way (zero_grad, forward, cross-entropy, backward, AdamW), timed per step, one JSON line per precision
in the shape `ampc bench step --json` prints.

  python3 pytorch_step.py --model gpt --precision bf16 [--batch 8] [--steps 5] [--untimed 2] [--threads 2]

Precisions: fp32; bf16 = torch.autocast("cpu", torch.bfloat16); fp16 = torch.autocast("cpu", torch.float16)
(refused by PyTorch 1.13: the line then says so in "error"). Run one precision per process: peak memory is
the process's peak RSS. Models match ampc's: gpt (char-level, pre-LN, causal attention, GELU-tanh MLP 4x,
tied head; 6 layers, d 384, 6 heads, context 256), mlp 784-1024-1024-10, cnn (conv3x3 32 pad 1, ReLU, pool,
conv3x3 64 pad 1, ReLU, pool, fc 128, fc 10). Where torch has scaled_dot_product_attention (2.x) the GPT
uses it, as a user of that version would.
"""
import argparse
import json
import math
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def attention(self, q, k, v, mask):
        if hasattr(F, "scaled_dot_product_attention"):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        return torch.matmul(att, v)

    def forward(self, x, mask):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in self.qkv(self.ln1(x)).split(C, dim=2))
        y = self.attention(q, k, v, mask[:T, :T]).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))  # torch >= 1.12


class GPT(nn.Module):
    def __init__(self, vocab=256, d=384, layers=6, heads=6, seq=256):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.lnf = nn.LayerNorm(d)
        self.register_buffer("mask", torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1))
        for mod in self.modules():
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                nn.init.normal_(mod.weight, 0.0, 0.02)
            if isinstance(mod, nn.Linear) and mod.bias is not None:
                nn.init.zeros_(mod.bias)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x, self.mask)
        return F.linear(self.lnf(x), self.wte.weight)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(784, 1024), nn.Linear(1024, 1024), nn.Linear(1024, 10)

    def forward(self, x):
        return self.l3(F.relu(self.l2(F.relu(self.l1(x.flatten(1))))))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(1, 32, 3, padding=1), nn.Conv2d(32, 64, 3, padding=1)
        self.f1, self.f2 = nn.Linear(64 * 7 * 7, 128), nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.f2(F.relu(self.f1(x.flatten(1))))


def make(model, batch):
    g = torch.Generator().manual_seed(0)
    if model == "gpt":
        x = torch.randint(0, 256, (batch, 256), generator=g)
        return GPT(), x, torch.randint(0, 256, (batch, 256), generator=g), batch * 256, "tokens_per_s"
    x, y = torch.randn(batch, 1, 28, 28, generator=g), torch.randint(0, 10, (batch,), generator=g)
    return (MLP() if model == "mlp" else CNN()), x, y, batch, "samples_per_s"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["gpt", "mlp", "cnn"], default="gpt")
    ap.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="bf16")
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--untimed", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    batch = a.batch or {"gpt": 8, "mlp": 64, "cnn": 64}[a.model]
    model, x, y, per_step, unit = make(a.model, batch)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)
    line = {"kind": "step", "impl": "pytorch " + torch.__version__, "model": a.model, "precision": a.precision,
            "batch": batch, "threads": a.threads, "steps": a.steps, "warmup": a.untimed}

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=dt, enabled=dt is not None):
            out = model(x)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), y.reshape(-1))
        loss.backward()
        opt.step()

    times = []
    try:
        for i in range(a.untimed + a.steps):
            t0 = time.perf_counter()
            step()
            if i >= a.untimed:
                times.append(time.perf_counter() - t0)
    except Exception as e:  # PyTorch 1.13's CPU autocast refuses FP16
        line["error"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
    if times:
        med = statistics.median(times)
        line.update({"ms_per_step": med * 1e3, "ms_min": min(times) * 1e3, unit: per_step / med,
                     "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024})
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch (CPU) side of bench_scaling on one rank: the same training step of the same net.

    torch_net.py --model SPEC [--shape 1x1x1024x1024] [--threads N] [--warmup 1]
                 [--repeats 5] [--lr 1e-6] [--label TEXT]

SPEC is a Tessera sequential spec ("conv(out=32,k=3,pad=1),relu,..."; bench/scaling/
torch_compare.sh passes bench_scaling the same string), mapped to torch.nn by
bench/layers/torch_layers.py. One step is what bench_scaling times on one rank:

    y = model(x); loss = MSE(y, target); zero_grad; loss.backward(); SGD step

with x requiring a gradient (Tessera's backward computes the input gradient too), SGD
without momentum at --lr (bench_scaling's 1e-6), x and target Gaussian noise. Prints one
JSON line like bench_scaling's: step_s (median over repeats after warm-up), step_s_min,
step_s_max, cpu_s (median process CPU time per step, all threads). Exits 3 with a one-line
message when torch cannot be imported, so a caller can skip the PyTorch side.
"""

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "layers"))
from torch_layers import Skip, build  # noqa: E402  (the one spec -> torch.nn mapping)

NO_TORCH = 3  # the exit status of a run with no torch to time: the caller skips that side


def import_torch(script, threads):
    """torch with `threads` threads (0: torch's choice) and seed 1, or None after saying on
    stderr that `script` skips its side because this python has no torch."""
    try:
        import torch
    except ImportError as e:
        print(f"{script}: skip: torch is not importable by {sys.executable} ({e}); "
              "scripts/setup-bench.sh prints a python that has it", file=sys.stderr)
        return None
    if threads > 0:
        torch.set_num_threads(threads)
    torch.manual_seed(1)
    return torch


def parse_shape(text):
    if not re.fullmatch(r"[1-9]\d*x[1-9]\d*x[1-9]\d*x[1-9]\d*", text):
        raise argparse.ArgumentTypeError(f"'{text}' is not NxCxHxW")
    return tuple(int(v) for v in text.split("x"))


def time_steps(torch, spec, shape, warmup, repeats, lr):
    model, out_shape = build(torch, spec, shape)
    model.train()
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(shape, generator=generator).requires_grad_()
    target = torch.randn(out_shape, generator=generator)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0)
    loss_fn = torch.nn.MSELoss()  # mean, as layers/loss/mse.hpp
    step, cpu = [], []
    for i in range(warmup + repeats):
        c0 = time.process_time()
        t0 = time.perf_counter()
        loss = loss_fn(model(x), target)
        optimizer.zero_grad(set_to_none=False)  # Tessera's zero_grad fills zeros
        x.grad = None
        loss.backward()
        optimizer.step()
        t1 = time.perf_counter()
        c = time.process_time() - c0
        if i >= warmup:
            step.append(t1 - t0)
            cpu.append(c)
    parameters = sum(p.numel() for p in model.parameters())
    return step, cpu, parameters


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a Tessera sequential spec (not a preset name)")
    ap.add_argument("--shape", type=parse_shape, default=(1, 1, 1024, 1024))
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "0") or 0))
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--lr", type=float, default=1e-6)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    if a.repeats < 1 or a.warmup < 0:
        ap.error("--repeats must be >= 1 and --warmup >= 0")
    torch = import_torch("torch_net.py", a.threads)
    if torch is None:
        return NO_TORCH
    try:
        step, cpu, parameters = time_steps(torch, a.model, a.shape, a.warmup, a.repeats, a.lr)
    except (Skip, ValueError, RuntimeError) as e:
        print(f"torch_net.py: error: {type(e).__name__}: {str(e).splitlines()[0]}", file=sys.stderr)
        return 1
    print(json.dumps({
        "bench": "torch_net", "label": a.label, "model": a.model, "shape": "x".join(map(str, a.shape)),
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "mkldnn": torch.backends.mkldnn.is_available(), "warmup": a.warmup, "repeats": a.repeats,
        "parameters": parameters, "step_s": statistics.median(step), "step_s_min": min(step),
        "step_s_max": max(step), "cpu_s": statistics.median(cpu),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())

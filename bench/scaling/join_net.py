#!/usr/bin/env python3
"""Joins bench_scaling's and torch_net.py's JSON lines (one per case, same order) into a
Markdown table of one training step on one rank, Tessera beside PyTorch.

    join_net.py TESSERA_JSONL TORCH_JSONL --threads N [--torch-note TEXT]

Columns: milliseconds per step (median over repeats; the fastest in brackets), the process
CPU time per step, and tessera/torch for both (> 1: Tessera slower). A side that failed or
was skipped shows "-". Exits non-zero if the two sides' cases or parameter counts differ.
"""

import argparse
import json
import sys


def read(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip().startswith("{")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tessera")
    ap.add_argument("torch")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--torch-note", default="")
    a = ap.parse_args()
    ours, theirs = read(a.tessera), read(a.torch)
    about = next((t for t in theirs if "torch" in t), {})
    print("## One training step on one rank: bench_scaling against PyTorch")
    print()
    print("The step bench_scaling times (forward, MSE loss against a target, zero_grad, backward computing the")
    print("input gradient too, SGD lr 1e-6 without momentum; no allreduce on one rank) and the same in PyTorch")
    print(f"(torch_net.py: nn.Sequential from the same spec, nn.MSELoss, torch.optim.SGD). {a.threads} thread(s) each:")
    print(f"OMP_NUM_THREADS={a.threads} for Tessera, torch.set_num_threads({a.threads}); "
          f"mkldnn={about.get('mkldnn', '-')}. Times in ms: median step [fastest]; cpu = median process CPU time per step.")
    print()
    print("| input | spec | parameters | tessera step | torch step | tessera/torch | tessera cpu | torch cpu | cpu ratio |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for i, o in enumerate(ours):
        t = theirs[i] if i < len(theirs) else {}
        ok_o, ok_t = "step_s" in o, "step_s" in t
        if ok_t and (t["model"], t["shape"]) != (o.get("model"), o.get("shape")):
            sys.exit(f"row {i + 1}: the two sides ran different cases ({o.get('shape')} vs {t['shape']})")
        if ok_o and ok_t and o["parameters"] != t["parameters"]:
            sys.exit(f"row {i + 1}: the nets differ: {o['parameters']} parameters in Tessera, {t['parameters']} in PyTorch")
        ms = lambda r, k: f"{1e3 * r[k]:.0f}"
        step = lambda r, ok: f"{ms(r, 'step_s')} [{ms(r, 'step_s_min')}]" if ok else "-"
        ratio = lambda k: f"{o[k] / t[k]:.2f}" if ok_o and ok_t and t[k] > 0 else "-"
        print(f"| {o.get('shape', '-')} | `{o.get('model', '-')}` | {o.get('parameters', '-')} | {step(o, ok_o)} | "
              f"{step(t, ok_t)} | {ratio('step_s')} | {ms(o, 'cpu_s') if ok_o else '-'} | "
              f"{ms(t, 'cpu_s') if ok_t else '-'} | {ratio('cpu_s')} |")
    if a.torch_note:
        print()
        print(a.torch_note)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Joins the runs of bench/mainjob/run.sh into a Markdown table: the main job's training
steps in Tessera, each configuration beside PyTorch.

    report.py --skip N --torch TORCH_JSONL [--torch TORCH_JSONL] [--torch-note TEXT]
              ROW=METRICS_JSONL:LOG ...

ROW names a Tessera configuration ("1 rank x 2 threads, grid 1x1x1"); METRICS_JSONL is its
tessera-train --metrics file (one JSON line per step), LOG its stdout with --verbose (the
runtime line, the parameter count). Steady state: the steps after the first --skip;
images/s = batch * steps / their total step time, the time split (data, exposed halo,
allreduce, compute) as means per step. "vs PyTorch" is Tessera's time per step over
PyTorch's (> 1: Tessera slower).

Precision: each Tessera run's is read from its log (tessera-train --precision), each
PyTorch run's from its JSON line (torch_mainjob.py --autocast bf16: "bf16"); --torch may be
given once per precision. With only fp32 runs the table is the fp32 one; otherwise it has a
precision column and "vs PyTorch" compares with PyTorch in the same precision (Tessera bf16
against PyTorch autocast bf16), and when both precisions ran, a second table puts each run's
fp32 and bf16 steps side by side (bf16 / fp32 > 1: bf16 slower). Exits non-zero, printing nothing, when a run's parameter
count differs from PyTorch's (the nets differ: no comparison) or a run wrote too few steps.
"""

import argparse
import json
import re
import sys


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip().startswith("{")]


def tessera_row(name, metrics, log, skip):
    steps = [m for m in read_jsonl(metrics) if "images_per_s" in m and not m.get("eval")]
    timed = [m for m in steps if m["step"] > skip]
    text = open(log).read()
    parameters = re.search(r"\((\d+) parameters\)", text)
    runtime = re.search(r"ranks=(\d+) .*?threads/rank=(\d+)", text)
    batch = re.search(r"global batch (\d+)", text)
    precision = re.search(r"; precision (\w+);", text)
    if not timed or not parameters or not batch:
        sys.exit(f"report.py: {name}: no timed steps after the first {skip} in {metrics} (see {log})")
    total = sum(m["step_s"] for m in timed)
    mean = lambda key: 1e3 * sum(m[key] for m in timed) / len(timed)  # noqa: E731
    return {
        "name": name, "precision": precision.group(1) if precision else "fp32", "parameters": int(parameters.group(1)), "timed": len(timed),
        "layout": f"{runtime.group(1)} x {runtime.group(2)}" if runtime else "?",
        "images_per_s": int(batch.group(1)) * len(timed) / total, "step_ms": 1e3 * total / len(timed),
        "data_ms": mean("data_s"), "halo_ms": mean("halo_s"), "allreduce_ms": mean("allreduce_s"),
        "compute_ms": mean("compute_s"), "last_loss": steps[-1]["loss"],
    }


def fmt_row(r, torch, precision_column):
    ms = lambda v: f"{v:.1f}"  # noqa: E731
    ratio = f"{r['step_ms'] / (1e3 * torch['step_s']):.2f}" if torch else "-"
    return (f"| {r['name']} |" + (f" {r['precision']} |" if precision_column else "")
            + f" {r['layout']} | {r['images_per_s']:.0f} | {ms(r['step_ms'])} | {ratio} | "
            f"{ms(r['data_ms'])} | {ms(r['halo_ms'])} | {ms(r['allreduce_ms'])} | {ms(r['compute_ms'])} | "
            f"{r['last_loss']:.3f} |")


def torch_row(torch, precision_column):
    label = "bf16 (autocast)" if torch.get("precision") == "bf16" else "fp32"
    return (f"| PyTorch, {torch['threads']} thread(s) |" + (f" {label} |" if precision_column else "")
            + f" 1 x {torch['threads']} | {torch['images_per_s']:.0f} | {1e3 * torch['step_s']:.1f} | 1.00 | "
            f"- | - | - | - | {torch['last_loss']:.3f} |")


def fp32_table(rows, torch):
    """The table of fp32 runs only (as before precisions were added)."""
    print("| run | ranks x threads | images/s | ms/step | vs PyTorch | data | halo | allreduce | compute | "
          "last loss |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    if torch:
        print(torch_row(torch, False))
    for r in rows:
        print(fmt_row(r, torch, False))


def precision_table(rows, torches, precisions):
    """Every run with its precision, "vs PyTorch" against PyTorch in the same precision; with
    both precisions, each run's fp32 and bf16 steps side by side."""
    print("| run | precision | ranks x threads | images/s | ms/step | vs PyTorch (same precision) | data | halo | "
          "allreduce | compute | last loss |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for p in precisions:
        if p in torches:
            print(torch_row(torches[p], True))
    for r in rows:
        print(fmt_row(r, torches.get(r["precision"]), True))
    if not {"fp32", "bf16"} <= set(precisions):
        return
    print()
    print("bf16 against fp32, side by side (ms per step; bf16 / fp32 > 1: bf16 slower; the last column is "
          "Tessera bf16 over PyTorch autocast bf16, > 1: Tessera slower):")
    print()
    print("| run | fp32 ms/step | bf16 ms/step | bf16 / fp32 | vs PyTorch fp32 | vs PyTorch bf16 |")
    print("|---|---:|---:|---:|---:|---:|")
    ratio = lambda a, b: f"{a / b:.2f}" if a and b else "-"  # noqa: E731
    torch_ms = {p: 1e3 * t["step_s"] for p, t in torches.items()}
    if torches:
        t = next(iter(torches.values()))
        f, b = torch_ms.get("fp32"), torch_ms.get("bf16")
        print(f"| PyTorch, {t['threads']} thread(s) | {f'{f:.1f}' if f else '-'} | {f'{b:.1f}' if b else '-'} | "
              f"{ratio(b, f)} | {'1.00' if f else '-'} | {'1.00' if b else '-'} |")
    names = list(dict.fromkeys(r["name"] for r in rows))
    for name in names:
        ms = {r["precision"]: r["step_ms"] for r in rows if r["name"] == name}
        f, b = ms.get("fp32"), ms.get("bf16")
        print(f"| {name} | {f'{f:.1f}' if f else '-'} | {f'{b:.1f}' if b else '-'} | {ratio(b, f)} | "
              f"{ratio(f, torch_ms.get('fp32'))} | {ratio(b, torch_ms.get('bf16'))} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--skip", type=int, required=True)
    ap.add_argument("--torch", required=True, action="append",
                    help="torch_mainjob.py's JSON line (an empty file: skipped); once per precision")
    ap.add_argument("--torch-note", default="")
    ap.add_argument("rows", nargs="+", metavar="ROW=METRICS_JSONL:LOG")
    a = ap.parse_args()
    rows = []
    for spec in a.rows:
        name, _, files = spec.partition("=")
        metrics, _, log = files.rpartition(":")
        rows.append(tessera_row(name, metrics, log, a.skip))
    torches = {}  # precision -> torch_mainjob.py's line
    for path in a.torch:
        for t in read_jsonl(path)[:1]:
            torches[t.get("precision", "fp32")] = t
    for r in rows:
        for t in torches.values():
            if r["parameters"] != t["parameters"]:
                sys.exit(f"report.py: {r['name']}: {r['parameters']} parameters in Tessera, {t['parameters']} in "
                         "PyTorch: not the same net, refusing to compare")
    precisions = sorted({r["precision"] for r in rows} | set(torches), key=lambda p: (p != "fp32", p))
    if precisions == ["fp32"]:
        fp32_table(rows, torches.get("fp32"))
    else:
        precision_table(rows, torches, precisions)
    print()
    timed = rows[0]["timed"]
    print(f"Steady state: {timed} timed steps after {a.skip} untimed ones, the same for every run. Time split in ms "
          "per step (tessera-train's metrics: reading the batch, halo wait not hidden by compute, gradient "
          "allreduce, the rest); PyTorch's step includes its batch too. "
          + (f"Parameters: {rows[0]['parameters']} on both sides." if torches else ""))
    if precisions != ["fp32"]:
        print()
        device = next((t.get("device", "cpu") for t in torches.values() if t), "cpu")
        print(f"PyTorch's bf16 is torch.autocast('{device}', dtype=torch.bfloat16) around forward and loss (fp32 master "
              "weights, gradients and Adam state); Tessera's is tessera-train --precision bf16 (docs/training.md, "
              "\"Mixed precision\").")
    if a.torch_note:
        print()
        print(a.torch_note)
    return 0


if __name__ == "__main__":
    sys.exit(main())

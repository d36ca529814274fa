#!/usr/bin/env python3
"""Joins the runs of bench/mainjob/run.sh into a Markdown table: the main job's training
steps in Tessera, each configuration beside PyTorch.

    report.py --skip N --torch TORCH_JSONL [--torch-note TEXT]
              ROW=METRICS_JSONL:LOG ...

ROW names a Tessera configuration ("1 rank x 2 threads, grid 1x1x1"); METRICS_JSONL is its
tessera-train --metrics file (one JSON line per step), LOG its stdout with --verbose (the
runtime line, the parameter count). Steady state: the steps after the first --skip;
images/s = batch * steps / their total step time, the time split (data, exposed halo,
allreduce, compute) as means per step. "vs PyTorch" is Tessera's time per step over
PyTorch's (> 1: Tessera slower). Exits non-zero, printing nothing, when a run's parameter
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
    if not timed or not parameters or not batch:
        sys.exit(f"report.py: {name}: no timed steps after the first {skip} in {metrics} (see {log})")
    total = sum(m["step_s"] for m in timed)
    mean = lambda key: 1e3 * sum(m[key] for m in timed) / len(timed)  # noqa: E731
    return {
        "name": name, "parameters": int(parameters.group(1)), "timed": len(timed),
        "layout": f"{runtime.group(1)} x {runtime.group(2)}" if runtime else "?",
        "images_per_s": int(batch.group(1)) * len(timed) / total, "step_ms": 1e3 * total / len(timed),
        "data_ms": mean("data_s"), "halo_ms": mean("halo_s"), "allreduce_ms": mean("allreduce_s"),
        "compute_ms": mean("compute_s"), "last_loss": steps[-1]["loss"],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--skip", type=int, required=True)
    ap.add_argument("--torch", required=True, help="torch_mainjob.py's JSON line (an empty file: skipped)")
    ap.add_argument("--torch-note", default="")
    ap.add_argument("rows", nargs="+", metavar="ROW=METRICS_JSONL:LOG")
    a = ap.parse_args()
    rows = []
    for spec in a.rows:
        name, _, files = spec.partition("=")
        metrics, _, log = files.rpartition(":")
        rows.append(tessera_row(name, metrics, log, a.skip))
    torch = next(iter(read_jsonl(a.torch)), None)
    for r in rows:
        if torch and r["parameters"] != torch["parameters"]:
            sys.exit(f"report.py: {r['name']}: {r['parameters']} parameters in Tessera, {torch['parameters']} in "
                     "PyTorch: not the same net, refusing to compare")
    ms = lambda v: f"{v:.1f}"  # noqa: E731
    print("| run | ranks x threads | images/s | ms/step | vs PyTorch | data | halo | allreduce | compute | "
          "last loss |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    if torch:
        print(f"| PyTorch, {torch['threads']} thread(s) | 1 x {torch['threads']} | {torch['images_per_s']:.0f} | "
              f"{ms(1e3 * torch['step_s'])} | 1.00 | - | - | - | - | {torch['last_loss']:.3f} |")
    for r in rows:
        ratio = f"{r['step_ms'] / (1e3 * torch['step_s']):.2f}" if torch else "-"
        print(f"| {r['name']} | {r['layout']} | {r['images_per_s']:.0f} | {ms(r['step_ms'])} | {ratio} | "
              f"{ms(r['data_ms'])} | {ms(r['halo_ms'])} | {ms(r['allreduce_ms'])} | {ms(r['compute_ms'])} | "
              f"{r['last_loss']:.3f} |")
    print()
    timed = rows[0]["timed"]
    print(f"Steady state: {timed} timed steps after {a.skip} untimed ones, the same for every run. Time split in ms "
          "per step (tessera-train's metrics: reading the batch, halo wait not hidden by compute, gradient "
          "allreduce, the rest); PyTorch's step includes its batch too. "
          + (f"Parameters: {rows[0]['parameters']} on both sides." if torch else ""))
    if a.torch_note:
        print()
        print(a.torch_note)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Joins bench_layers' and torch_layers.py's --format tsv outputs case by case.

    join_results.py TESSERA_TSV TORCH_TSV [--markdown] [--fp32 TESSERA_FP32_TSV]

Prints one row per case: input, spec, Tessera forward / backward / total ms, PyTorch total
ms, the ratio tessera/torch (> 1: Tessera slower), both sides' CPU time (all threads) and
its ratio, and a note for a side that skipped or failed the case (its numbers are then "-"). Exits non-zero if the two files list different
cases (they read the same case list, so this means they were run on different lists).

--fp32 (with TESSERA_TSV from bench_layers --precision bf16 and TORCH_TSV from
torch_layers.py --precision bf16): adds Tessera's fp32 total of each case and the ratio
"bf16/fp32" (< 1: bf16 faster), and marks each row against issue 13's goals — convolutions
at most 1/2.5 of their fp32 time, every case at most PyTorch autocast's time.
"""

import argparse
import csv
import sys


def read(path):
    """{case: row}; lines starting with '#' (the tools' description of themselves) skipped."""
    with open(path, newline="") as f:
        lines = [line for line in f if not line.startswith("#")]
    return {row["case"]: row for row in csv.DictReader(lines, delimiter="\t")}


CONV_SPEEDUP_GOAL = 2.5  # issue 13: bf16 convolutions at least 2.5x faster than fp32


def goal_cells(bf16, torch_bf16, fp32):
    """Tessera fp32 ms, bf16/fp32, and which goals the row meets or misses ("-" where a side is missing)."""
    if bf16["status"] != "ok" or fp32["status"] != "ok":
        return ["-" if fp32["status"] != "ok" else f"{float(fp32['total_ms']):.2f}", "-", "-"]
    ours, base = float(bf16["total_ms"]), float(fp32["total_ms"])
    goals = []
    if bf16["spec"].split("(", 1)[0] in ("conv", "deconv"):
        speedup = base / ours
        goals.append(f"{'met' if speedup >= CONV_SPEEDUP_GOAL else 'MISSED'}: {speedup:.2f}x fp32")
    if torch_bf16["status"] == "ok":
        goals.append(f"{'met' if ours <= float(torch_bf16['total_ms']) else 'MISSED'}: <= torch")
    return [f"{base:.2f}", f"{ours / base:.2f}", "; ".join(goals) or "-"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tessera")
    ap.add_argument("torch")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--fp32", metavar="TESSERA_FP32_TSV", help="Tessera's fp32 run of the same cases")
    a = ap.parse_args()
    ours, theirs = read(a.tessera), read(a.torch)
    fp32 = read(a.fp32) if a.fp32 else None
    for key in ours.keys() | theirs.keys() | (fp32.keys() if fp32 else set()):
        o, t = ours.get(key), theirs.get(key)
        others = [(a.torch, t)] + ([(a.fp32, fp32.get(key))] if fp32 else [])
        for path, row in others:
            if not o or not row or (o["input"], o["spec"]) != (row["input"], row["spec"]):
                sys.exit(f"case {key} differs between {a.tessera} and {path}: were they run on the same case list?")

    header = ["#", "input", "spec", "tessera fwd", "tessera bwd", "tessera ms", "torch ms", "tessera/torch",
              "tessera cpu", "torch cpu", "cpu ratio", "note"]
    if fp32:
        header[-1:-1] = ["tessera fp32 ms", "bf16/fp32", "goals"]
    numeric = range(3, len(header) - (2 if fp32 else 1))
    rows = []
    for key in sorted(ours, key=int):
        o, t = ours[key], theirs[key]
        ok_o, ok_t = o["status"] == "ok", t["status"] == "ok"
        ms = lambda row, col: f"{float(row[col]):.2f}"
        cells = [key, o["input"], o["spec"]]
        cells += [ms(o, "forward_ms"), ms(o, "backward_ms"), ms(o, "total_ms")] if ok_o else ["-", "-", "-"]
        cells.append(ms(t, "total_ms") if ok_t else "-")
        ratio = lambda col: (f"{float(o[col]) / float(t[col]):.2f}" if ok_o and ok_t and float(t[col]) > 0 else "-")
        cells.append(ratio("total_ms"))
        cells += [ms(o, "cpu_ms") if ok_o else "-", ms(t, "cpu_ms") if ok_t else "-", ratio("cpu_ms")]
        sides = [("tessera", o), ("torch", t)]
        if fp32:
            f = fp32[key]
            sides.append(("tessera fp32", f))
            cells += goal_cells(o, t, f)
        notes = [f"{side}: {row['status']}: {row['note']}" for side, row in sides if row["status"] != "ok"]
        cells.append("; ".join(notes))
        rows.append(cells)

    if a.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---:" if i in numeric else "---" for i in range(len(header))) + "|")
        for cells in rows:
            print("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        return 0
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    for cells in [header] + rows:
        print("  ".join(c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Joins bench_layers' and torch_layers.py's --format tsv outputs case by case.

    join_results.py TESSERA_TSV TORCH_TSV [--markdown]

Prints one row per case: input, spec, Tessera forward / backward / total ms, PyTorch total
ms, the ratio tessera/torch (> 1: Tessera slower), both sides' CPU time (all threads) and
its ratio, and a note for a side that skipped or failed the case (its numbers are then "-"). Exits non-zero if the two files list different
cases (they read the same case list, so this means they were run on different lists).
"""

import argparse
import csv
import sys


def read(path):
    """{case: row}; lines starting with '#' (the tools' description of themselves) skipped."""
    with open(path, newline="") as f:
        lines = [line for line in f if not line.startswith("#")]
    return {row["case"]: row for row in csv.DictReader(lines, delimiter="\t")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tessera")
    ap.add_argument("torch")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    ours, theirs = read(a.tessera), read(a.torch)
    for key in ours.keys() | theirs.keys():
        o, t = ours.get(key), theirs.get(key)
        if not o or not t or (o["input"], o["spec"]) != (t["input"], t["spec"]):
            sys.exit(f"case {key} differs between {a.tessera} and {a.torch}: were they run on the same case list?")

    header = ["#", "input", "spec", "tessera fwd", "tessera bwd", "tessera ms", "torch ms", "tessera/torch",
              "tessera cpu", "torch cpu", "cpu ratio", "note"]
    numeric = range(3, len(header) - 1)
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
        notes = [f"{side}: {row['status']}: {row['note']}" for side, row in (("tessera", o), ("torch", t))
                 if row["status"] != "ok"]
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

#!/usr/bin/env python3
"""Joins bench_layers' and torch_layers.py's --format tsv outputs case by case.

    join_results.py TESSERA_TSV TORCH_TSV [--markdown]

Prints one row per case: input, spec, Tessera forward / backward / total ms, PyTorch total
ms and the ratio tessera/torch (> 1: Tessera slower). A case either side skipped or failed
shows that side's note instead of a number. Exits non-zero if the two files list different
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

    header = ["#", "input", "spec", "tessera fwd", "tessera bwd", "tessera ms", "torch ms", "tessera/torch"]
    rows = []
    for key in sorted(ours, key=int):
        o, t = ours[key], theirs[key]
        cells = [key, o["input"], o["spec"]]
        if o["status"] == "ok":
            cells += [f"{float(o['forward_ms']):.2f}", f"{float(o['backward_ms']):.2f}", f"{float(o['total_ms']):.2f}"]
        else:
            cells += ["", "", f"{o['status']}: {o['note']}"]
        cells.append(f"{float(t['total_ms']):.2f}" if t["status"] == "ok" else f"{t['status']}: {t['note']}")
        both = o["status"] == t["status"] == "ok" and float(t["total_ms"]) > 0
        cells.append(f"{float(o['total_ms']) / float(t['total_ms']):.2f}" if both else "")
        rows.append(cells)

    if a.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---:" if i >= 3 else "---" for i in range(len(header))) + "|")
        for cells in rows:
            print("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        return 0
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    widths = [min(w, 40) for w in widths]
    for cells in [header] + rows:
        print("  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Tables of bench/graphnets/run.sh: step times against PyTorch and activation memory per rank.

    report.py --skip K --cores C [--torch-note TEXT] ROWS.tsv

ROWS.tsv lines: net, size, precision (fp32 or bf16), ranks (or "torch"), grid, threads,
result file, log file. A
Tessera result is tessera-train's --metrics file (its step lines; the step time is the
median of step_s - data_s after the first K steps) and its stdout (the header's parameter
count and rank 0's "activations+gradients" bytes, and its last line's peak memory); a PyTorch
result is torch_graph_nets.py's JSON line. A PyTorch network whose parameter count is not Tessera's is an error: the two
sides must train the same network. With both precisions, a second table sets each bf16 step
and activation size beside the fp32 one.
"""
import argparse
import json
import re
import statistics
import sys


def tessera(metrics, log, skip):
    steps = [json.loads(l) for l in open(metrics) if l.strip()]
    steps = [s for s in steps if not s.get("eval") and s["step"] > skip]
    if not steps:
        sys.exit(f"report.py: no timed steps in {metrics}")
    text = open(log).read()
    parameters = re.search(r"\((\d+) parameters\)", text)
    activations = re.search(r"activations\+gradients (\d+) bytes", text)
    growth = re.search(r"^memory on rank 0: .*?, ([0-9.]+ [KMGT]?i?B) more than before the model was built", text, re.M)
    if not parameters or not activations:
        sys.exit(f"report.py: no parameter count or activation bytes in {log}")
    return {"step_s": statistics.median(s["step_s"] - s["data_s"] for s in steps),
            "parameters": int(parameters.group(1)), "activation_bytes": int(activations.group(1)),
            "peak_growth_bytes": byte_count(growth.group(1)) if growth else None}


def byte_count(text):
    """tessera-train's "312 MiB" / "1.50 GiB" / "900 B" (distarray/node_memory.hpp format_bytes)."""
    number, unit = text.split()
    return float(number) * {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}[unit]


def peak_memory(groups):
    print("\n## Peak memory, rank 0 beside PyTorch\n")
    print("Resident memory at the peak less what the process held before the model was built (libraries,")
    print("MPI): tessera-train's last line, VmHWM - VmRSS of /proc/self/status in torch_graph_nets.py.")
    print("It holds everything: activations, gradients, parameters, optimizer state, the convolution")
    print("scratch, the data. Below 1: Tessera's rank 0 held less than PyTorch's one process.\n")
    print("| network | image | precision | ranks (grid) | Tessera rank 0 (MiB) | PyTorch (MiB) | Tessera / PyTorch |")
    print("|---|---|---|---|---|---|---|")
    for (net, size, precision), group in groups.items():
        torch = group["torch"]
        theirs = torch.get("peak_growth_bytes") if torch else None
        for r in sorted(group["tessera"], key=lambda r: r["ranks"]):
            ours = r["peak_growth_bytes"]
            if ours is None:
                continue
            ratio = f"{ours / theirs:.2f}" if theirs else "–"
            torch_mib = f"{theirs / 2**20:.0f}" if theirs else "–"
            print(f"| {net} | {size}×{size} | {precision} | {r['ranks']} ({r['grid']}) | {ours / 2**20:.0f} "
                  f"| {torch_mib} | {ratio} |")


def bf16_against_fp32(groups):
    pairs = [(key[:2], group, groups[key[:2] + ("fp32",)]) for key, group in groups.items()
             if key[2] == "bf16" and key[:2] + ("fp32",) in groups]
    if not pairs:
        return
    print("\n## bf16 against fp32\n")
    print("Steps in seconds; bf16 / fp32 below 1: bf16 faster. The last column is Tessera bf16 over PyTorch")
    print("autocast bf16 (below 1: Tessera faster). Activations: rank 0's planned bytes, bf16 over fp32.\n")
    print("| network | image | run | fp32 step (s) | bf16 step (s) | bf16 / fp32 | activations bf16 / fp32 "
          "| Tessera bf16 / PyTorch bf16 |")
    print("|---|---|---|---|---|---|---|---|")
    for (net, size), bf16, fp32 in pairs:
        torch16, torch32 = bf16["torch"], fp32["torch"]
        if torch16 and torch32:
            print(f"| {net} | {size}×{size} | PyTorch, {torch16['threads']} thread(s) | {torch32['step_s']:.3f} "
                  f"| {torch16['step_s']:.3f} | {torch16['step_s'] / torch32['step_s']:.2f} | – | 1.00 |")
        by_ranks = {r["ranks"]: r for r in fp32["tessera"]}
        for r in sorted(bf16["tessera"], key=lambda r: r["ranks"]):
            f = by_ranks.get(r["ranks"])
            if not f:
                continue
            versus = f"{r['step_s'] / torch16['step_s']:.2f}" if torch16 else "–"
            print(f"| {net} | {size}×{size} | Tessera, {r['ranks']} rank(s) ({r['grid']}) x {r['threads']} | "
                  f"{f['step_s']:.3f} | {r['step_s']:.3f} | {r['step_s'] / f['step_s']:.2f} "
                  f"| {r['activation_bytes'] / f['activation_bytes']:.2f} | {versus} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip", type=int, required=True)
    parser.add_argument("--cores", type=int, required=True)
    parser.add_argument("--torch-threads", type=int, required=True)
    parser.add_argument("--torch-note", default="")
    parser.add_argument("rows")
    args = parser.parse_args()

    groups = {}  # (net, size, precision) -> {"tessera": [...], "torch": {...}}
    for line in open(args.rows):
        net, size, precision, ranks, grid, threads, result, log = line.rstrip("\n").split("\t")
        group = groups.setdefault((net, int(size), precision), {"tessera": [], "torch": None})
        if ranks == "torch":
            group["torch"] = json.loads(open(result).read())
        else:
            row = tessera(result, log, args.skip)
            row.update(ranks=int(ranks), grid=grid, threads=int(threads))
            group["tessera"].append(row)

    print("## Training step and activation memory per rank\n")
    print("Tessera: tessera-train on P ranks; the step is forward, loss, backward, gradient allreduce and SGD")
    print("(`step_s - data_s` of its metrics, median). PyTorch: the same network in one process with")
    print(f"{args.torch_threads} thread(s). Ratio: Tessera's step over PyTorch's (below 1: Tessera faster).")
    print("Activations: rank 0's planned bytes of every activation and its gradient with their halos")
    print("(tessera-train's header, models/memory_plan.hpp); against 1/P: divided by one rank's bytes / P")
    print("(1.00: a perfect split; above it, the halos and the replicated head).\n")
    print("| network | image | precision | ranks (grid) | threads/rank | Tessera step (s) | PyTorch step (s) "
          "| Tessera / PyTorch | activations, rank 0 (MiB) | against 1/P |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (net, size, precision), group in groups.items():
        torch = group["torch"]
        rows = sorted(group["tessera"], key=lambda r: r["ranks"])
        one = next((r for r in rows if r["ranks"] == 1), None)
        for r in rows:
            if torch and torch["parameters"] != r["parameters"]:
                sys.exit(f"report.py: {net} {size}: PyTorch has {torch['parameters']} parameters, "
                         f"Tessera {r['parameters']}: not the same network")
            ratio = f"{r['step_s'] / torch['step_s']:.2f}" if torch else "–"
            torch_s = f"{torch['step_s']:.3f}" if torch else "–"
            split = f"{r['activation_bytes'] / (one['activation_bytes'] / r['ranks']):.2f}" if one else "–"
            over = " (oversubscribed)" if r["ranks"] > args.cores else ""
            print(f"| {net} ({r['parameters']:,} parameters) | {size}×{size} | {precision} | {r['ranks']} ({r['grid']}){over} "
                  f"| {r['threads']} | {r['step_s']:.3f} | {torch_s} | {ratio} "
                  f"| {r['activation_bytes'] / 2**20:.1f} | {split} |")
    peak_memory(groups)
    bf16_against_fp32(groups)
    if args.torch_note:
        print(f"\n{args.torch_note}")


if __name__ == "__main__":
    main()

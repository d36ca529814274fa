#!/usr/bin/env python3
"""Tables and plots of bench/scaling/run.sh's runs.

    report.py PREFIX --machine TEXT --cores N --date D [--mpi TEXT] [--load TEXT] [--seconds S]

Reads PREFIX.jsonl (bench_scaling's JSON lines), writes PREFIX.md and PREFIX-*.png.
Strong efficiency is T(1) / (P T(P)), weak efficiency T(1) / T(P); runs with more ranks
than cores are marked oversubscribed in every table and plot.
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SERIES = {
    "strong-1024": "Strong scaling: denoise-fcn (32 channels), 1x1x1024x1024",
    "strong-2048": "Strong scaling: 4-layer fcn with 16 channels, 1x1x2048x2048",
    "weak-512": "Weak scaling: denoise-fcn, one 512x512 tile per rank",
}


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip().startswith("{")]


def ms(s):
    return f"{s * 1e3:.0f}"


def efficiency(label, run, base):
    if label.startswith("weak"):
        return base["step_s"] / run["step_s"]
    return base["step_s"] / (run["ranks"] * run["step_s"])


def series_table(label, runs):
    base = runs[0]
    lines = [
        f"### {SERIES[label]}",
        "",
        "Times in ms: the median step of the repeats, the fastest (`min`), the median CPU time a rank ran "
        "(`cpu`: the step without preemption by other processes, for P <= cores), the median split; "
        "predicted from the P = 1 profile of this series.",
        "",
        "| P | grid | | others | step | min | cpu | compute | halo | allreduce | speedup | efficiency | eff. (cpu) "
        "| predicted step | pred. compute | pred. halo | pred. allreduce | predicted / step | predicted / cpu |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        p = r["predicted"]
        speedup = base["step_s"] / r["step_s"] * (r["ranks"] if label.startswith("weak") else 1)
        versus_cpu = "" if r["oversubscribed"] else f"{p['step_s'] / r['cpu_s']:.2f}"
        cpu_base = dict(base, step_s=base["cpu_s"])
        cpu_efficiency = "" if r["oversubscribed"] else f"{100 * efficiency(label, dict(r, step_s=r['cpu_s']), cpu_base):.0f}%"
        lines.append(
            f"| {r['ranks']} | {r['grid']} | {'**oversubscribed**' if r['oversubscribed'] else ''} "
            f"| {r.get('other_runnable', '?')} | {ms(r['step_s'])} | {ms(r['step_s_min'])} | {ms(r['cpu_s'])} "
            f"| {ms(r['compute_s'])} | {ms(r['halo_s'])} | {ms(r['allreduce_s'])} "
            f"| {speedup:.2f} | {100 * efficiency(label, r, base):.0f}% | {cpu_efficiency} | {ms(p['step_s'])} "
            f"| {ms(p['compute_s'])} "
            f"| {ms(p['halo_s'])} | {ms(p['allreduce_s'])} | {p['step_s'] / r['step_s']:.2f} | {versus_cpu} |"
        )
    return lines


def grids_table(runs):
    ranked = sorted(runs, key=lambda r: r["predicted"]["step_s"])
    lines = [
        "### Every grid of 2 ranks: denoise-fcn on 2x1x512x512",
        "",
        "| grid | others | measured step (ms) | min | cpu | halo (ms) | predicted step (ms) | model's rank "
        "| measured rank (step) | measured rank (cpu) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    measured = sorted(runs, key=lambda r: r["step_s"])
    by_cpu = sorted(runs, key=lambda r: r["cpu_s"])
    for r in runs:
        lines.append(
            f"| {r['grid']} | {r.get('other_runnable', '?')} | {ms(r['step_s'])} | {ms(r['step_s_min'])} "
            f"| {ms(r['cpu_s'])} | {ms(r['halo_s'])} | {ms(r['predicted']['step_s'])} "
            f"| {ranked.index(r) + 1} | {measured.index(r) + 1} | {by_cpu.index(r) + 1} |"
        )
    return lines


def plot_strong(prefix, by_label, cores):
    labels = [l for l in ("strong-1024", "strong-2048") if l in by_label]
    fig, axes = plt.subplots(1, len(labels), figsize=(6 * len(labels), 4.5), squeeze=False)
    for ax, label in zip(axes[0], labels):
        runs = by_label[label]
        ps = [r["ranks"] for r in runs]
        ax.plot(ps, [runs[0]["step_s"] / p for p in ps], "k:", label="ideal (T1 / P)")
        ax.plot(ps, [runs[0]["step_s"] / min(p, cores) for p in ps], "--", color="0.5",
                label=f"ideal on {cores} cores (T1 / min(P, {cores}))")
        ax.plot(ps, [r["predicted"]["step_s"] for r in runs], "s--", color="tab:orange", label="predicted")
        ax.plot(ps, [r["step_s"] for r in runs], "-", color="tab:blue")
        for r in runs:
            hollow = r["oversubscribed"]
            ax.plot(r["ranks"], r["step_s"], "o", color="tab:blue", mfc="white" if hollow else "tab:blue")
            ax.annotate(r["grid"], (r["ranks"], r["step_s"]), textcoords="offset points", xytext=(4, 6), fontsize=8)
        quiet = [r for r in runs if not r["oversubscribed"]]
        ax.plot([r["ranks"] for r in quiet], [r["cpu_s"] for r in quiet], "^-", color="tab:green",
                label="CPU time a rank ran (P <= cores)")
        ax.plot([], [], "o", color="tab:blue", label="measured")
        ax.plot([], [], "o", color="tab:blue", mfc="white", label="measured, oversubscribed")
        ax.axvspan(cores + 0.5, max(ps) * 1.3, color="0.9", zorder=0)
        ax.text(cores + 0.7, runs[0]["step_s"], "oversubscribed\n(P > cores)",
                fontsize=8, va="top")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(ps, [str(p) for p in ps])
        ax.set_xlabel("ranks P")
        ax.set_ylabel("step time (s)")
        ax.set_title(SERIES[label].split(": ", 1)[1], fontsize=10)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(f"{prefix}-strong.png", dpi=110)
    plt.close(fig)


def plot_efficiency(prefix, by_label, cores):
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    top = 1
    for label, color in (("strong-1024", "tab:blue"), ("strong-2048", "tab:green"), ("weak-512", "tab:red")):
        if label not in by_label:
            continue
        runs = by_label[label]
        base = runs[0]
        ps = [r["ranks"] for r in runs]
        eff = [efficiency(label, r, base) for r in runs]
        top = max(top, *eff)
        ax.plot(ps, eff, "-", color=color, label=label)
        for r, e in zip(runs, eff):
            ax.plot(r["ranks"], e, "o", color=color, mfc="white" if r["oversubscribed"] else color)
        quiet = [r for r in runs if not r["oversubscribed"]]
        by_cpu = [efficiency(label, dict(r, step_s=r["cpu_s"]), dict(base, step_s=base["cpu_s"])) for r in quiet]
        top = max(top, *by_cpu)
        ax.plot([r["ranks"] for r in quiet], by_cpu, "^--", color=color, label=f"{label}, by CPU time")
    ax.axvspan(cores + 0.5, 10, color="0.9", zorder=0)
    ax.text(cores + 0.7, top * 1.05, "oversubscribed (P > cores);\nhollow markers", fontsize=8, va="top")
    ax.set_xscale("log", base=2)
    ax.set_xticks([1, 2, 4, 8], ["1", "2", "4", "8"])
    ax.set_ylim(0, top * 1.1)
    ax.set_xlabel("ranks P")
    ax.set_ylabel("parallel efficiency")
    ax.set_title("Efficiency: strong T1/(P TP), weak T1/TP (wall; dashed: CPU time)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(f"{prefix}-efficiency.png", dpi=110)
    plt.close(fig)


def plot_breakdown(prefix, by_label):
    runs = [r for l in ("strong-1024", "strong-2048", "weak-512") for r in by_label.get(l, [])]
    fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(runs)), 4.5))
    names = []
    for i, r in enumerate(runs):
        for j, (source, width) in enumerate(((r, -0.2), (r["predicted"], 0.2))):
            bottom = 0
            for part, color in (("compute_s", "tab:blue"), ("halo_s", "tab:orange"), ("allreduce_s", "tab:green")):
                ax.bar(i + width, source[part], 0.38, bottom=bottom, color=color, alpha=1 if j == 0 else 0.45,
                       label=(part[:-2] + (" (measured)" if j == 0 else " (predicted)")) if i == 0 else None)
                bottom += source[part]
        names.append(f"{r['label']}\nP={r['ranks']} {r['grid']}" + ("\n(oversub.)" if r["oversubscribed"] else ""))
    ax.set_xticks(range(len(runs)), names, fontsize=7)
    ax.set_ylabel("seconds per step")
    ax.set_title("Step split: measured (solid, left) vs predicted (pale, right)", fontsize=10)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(f"{prefix}-breakdown.png", dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("prefix")
    parser.add_argument("--machine", required=True)
    parser.add_argument("--cores", type=int, required=True)
    parser.add_argument("--date", required=True)
    parser.add_argument("--mpi", default="")
    parser.add_argument("--load", default="")
    parser.add_argument("--seconds", default="")
    a = parser.parse_args()
    runs = load(f"{a.prefix}.jsonl")
    by_label = {}
    for r in runs:
        by_label.setdefault(r["label"], []).append(r)
    links = {}
    try:
        with open(f"{a.prefix}-links.txt") as f:
            for line in f:
                if line.strip() and not line.startswith("#"):
                    k, v = line.split()
                    links[k] = float(v)
    except OSError:
        pass

    name = a.prefix.rsplit("/", 1)[-1]
    md = [
        f"# Scaling of one training step — {a.date}",
        "",
        f"Machine: {a.machine}; MPI: {a.mpi or '?'}; one rank per core, OMP_NUM_THREADS=1, ranks pinned "
        f"(`-bind-to core`) while P <= {a.cores}, unpinned beyond. Load average (1, 5, 15 min) before -> after: "
        f"{a.load} — the machine is shared, so the times are upper bounds. Whole run: {a.seconds} s.",
        "",
        "Each run: `bench_scaling` (bench/scaling/run.sh): forward, MSE loss against a target, backward, gradient "
        "allreduce, SGD update — batch 1 except the grid comparison, 1 warm-up step, the median of 5 (the fastest in the `min` column); compute = "
        "step − exposed halo − allreduce (so it holds halo pack/unpack, the loss and the optimizer). Halo = time "
        "blocked in `Exchange::finish()`; it includes waiting for a slower neighbour.",
        "",
        "`others`: the mean number of runnable processes besides the run's own ranks while it ran "
        "(/proc/loadavg, sampled every 0.5 s; each run first waited up to 20 s for a quiet machine) — where it is "
        "not 0, other work competed for the cores and the times are too long.",
        "",
        "Prediction: `models/perf_model.hpp`, compute from the P = 1 run's per-layer profile (each layer alone, "
        "forward and backward, the CPU time of the fastest of 5 runs) scaled by tile cells "
        "and by the rank's share of the cores (P > cores: cores / P), links from the ping-pong "
        + (f"({links.get('intra_latency_s', 0) * 1e6:.2f} µs, {links.get('intra_bandwidth', 0) / 1e9:.2f} GB/s)"
           if links else "")
        + ", pack costs and overlap 0 from `Machine::cpu_core()`.",
        "",
    ]
    for label in ("strong-1024", "strong-2048", "weak-512"):
        if label in by_label:
            md += series_table(label, by_label[label]) + [""]
    if "grids" in by_label:
        md += grids_table(by_label["grids"]) + [""]
    errors = [(abs(r["predicted"]["step_s"] / r["step_s"] - 1), r["oversubscribed"]) for r in runs]
    fit = [e for e, o in errors if not o]
    over = [e for e, o in errors if o]
    md += ["### Model error", ""]
    if fit:
        md.append(f"Mean |predicted / measured − 1|: {100 * sum(fit) / len(fit):.0f}% over {len(fit)} runs with "
                  f"P <= cores (max {100 * max(fit):.0f}%)" + (
                      f"; {100 * sum(over) / len(over):.0f}% over {len(over)} oversubscribed runs." if over else "."))
    by_cpu = [abs(r["predicted"]["step_s"] / r["cpu_s"] - 1) for r in runs if not r["oversubscribed"]]
    if by_cpu:
        md.append("")
        md.append(f"Against the CPU time of the runs with P <= cores (what the steps would take without other "
                  f"processes): mean {100 * sum(by_cpu) / len(by_cpu):.0f}%, max {100 * max(by_cpu):.0f}%.")
    md += ["", f"![strong scaling]({name}-strong.png)", f"![efficiency]({name}-efficiency.png)",
           f"![step split]({name}-breakdown.png)", ""]
    with open(f"{a.prefix}.md", "w") as f:
        f.write("\n".join(md))
    plot_strong(a.prefix, by_label, a.cores)
    plot_efficiency(a.prefix, by_label, a.cores)
    plot_breakdown(a.prefix, by_label)


if __name__ == "__main__":
    main()

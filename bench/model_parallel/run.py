#!/usr/bin/env python3
"""The COTS HPC curve (Coates et al. 2013): weak scaling of the locally connected stage.

Parameters per rank stay fixed while the image grows with the rank count P: one Le et al.
(2012) stage, local(out=8,k=18,stride=2), l2pool(k=5,stride=1,pad=2), lcn(k=5), on an image
whose output grid is P times the one-rank one (grid 1xPhxPw, each rank one 92x92-output
tile: 65.9e6 parameters per rank; one OpenMP thread per rank). For each P, tessera-train runs a few SGD steps on random
data (MSE to random targets) and the median update time of the steps after the first is
compared with one rank's. Prints a markdown table and, when matplotlib is importable, saves
a PNG plot.

    bench/model_parallel/run.py --train build/apps/tessera-train --ranks 1 2 4 8 \
        --out bench/results/model-parallel-cpu.png

Ranks beyond the machine's cores are labelled oversubscribed: their times include the
sharing of cores, which the "per core share" column divides out (ratio x cores / P).
"""
import argparse
import array
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile

FIELD, STRIDE, MAPS, CHANNELS = 18, 2, 8, 3
TILE_OUT = 92  # output positions per rank and side: a 200x200 image on one rank
STAGE = f"local(out={MAPS},k={FIELD},stride={STRIDE}),l2pool(k=5,stride=1,pad=2),lcn(k=5)"
GRIDS = {1: (1, 1), 2: (1, 2), 4: (2, 2), 8: (2, 4), 16: (4, 4)}


def image_side(outputs):
    """The input side whose local layer has `outputs` positions."""
    return (outputs - 1) * STRIDE + FIELD


def write_data(path, n, h, w, hout, wout):
    """Random images and MSE targets, written with h5import from raw float32."""
    rng = random.Random(1)
    parts = []
    for name, dims, scale in (("images", (n, CHANNELS, h, w), 1.0), ("targets", (n, MAPS, hout, wout), 0.1)):
        raw, conf = path + "." + name + ".bin", path + "." + name + ".conf"
        count = dims[0] * dims[1] * dims[2] * dims[3]
        with open(raw, "wb") as f:
            array.array("f", (scale * rng.random() for _ in range(count))).tofile(f)
        with open(conf, "w") as f:
            f.write(f"PATH {name}\nINPUT-CLASS FP\nINPUT-SIZE 32\nRANK 4\nDIMENSION-SIZES {' '.join(map(str, dims))}\n"
                    "OUTPUT-CLASS FP\nOUTPUT-SIZE 32\nOUTPUT-ARCHITECTURE IEEE\nOUTPUT-BYTE-ORDER LE\n")
        parts += [raw, "-c", conf]
    subprocess.run(["h5import", *parts, "-o", path], check=True)


def run(train, ranks, steps, batch, workdir):
    gh, gw = GRIDS[ranks]
    hout, wout = TILE_OUT * gh, TILE_OUT * gw
    h, w = image_side(hout), image_side(wout)
    data = os.path.join(workdir, f"p{ranks}.h5")
    write_data(data, batch, h, w, hout, wout)
    metrics = os.path.join(workdir, f"p{ranks}.jsonl")
    cmd = ["mpiexec", "-n", str(ranks), train, "--model", STAGE, "--data", data, "--batch", str(batch),
           "--steps", str(steps), "--lr", "0.001", "--grid", f"1x{gh}x{gw}", "--progress", "off",
           "--watchdog", "0", "--metrics", metrics]
    # One thread per rank: every rank gets one core's share, one rank as well as P.
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    header = out.splitlines()[0]
    params = int(re.search(r"\((\d+) parameters\)", header).group(1))
    per_rank = int(re.search(r"parameters\+gradients (\d+) bytes", header).group(1))
    times = [json.loads(line)["step_s"] for line in open(metrics)][1:]
    return {"ranks": ranks, "grid": f"1x{gh}x{gw}", "image": f"{h}x{w}", "params": params,
            "rank_bytes": per_rank, "step_s": statistics.median(times)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", required=True, help="the tessera-train executable")
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--steps", type=int, default=5, help="steps per run; the first is not timed")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--cores", type=int, default=os.cpu_count(), help="ranks above this are oversubscribed")
    ap.add_argument("--out", help="PNG plot of the curve")
    a = ap.parse_args()
    for p in a.ranks:
        if p not in GRIDS:
            sys.exit(f"run.py: --ranks {p}: choose from {sorted(GRIDS)}")
    with tempfile.TemporaryDirectory() as workdir:
        rows = [run(a.train, p, a.steps, a.batch, workdir) for p in a.ranks]
    base = rows[0]["step_s"]
    print(f"Weak scaling of `{STAGE}`, batch {a.batch}, median of {a.steps - 1} updates, {a.cores} cores\n")
    print("| ranks | grid | image | parameters | per rank (params+grads) | update (s) | ratio to 1 rank | "
          "ratio per core share | note |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = r["step_s"] / base
        # P ranks on fewer cores run P/cores times slower from the sharing alone.
        share = ratio * min(1.0, a.cores / r["ranks"])
        note = f"oversubscribed ({r['ranks']} ranks on {a.cores} cores)" if r["ranks"] > a.cores else ""
        print(f"| {r['ranks']} | {r['grid']} | {r['image']} | {r['params']:,} | {r['rank_bytes'] / 1e6:.0f} MB | "
              f"{r['step_s']:.3f} | {ratio:.2f} | {share:.2f} | {note} |")
    if a.out:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("\nmatplotlib is not importable (Debian: python3-matplotlib): no plot", file=sys.stderr)
            return
        xs = [r["ranks"] for r in rows]
        ys = [r["step_s"] / base for r in rows]
        fig, ax = plt.subplots(figsize=(5, 3.5))
        shares = [y * min(1.0, a.cores / x) for x, y in zip(xs, ys)]
        ax.plot(xs, ys, "o-", label="measured")
        ax.plot(xs, shares, "s--", label=f"per core share (x {a.cores} cores / P)")
        ax.axhline(1.0, color="grey", lw=0.8, label="ideal")
        ax.axhline(1.15, color="grey", lw=0.8, ls="--", label="goal 1.15")
        for r, y in zip(rows, ys):
            if r["ranks"] > a.cores:
                ax.annotate("oversubscribed", (r["ranks"], y), fontsize=7, textcoords="offset points", xytext=(4, -10))
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.set_xlabel("ranks (parameters per rank fixed)")
        ax.set_ylabel("update time / 1 rank")
        ax.set_title("Locally connected stage, weak scaling")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(a.out, dpi=120)
        print(f"\nplot: {a.out}")


if __name__ == "__main__":
    main()

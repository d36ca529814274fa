#!/usr/bin/env python3
"""PSNR of a trained denoiser against the degraded input and a classical filter baseline.

Reads tessera-train's --predict-out file (/inputs: the noisy held-out images the model saw,
/outputs: its answers; via h5dump, so no HDF5 module is needed) and the clean held-out
frames (the PNGs tessera-data converted). The baselines — a Gaussian filter and a median
filter — have their parameter chosen on noisy copies of training frames, never on the
held-out ones. PSNR is 10 log10(1 / MSE) on [0, 1] pixels, the answer clipped to [0, 1],
per image and then averaged. Writes one PNG per held-out image (a crop at full resolution:
degraded | baseline | U-Net | clean) and a JSON summary; prints a table.
"""
import argparse
import json
import os
import subprocess
import tempfile

import numpy as np
from PIL import Image
from scipy import ndimage

GAUSSIAN_SIGMAS = [0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0]
MEDIAN_SIZES = [3, 5, 7]


def read_png(path):  # (C, H, W) in [0, 1], grey as three equal channels (as tessera-data does)
    a = np.asarray(Image.open(path).convert("RGB"), dtype=np.float32) / 255.0
    return a.transpose(2, 0, 1)


def read_dataset(h5, name, shape):
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "data.bin")
        subprocess.run(["h5dump", "-d", name, "-b", "LE", "-o", raw, h5], check=True, stdout=subprocess.DEVNULL)
        data = np.fromfile(raw, dtype="<f4")
    if data.size != np.prod(shape):
        raise SystemExit(f"denoise_report: {h5}{name} holds {data.size} values, expected shape {shape}")
    return data.reshape(shape)


def psnr(x, clean):
    mse = float(np.mean((np.clip(x, 0, 1) - clean) ** 2))
    return 10 * np.log10(1 / mse)


def gaussian(x, sigma):
    return ndimage.gaussian_filter(x, sigma=(0, sigma, sigma))


def median(x, size):
    return ndimage.median_filter(x, size=(1, size, size))


def choose(filter_, params, noisy, clean):
    """The parameter with the best mean PSNR over the (training) pairs."""
    scores = {p: float(np.mean([psnr(filter_(n, p), c) for n, c in zip(noisy, clean)])) for p in params}
    return max(scores, key=scores.get), scores


def panel(images, crop):
    h, w = images[0].shape[1:]
    top, left = max(h // 4 - crop // 2, 0), max(w // 4 - crop // 2, 0)  # inside the top-left piece
    tiles = [np.clip(i[:, top:top + crop, left:left + crop], 0, 1) for i in images]
    gap = np.ones((3, crop, 4), dtype=np.float32)
    row = np.concatenate(sum(([t, gap] for t in tiles), [])[:-1], axis=2)
    return Image.fromarray((row.transpose(1, 2, 0) * 255 + 0.5).astype(np.uint8))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--predictions", required=True, help="tessera-train --predict-out file")
    parser.add_argument("--held-out", nargs="+", required=True, help="the clean held-out PNGs, in the file's order")
    parser.add_argument("--train", nargs="+", required=True, help="training PNGs to choose the baselines' parameters on")
    parser.add_argument("--noise", type=float, required=True, help="the sigma the model was trained with")
    parser.add_argument("--out", required=True, help="directory for the PNGs and results.json")
    parser.add_argument("--crop", type=int, default=256, help="side of the PNG crops")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    clean = [read_png(p) for p in args.held_out]
    shape = (len(clean),) + clean[0].shape
    noisy = read_dataset(args.predictions, "/inputs", shape)
    unet = read_dataset(args.predictions, "/outputs", shape)
    seen = float(np.std(noisy - np.stack(clean)))
    if abs(seen - args.noise) > 0.1 * args.noise:
        raise SystemExit(f"denoise_report: the inputs differ from the clean images by {seen:.4f}, not --noise {args.noise}")

    rng = np.random.default_rng(args.seed)
    train_clean = [read_png(p) for p in args.train]
    train_noisy = [c + rng.normal(0, args.noise, c.shape).astype(np.float32) for c in train_clean]
    sigma, gaussian_scores = choose(gaussian, GAUSSIAN_SIGMAS, train_noisy, train_clean)
    size, median_scores = choose(median, MEDIAN_SIZES, train_noisy, train_clean)

    rows = []
    for i, path in enumerate(args.held_out):
        g, m = gaussian(noisy[i], sigma), median(noisy[i], size)
        rows.append({"image": os.path.basename(path), "degraded": psnr(noisy[i], clean[i]), "gaussian": psnr(g, clean[i]),
                     "median": psnr(m, clean[i]), "unet": psnr(unet[i], clean[i])})
        best = g if rows[-1]["gaussian"] >= rows[-1]["median"] else m
        panel([noisy[i], best, unet[i], clean[i]], min(args.crop, *clean[i].shape[1:])).save(
            os.path.join(args.out, os.path.splitext(os.path.basename(path))[0] + "-compare.png"))
    mean = {k: float(np.mean([r[k] for r in rows])) for k in ("degraded", "gaussian", "median", "unet")}
    summary = {"noise": args.noise, "gaussian_sigma": sigma, "median_size": size, "train_frames": len(args.train),
               "gaussian_train_psnr": gaussian_scores, "median_train_psnr": median_scores, "images": rows, "mean": mean}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(summary, f, indent=1)

    print(f"baselines chosen on {len(args.train)} training frames: gaussian sigma {sigma}, median {size}x{size}")
    print(f"{'held-out image':<28} {'degraded':>9} {'gaussian':>9} {'median':>9} {'U-Net':>9}   (PSNR, dB)")
    for r in rows + [dict(mean, image="mean")]:
        print(f"{r['image']:<28} {r['degraded']:9.2f} {r['gaussian']:9.2f} {r['median']:9.2f} {r['unet']:9.2f}")
    baseline = max(mean["gaussian"], mean["median"])
    print(f"U-Net {'beats' if mean['unet'] > baseline else 'does not beat'} the best baseline by "
          f"{mean['unet'] - baseline:+.2f} dB")


if __name__ == "__main__":
    main()

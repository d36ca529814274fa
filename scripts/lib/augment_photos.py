#!/usr/bin/env python3
"""Square PNG frames for the U-Net example (scripts/unet-example.sh).

train: for each photograph, COUNT frames, each a random square crop (60-100% of the shorter
side), a random horizontal flip and a random quarter turn, resized to SIZE x SIZE (bicubic).
held-out: each photograph's centre square resized to SIZE x SIZE, no augmentation.
The frames are written as DIR/<photo>-<k>.png and listed on stdout in order.
"""
import argparse
import os

import numpy as np
from PIL import Image


def load(path):
    image = Image.open(path)
    return image.convert("L" if image.mode in ("L", "I", "I;16", "1") else "RGB")


def centre_square(image):
    w, h = image.size
    side = min(w, h)
    left, top = (w - side) // 2, (h - side) // 2
    return image.crop((left, top, left + side, top + side))


def augmented(image, rng):
    w, h = image.size
    side = int(min(w, h) * rng.uniform(0.6, 1.0))
    left, top = int(rng.integers(0, w - side + 1)), int(rng.integers(0, h - side + 1))
    frame = image.crop((left, top, left + side, top + side))
    if rng.integers(2):
        frame = frame.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    turns = int(rng.integers(4))
    return frame.rotate(90 * turns, expand=True) if turns else frame


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["train", "held-out"])
    parser.add_argument("--out", required=True, help="directory for the PNG frames")
    parser.add_argument("--size", type=int, required=True, help="frame side in pixels")
    parser.add_argument("--count", type=int, default=1, help="train: frames per photograph")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("photos", nargs="+")
    args = parser.parse_args()
    if args.size < 1 or args.count < 1:
        parser.error("--size and --count must be positive")
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    for path in args.photos:
        image = load(path)
        stem = os.path.splitext(os.path.basename(path))[0]
        frames = [centre_square(image)] if args.mode == "held-out" else [augmented(image, rng) for _ in range(args.count)]
        for k, frame in enumerate(frames):
            name = os.path.join(args.out, f"{stem}-{k}.png")
            frame.resize((args.size, args.size), Image.Resampling.BICUBIC).save(name)
            print(name)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Square PNG frames for the U-Net example (scripts/unet-example.sh).

Each SIZE x SIZE frame is a 2x2 mosaic of pieces of SIZE/2: a random square crop of a
photograph (0.8-1.25 times the piece's side, at most the photograph's shorter side), a
random horizontal flip and a random quarter turn, resized to the piece (bicubic; a
photograph smaller than the piece is enlarged). The photographs take turns, in a shuffled
order, so each gives about as many pieces. Pieces keep the photographs' own scale (a
1024x1024 frame of one 512x512 photograph enlarged twice would be so smooth that a plain
blur removes most noise). Writes DIR/frame-<k>.png and lists them on stdout in order.
"""
import argparse
import os

import numpy as np
from PIL import Image


def load(path):
    image = Image.open(path)
    return image.convert("L" if image.mode in ("L", "I", "I;16", "1") else "RGB").convert("RGB")


def piece(image, side, rng):
    w, h = image.size
    crop = min(min(w, h), int(round(side * rng.uniform(0.8, 1.25))))
    left, top = int(rng.integers(0, w - crop + 1)), int(rng.integers(0, h - crop + 1))
    out = image.crop((left, top, left + crop, top + crop))
    if rng.integers(2):
        out = out.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    turns = int(rng.integers(4))
    if turns:
        out = out.rotate(90 * turns, expand=True)
    return out.resize((side, side), Image.Resampling.BICUBIC)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="directory for the PNG frames")
    parser.add_argument("--size", type=int, required=True, help="frame side in pixels (even)")
    parser.add_argument("--frames", type=int, required=True, help="how many frames")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("photos", nargs="+")
    args = parser.parse_args()
    if args.size < 2 or args.size % 2 or args.frames < 1:
        parser.error("--size must be even and at least 2, --frames positive")
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    photos = [load(p) for p in args.photos]
    turns = []
    half = args.size // 2
    for k in range(args.frames):
        frame = Image.new("RGB", (args.size, args.size))
        for q in range(4):
            if not turns:
                turns = list(rng.permutation(len(photos)))
            frame.paste(piece(photos[turns.pop()], half, rng), ((q % 2) * half, (q // 2) * half))
        name = os.path.join(args.out, f"frame-{k}.png")
        frame.save(name)
        print(name)


if __name__ == "__main__":
    main()

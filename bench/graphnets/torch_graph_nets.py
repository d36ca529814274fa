#!/usr/bin/env python3
"""PyTorch (CPU) side of bench/graphnets/run.sh: the training step of Tessera's graph presets.

    torch_graph_nets.py --net resnet|unet --width W [--depth D] [--classes K]
                        --shape NxCxHxW [--noise 0.1] [--threads N] [--warmup 1]
                        [--repeats 3] [--lr 1e-4] [--precision fp32|bf16] [--label TEXT]

The networks are written out as Tessera's presets define them (docs/models.md, "resnet and
unet: graph presets"): resnet(depth=18|34, width, classes) with basic blocks, bias-free
convolutions before batch norm, a 1x1 stride-2 projection in each down block, gap and a
linear head; unet(depth, width, out=C) with double convolutions, 2x2 max pooling,
ConvTranspose2d(k=2, stride=2) and torch.cat([skip, up]). One step is what tessera-train
takes: forward, loss (ResNet: cross-entropy against label 0; U-Net: MSE of the denoised
input, Gaussian noise of --noise added, against the clean one), zero_grad, backward, plain
SGD. --precision bf16 runs forward and loss under torch.autocast("cpu", dtype=torch.bfloat16)
(fp32 master weights and gradients: PyTorch's mixed precision, beside tessera-train
--precision bf16). Prints one JSON line: step_s (median over repeats after warm-up), step_s_min,
step_s_max, parameters. Exits 3 when torch cannot be imported.
"""

import argparse
import json
import re
import statistics
import sys
import time

NO_TORCH = 3


def parse_shape(text):
    if not re.fullmatch(r"[1-9]\d*x[1-9]\d*x[1-9]\d*x[1-9]\d*", text):
        raise argparse.ArgumentTypeError(f"'{text}' is not NxCxHxW")
    return tuple(int(v) for v in text.split("x"))


def build(torch, args, channels):
    nn = torch.nn

    def conv_bn(a, b, k, stride=1, pad=0, relu=True):
        layers = [nn.Conv2d(a, b, k, stride=stride, padding=pad, bias=False), nn.BatchNorm2d(b)]
        return nn.Sequential(*layers, *([nn.ReLU()] if relu else []))

    class Basic(nn.Module):
        def __init__(self, a, c, stride):
            super().__init__()
            self.body = nn.Sequential(conv_bn(a, c, 3, stride, 1), conv_bn(c, c, 3, 1, 1, relu=False))
            self.skip = conv_bn(a, c, 1, stride, relu=False) if stride != 1 else nn.Identity()

        def forward(self, x):
            return torch.relu(self.body(x) + self.skip(x))

    class Unet(nn.Module):
        def __init__(self, depth, w, c):
            super().__init__()

            def double(a, b):
                return nn.Sequential(conv_bn(a, b, 3, 1, 1), conv_bn(b, b, 3, 1, 1))

            self.down = nn.ModuleList([double(c if l == 0 else w << (l - 1), w << l) for l in range(depth)])
            self.bottom = double(w << (depth - 1), w << depth)
            self.ups = nn.ModuleList([nn.ConvTranspose2d(w << (l + 1), w << l, 2, stride=2) for l in reversed(range(depth))])
            self.doubles = nn.ModuleList([double(2 * (w << l), w << l) for l in reversed(range(depth))])
            self.head = nn.Conv2d(w, c, 1)

        def forward(self, x):
            skips = []
            for level in self.down:
                x = level(x)
                skips.append(x)
                x = torch.nn.functional.max_pool2d(x, 2)
            x = self.bottom(x)
            for up, double, skip in zip(self.ups, self.doubles, reversed(skips)):
                x = double(torch.cat([skip, up(x)], dim=1))
            return self.head(x)

    if args.net == "unet":
        return Unet(args.depth, args.width, channels)
    blocks = {18: [2, 2, 2, 2], 34: [3, 4, 6, 3]}[args.depth]
    w = args.width
    layers = [conv_bn(channels, w, 7, 2, 3), nn.MaxPool2d(3, stride=2, padding=1)]
    a = w
    for stage, count in enumerate(blocks):
        c = w << stage
        for i in range(count):
            layers.append(Basic(a, c, 2 if stage > 0 and i == 0 else 1))
            a = c
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(a, args.classes)]
    return nn.Sequential(*layers)


def resident_kib(key):
    """VmRSS (now) or VmHWM (peak) of this process, in KiB: measured as tessera-train measures
    its own, so the two peaks' growth over the moment before the model was built compare."""
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    sys.exit(f"torch_graph_nets.py: no {key} in /proc/self/status")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--net", choices=["resnet", "unet"], required=True)
    parser.add_argument("--width", type=int, required=True)
    parser.add_argument("--depth", type=int, help="resnet: 18 or 34 (18); unet: levels (4)")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--shape", type=parse_shape, required=True)
    parser.add_argument("--noise", type=float, default=0.1)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    args.depth = args.depth or (18 if args.net == "resnet" else 4)
    if args.net == "resnet" and args.depth not in (18, 34):
        parser.error("--depth of a resnet is 18 or 34")
    if args.width < 1 or args.depth < 1 or args.repeats < 1 or args.warmup < 0:
        parser.error("--width, --depth and --repeats must be positive, --warmup not negative")
    try:
        import torch
    except ImportError as e:
        print(f"torch_graph_nets.py: skip: torch is not importable by {sys.executable} ({e})", file=sys.stderr)
        sys.exit(NO_TORCH)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(1)

    n, c, h, w = args.shape
    before = resident_kib("VmRSS")
    model = build(torch, args, c).train()
    generator = torch.Generator().manual_seed(1)
    clean = torch.rand(args.shape, generator=generator)
    labels = torch.zeros(n, dtype=torch.long)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    times = []
    for i in range(args.warmup + args.repeats):
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            if args.net == "unet":
                noisy = clean + args.noise * torch.randn(args.shape, generator=generator)
                loss = torch.nn.functional.mse_loss(model(noisy).float(), clean)
            else:
                loss = torch.nn.functional.cross_entropy(model(clean), labels)
        optimizer.zero_grad(set_to_none=False)
        loss.backward()
        optimizer.step()
        if i >= args.warmup:
            times.append(time.perf_counter() - t0)
    print(json.dumps({"label": args.label, "step_s": statistics.median(times), "step_s_min": min(times),
                      "step_s_max": max(times), "parameters": sum(p.numel() for p in model.parameters()),
                      "peak_growth_bytes": (resident_kib("VmHWM") - before) * 1024,
                      "threads": torch.get_num_threads(), "precision": args.precision, "torch": torch.__version__}))


if __name__ == "__main__":
    main()

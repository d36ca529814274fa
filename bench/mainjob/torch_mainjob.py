#!/usr/bin/env python3
"""PyTorch side of bench/mainjob/run.sh: trains the main job's net on Fashion-MNIST.

    torch_mainjob.py --model SPEC --expect-parameters N [--source DIR] [--limit 0]
                     [--batch 64] [--lr 0.002] [--steps 60] [--skip 10] [--threads 2]
                     [--autocast off|bf16] [--device cpu|cuda]

SPEC is the sequential spec Tessera resolved the preset to (run.sh reads it from
tessera-train --verbose), mapped to torch.nn by bench/layers/torch_layers.py: the same
layers, padding, strides, batch norm (training mode, batch statistics) and pooling. The
net must have N parameters, Tessera's count: otherwise the script refuses to train (exit 1).

The data are the Fashion-MNIST training images and labels of the Debian package
dataset-fashion-mnist (--source: the gzip'd IDX files tessera-data converts to the HDF5
file tessera-train reads; --limit: its first N samples, as tessera-data --limit), scaled
by 1/255 as tessera-train scales uint8 pixels. One step, all of it timed:

    batch = next --batch samples of a per-epoch shuffle (torch.Generator, seed 1)
    loss = cross_entropy(model(x / 255), labels); zero_grad; backward; Adam step

with torch.optim.Adam(lr, betas (0.9, 0.999), eps 1e-8) as Tessera's adam. --autocast bf16
runs the forward and the loss under torch.autocast(DEVICE, dtype=torch.bfloat16), PyTorch's
mixed precision: convolutions and linear layers in bf16, the weights (the masters), their
gradients and Adam's state in fp32, backward outside the autocast region as PyTorch's
recipe has it, no gradient scaler (bf16 has fp32's exponent range); the counterpart of
tessera-train --precision bf16 (docs/training.md, "Mixed precision"). Prints one JSON line:
precision (fp32, or bf16 under autocast), parameters, steps, skip, images_per_s (batch *
timed steps / their total time, the first --skip steps untimed), step_s (mean of the timed
steps), step_s_median, cpu_s (mean process CPU time per timed step, all threads), first and
last loss. --device cuda trains on the GPU (beside a CUDA build of Tessera; TF32 off, as
Tessera's cuDNN calls run fp32 in FMA math): the data set moves there once, each step's
loss.item() waits for the step's kernels. Exits 3 with a one-line message when torch cannot be imported, as
bench/scaling/torch_net.py does.
"""

import argparse
import gzip
import json
import os
import statistics
import sys
import time
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here.parent / "layers"))
sys.path.insert(0, str(here.parent / "scaling"))
from torch_layers import Skip, build  # noqa: E402  (the one spec -> torch.nn mapping)
from torch_net import NO_TORCH, import_torch  # noqa: E402

DEFAULT_SOURCE = "/usr/share/datasets/fashion-mnist"  # apps/data/fashion_mnist.hpp's default


def read_idx(path, limit):
    """The array of a gzip'd IDX file (unsigned bytes), its first `limit` entries (0: all)."""
    import numpy as np

    with gzip.open(path, "rb") as f:
        data = f.read()
    if data[:2] != b"\0\0" or data[2] != 0x08:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes")
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(data[3])]
    array = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * len(dims)).reshape(dims)
    return np.array(array[:limit] if limit > 0 else array)  # a writable copy for torch.from_numpy


def train(torch, a):
    import numpy as np

    images = read_idx(Path(a.source) / "train-images-idx3-ubyte.gz", a.limit)
    labels = read_idx(Path(a.source) / "train-labels-idx1-ubyte.gz", a.limit)
    images = torch.from_numpy(images).unsqueeze(1).to(a.device)  # (N, 1, 28, 28) uint8
    labels = torch.from_numpy(labels.astype(np.int64)).to(a.device)
    if len(images) < a.batch:
        raise ValueError(f"{len(images)} training images, fewer than one batch of {a.batch}")
    model, _ = build(torch, a.model, (a.batch,) + tuple(images.shape[1:]))
    parameters = sum(p.numel() for p in model.parameters())
    if parameters != a.expect_parameters:
        raise ValueError(f"the PyTorch net has {parameters} parameters but Tessera's has {a.expect_parameters}: "
                         "not the same net, refusing to compare")
    model.to(a.device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    loss_fn = torch.nn.CrossEntropyLoss()  # mean over the batch, as Tessera's cross-entropy
    generator = torch.Generator().manual_seed(1)
    per_epoch = len(images) // a.batch
    order, step_s, cpu_s, losses = None, [], [], []
    for step in range(a.steps):
        c0 = time.process_time()
        t0 = time.perf_counter()
        if step % per_epoch == 0:
            order = torch.randperm(len(images), generator=generator).to(a.device)
        index = order[(step % per_epoch) * a.batch:(step % per_epoch + 1) * a.batch]
        x = images[index].float().mul_(1.0 / 255.0)
        with torch.autocast(a.device, dtype=torch.bfloat16, enabled=a.autocast == "bf16"):
            loss = loss_fn(model(x), labels[index])
        optimizer.zero_grad(set_to_none=False)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        t1 = time.perf_counter()
        c = time.process_time() - c0
        if step >= a.skip:
            step_s.append(t1 - t0)
            cpu_s.append(c)
    return parameters, step_s, cpu_s, losses


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a Tessera sequential spec (not a preset name)")
    ap.add_argument("--expect-parameters", type=int, required=True, help="Tessera's parameter count")
    ap.add_argument("--source", default=DEFAULT_SOURCE, help="directory of Fashion-MNIST's gzip'd IDX files")
    ap.add_argument("--limit", type=int, default=0, help="only the first N training samples; 0: all")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.002)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--skip", type=int, default=10, help="untimed warm-up steps (of --steps)")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "0") or 0))
    ap.add_argument("--autocast", choices=("off", "bf16"), default="off",
                    help="bf16: forward and loss under torch.autocast(DEVICE, dtype=torch.bfloat16)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    a = ap.parse_args()
    if a.batch < 1 or a.limit < 0 or not 0 <= a.skip < a.steps:
        ap.error("need --batch >= 1, --limit >= 0 and 0 <= --skip < --steps")
    torch = import_torch("torch_mainjob.py", a.threads)
    if torch is None:
        return NO_TORCH
    if a.device == "cuda":
        if not torch.cuda.is_available():
            ap.error("--device cuda: this torch sees no GPU")
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    try:
        parameters, step_s, cpu_s, losses = train(torch, a)
    except (Skip, ValueError, RuntimeError, OSError) as e:
        print(f"torch_mainjob.py: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 1
    print(json.dumps({
        "bench": "torch_mainjob", "precision": "bf16" if a.autocast == "bf16" else "fp32", "model": a.model,
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "mkldnn": torch.backends.mkldnn.is_available(), "device": a.device, "parameters": parameters, "batch": a.batch,
        "steps": a.steps, "skip": a.skip, "images_per_s": a.batch * len(step_s) / sum(step_s),
        "step_s": sum(step_s) / len(step_s), "step_s_median": statistics.median(step_s),
        "cpu_s": sum(cpu_s) / len(cpu_s), "first_loss": losses[0], "last_loss": losses[-1],
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())

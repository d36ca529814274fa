#!/usr/bin/env python3
# Loads a Tessera checkpoint into the PyTorch module of the same structure.
#
#   checkpoint_to_torch.py CHECKPOINT [--save FILE.pt]
#   checkpoint_to_torch.py CHECKPOINT --check-eval DATA METRICS [--batch B]
#
# Every /params/<path>/<name> dataset becomes the state_dict entry "<path>.<name>"
# (docs/checkpoints.md, "Into PyTorch"). For the `resnet` and `unet` presets the script
# builds the nn.Module of the same structure (resnet: torchvision's names; unet: the node
# paths of the preset), loads the state_dict with every key required, and --save writes it
# with torch.save. --check-eval runs the module in evaluation mode (batch norm on its
# running statistics) over DATA — an HDF5 file of /images with /labels or /targets, read as
# tessera-train reads it — and compares the mean loss with the last evaluation that
# tessera-train wrote to METRICS (JSON lines): equal within 1e-4 relative means the module
# computes what Tessera computed with the same weights.
#
# Exit status: 0 loaded (and equal), 1 a mismatch or an unusable file, 2 bad arguments,
# 77 this python has no torch or no h5py (scripts/setup-bench.sh makes a venv with both).
import argparse
import json
import re
import sys

NO_PACKAGE = 77


def import_packages():
    """(torch, h5py), or None after saying on stderr which one this python lacks."""
    try:
        import h5py
        import torch
    except ImportError as e:
        print(f"checkpoint_to_torch.py: skip: {e.name} is not importable by {sys.executable}; "
              "scripts/setup-bench.sh prints a python that has torch and h5py", file=sys.stderr)
        return None
    torch.manual_seed(1)
    return torch, h5py


def text(dataset):
    value = dataset[()]
    return value.decode() if isinstance(value, bytes) else str(value)


def tessera_state_dict(torch, h5py, path):
    """The state_dict a Tessera checkpoint holds ({"layer1.0.conv1.weight": tensor, ...}), and
    its metadata (format, step, model_spec, ...)."""
    with h5py.File(path, "r") as f:
        state = {f"{node}.{name}": torch.from_numpy(tensor[()])
                 for node, group in f["params"].items() for name, tensor in group.items()}
        meta = {key: (text(v) if v.dtype.kind in "SOU" else int(v[0])) for key, v in f["meta"].items()}
    return state, meta


def batch_norm(nn, c):
    return nn.BatchNorm2d(c, eps=1e-5, momentum=0.1)  # Tessera's batchnorm defaults


def resnet(torch, channels, depth=18, width=64, classes=1000):
    """The `resnet` preset: torchvision's ResNet-18/34 structure and names, any width."""
    nn = torch.nn

    class BasicBlock(nn.Module):
        def __init__(self, cin, c, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, c, 3, stride, 1, bias=False)
            self.bn1 = batch_norm(nn, c)
            self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
            self.bn2 = batch_norm(nn, c)
            self.downsample = None
            if stride != 1:
                self.downsample = nn.Sequential(nn.Conv2d(cin, c, 1, stride, bias=False), batch_norm(nn, c))

        def forward(self, x):
            y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
            return torch.relu(y + (x if self.downsample is None else self.downsample(x)))

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(channels, width, 7, 2, 3, bias=False)
            self.bn1 = batch_norm(nn, width)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            blocks = {18: [2, 2, 2, 2], 34: [3, 4, 6, 3]}[depth]
            cin = width
            for stage, count in enumerate(blocks):
                c = width << stage
                layers = [BasicBlock(cin if b == 0 else c, c, 2 if stage > 0 and b == 0 else 1) for b in range(count)]
                setattr(self, f"layer{stage + 1}", nn.Sequential(*layers))
                cin = c
            self.fc = nn.Linear(cin, classes)

        def forward(self, x):
            x = self.maxpool(torch.relu(self.bn1(self.conv1(x))))
            for stage in range(4):
                x = getattr(self, f"layer{stage + 1}")(x)
            x = x.mean(dim=(2, 3))
            return self.fc(x)[:, :, None, None]  # Tessera's head output is (N, K, 1, 1)

    return ResNet()


def unet(torch, channels, depth=4, width=32, out=None):
    """The `unet` preset, its modules named by the preset's node paths: e<l> the encoder
    levels' double convs, then positions in the top chain (the bottleneck "2·depth", the
    up blocks after it, each "<p>.0" deconv and "<p>.2" double conv; the output 1x1 last)."""
    nn = torch.nn
    out = channels if out is None else out

    def double(cin, c):
        return nn.Sequential(nn.Conv2d(cin, c, 3, 1, 1, bias=False), batch_norm(nn, c), nn.ReLU(),
                             nn.Conv2d(c, c, 3, 1, 1, bias=False), batch_norm(nn, c), nn.ReLU())

    class Up(nn.Module):
        def __init__(self, cin, c):
            super().__init__()
            self.add_module("0", nn.ConvTranspose2d(cin, c, 2, 2))  # weight (in, out, kh, kw) as Tessera's
            self.add_module("2", double(2 * c, c))

        def forward(self, x, skip):
            return getattr(self, "2")(torch.cat([skip, getattr(self, "0")(x)], dim=1))  # concat[skip, prev]

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            cin = channels
            for level in range(depth):
                self.add_module(f"e{level}", double(cin, width << level))
                cin = width << level
            self.add_module(str(2 * depth), double(cin, width << depth))
            for k, level in enumerate(reversed(range(depth))):
                self.add_module(str(2 * depth + 1 + k), Up(width << (level + 1), width << level))
            self.add_module(str(3 * depth + 1), nn.Conv2d(width, out, 1))

        def forward(self, x):
            skips = []
            for level in range(depth):
                x = getattr(self, f"e{level}")(x)
                skips.append(x)
                x = torch.max_pool2d(x, 2)
            x = getattr(self, str(2 * depth))(x)
            for k in range(depth):
                x = getattr(self, str(2 * depth + 1 + k))(x, skips[depth - 1 - k])
            return getattr(self, str(3 * depth + 1))(x)

    return UNet()


def model_for(torch, state):
    """The nn.Module of the preset whose weights `state` holds, its options read from the
    tensors' names and shapes (the checkpoint's /meta/model_spec is the expanded graph), or
    a ValueError."""
    if "conv1.weight" in state and "fc.weight" in state:
        stages = [len({k.split(".")[1] for k in state if k.startswith(f"layer{s}.")}) for s in range(1, 5)]
        depth = {(2, 2, 2, 2): 18, (3, 4, 6, 3): 34}.get(tuple(stages))
        if depth is None:
            raise ValueError(f"resnet stages of {stages} blocks are neither ResNet-18's nor ResNet-34's")
        return resnet(torch, state["conv1.weight"].shape[1], depth, state["conv1.weight"].shape[0],
                      state["fc.weight"].shape[0])
    if "e0.0.weight" in state:
        depth = len({k.split(".")[0] for k in state if re.match(r"e[0-9]+\.", k)})
        head = state[f"{3 * depth + 1}.weight"]
        return unet(torch, state["e0.0.weight"].shape[1], depth, state["e0.0.weight"].shape[0], head.shape[0])
    raise ValueError("the checkpoint holds neither the resnet nor the unet preset (no conv1/fc, no e0); "
                     "tessera_state_dict() still gives its state_dict")


def load(torch, module, state):
    """Loads `state` with every parameter and buffer key required; PyTorch's batch-norm step
    counters (num_batches_tracked), which Tessera does not keep, are the only keys allowed
    to be missing."""
    missing, unexpected = module.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise ValueError(f"state_dict keys differ: missing {missing[:5]}, unexpected {unexpected[:5]}")


def images_of(torch, h5py, path):
    """/images as tessera-train reads them (uint8 scaled by 1/255 in float32), and the
    /labels or /targets."""
    with h5py.File(path, "r") as f:
        images = torch.from_numpy(f["images"][()])
        if images.dtype == torch.uint8:
            images = images.float() * torch.tensor(1.0 / 255.0, dtype=torch.float32)
        if "labels" in f:
            return images, torch.from_numpy(f["labels"][()]), None
        return images, None, torch.from_numpy(f["targets"][()])


def last_evaluation(path):
    with open(path) as f:
        records = [r for r in map(json.loads, filter(str.strip, f)) if r.get("eval")]
    if not records:
        raise ValueError(f"{path} holds no evaluation record (run tessera-train with --val-data)")
    return records[-1]


def evaluation_loss(torch, module, images, labels, targets, batch):
    """The mean loss over every sample, as tessera-train's evaluation: cross entropy per
    sample for labels; for targets the MSE of each full batch of `batch` (a last partial
    batch is skipped, as there)."""
    module.eval()
    with torch.no_grad():
        if labels is not None:
            logits = torch.cat([module(images[i:i + batch]) for i in range(0, len(images), batch)])
            return torch.nn.functional.cross_entropy(logits.double().flatten(1), labels).item(), len(images)
        full = len(images) // batch * batch
        losses = [torch.nn.functional.mse_loss(module(images[i:i + batch]).double(), targets[i:i + batch].double()).item()
                  for i in range(0, full, batch)]
        return sum(losses) / len(losses), full


def main(argv):
    parser = argparse.ArgumentParser(description="Load a Tessera checkpoint into PyTorch.")
    parser.add_argument("checkpoint")
    parser.add_argument("--save", help="write the module's state_dict here (torch.save)")
    parser.add_argument("--check-eval", nargs=2, metavar=("DATA", "METRICS"),
                        help="compare the module's evaluation loss on DATA with METRICS' last evaluation")
    parser.add_argument("--batch", type=int, default=64, help="tessera-train's --batch (targets: full batches only)")
    a = parser.parse_args(argv)
    packages = import_packages()
    if packages is None:
        return NO_PACKAGE
    torch, h5py = packages
    try:
        state, meta = tessera_state_dict(torch, h5py, a.checkpoint)
        module = model_for(torch, state)
        load(torch, module, state)
        print(f"checkpoint_to_torch.py: {a.checkpoint} at step {meta.get('step')}: "
              f"{len(state)} tensors loaded into {type(module).__name__}")
        if a.save:
            torch.save(module.state_dict(), a.save)
        if a.check_eval:
            data, metrics = a.check_eval
            images, labels, targets = images_of(torch, h5py, data)
            loss, samples = evaluation_loss(torch, module, images, labels, targets, a.batch)
            want = last_evaluation(metrics)
            error = abs(loss - want["loss"]) / max(abs(want["loss"]), 1e-30)
            print(f"checkpoint_to_torch.py: evaluation loss on {samples} samples: PyTorch {loss:.9g}, "
                  f"Tessera {want['loss']:.9g} ({want['samples']} samples), relative difference {error:.2e}")
            if samples != want["samples"] or not error <= 1e-4:
                print("checkpoint_to_torch.py: error: PyTorch's module does not compute what Tessera computed",
                      file=sys.stderr)
                return 1
    except (OSError, KeyError, ValueError, RuntimeError) as e:
        print(f"checkpoint_to_torch.py: error: {type(e).__name__}: {str(e).splitlines()[0]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

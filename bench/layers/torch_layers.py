#!/usr/bin/env python3
"""PyTorch side of bench_layers: times forward + backward of the same cases.

    torch_layers.py [--cases FILE] [--threads N] [--warmup N] [--repeats N]
                    [--format table|tsv] [--case I[,J...]] [--device cpu|cuda]

--device cuda (beside the CUDA build) runs on the GPU through cuDNN with TF32 off, as
Tessera's CUDNN_FMA_MATH; each time waits for the GPU (torch.cuda.synchronize).

Reads the case list bench_layers reads (bench/layers/cases.txt: "<NxCxHxW> <spec>" a line)
and maps each Tessera spec entry to the torch.nn module computing the same thing:

    conv       nn.Conv2d (asymmetric padding: nn.ZeroPad2d first)
    deconv     nn.ConvTranspose2d
    maxpool    nn.MaxPool2d          avgpool  nn.AvgPool2d     l2pool  nn.LPPool2d(2)
    batchnorm  nn.BatchNorm2d (training mode: batch statistics, as Tessera's default)
    relu, leakyrelu, sigmoid, tanh   the nn activations
    upsample   nn.Upsample(mode="nearest")
    flatten    nn.Flatten            linear   nn.Flatten + nn.Linear (Tessera's linear reads
                                              the NCHW input in flatten order)
    gap        nn.AdaptiveAvgPool2d(1)

A layer with no PyTorch counterpart here (local, lcn, ...) or an option with no mapping is
skipped with a note, never guessed. Each repeat runs y = m(x); y.backward(dy) with x
requiring a gradient (Tessera computes dx too); gradients are cleared between repeats,
untimed. Times are milliseconds, medians over repeats; "total" is the median of
forward + backward per repeat; "cpu" the process's CPU time (all threads) for forward +
backward, which a busy machine disturbs less than the wall clock. --format tsv writes the columns bench_layers writes, so
join_results.py can join the two row by row.
"""

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path

DEFAULT_CASES = Path(__file__).resolve().parent / "cases.txt"


class Skip(Exception):
    """A case this script cannot time in PyTorch; the message says why."""


def read_cases(path):
    """[(index, line, shape, spec)] from the shared case list; same rules as layer_cases.cpp."""
    cases = []
    for line_no, raw in enumerate(Path(path).read_text().splitlines(), start=1):
        text = raw.split("#", 1)[0].strip()
        if not text:
            continue
        parts = text.split(None, 1)
        if len(parts) != 2 or not re.fullmatch(r"[1-9]\d*x[1-9]\d*x[1-9]\d*x[1-9]\d*", parts[0]):
            sys.exit(f"{path}:{line_no}: '{text}' is not '<NxCxHxW> <spec>'")
        shape = tuple(int(v) for v in parts[0].split("x"))
        cases.append((len(cases) + 1, line_no, shape, parts[1].strip()))
    if not cases:
        sys.exit(f"the case list '{path}' has no cases")
    return cases


def parse_spec(spec):
    """[(name, {key: value})] for "conv(out=16,k=3),relu" (the grammar of models/spec_parser.hpp).
    Raises ValueError for a malformed spec, as Tessera's parser rejects it."""
    texts, depth, start = [], 0, 0
    for i, ch in enumerate(spec):
        depth += (ch == "(") - (ch == ")")
        if depth not in (0, 1):
            raise ValueError(f"spec '{spec}': unbalanced or nested parentheses at position {i}")
        if ch == "," and depth == 0:
            texts.append(spec[start:i].strip())
            start = i + 1
    if depth:
        raise ValueError(f"spec '{spec}': unbalanced '('")
    texts.append(spec[start:].strip())
    entries = []
    for text in texts:
        m = re.fullmatch(r"([A-Za-z0-9_-]+)\s*(?:\((.*)\))?", text)
        if not m:
            raise ValueError(f"spec entry '{text}' is not name or name(options)")
        options = {}
        for item in filter(None, (s.strip() for s in (m.group(2) or "").split(","))):
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"option '{item}' of {m.group(1)} is not key=value")
            options[key.strip()] = value.strip()
        entries.append((m.group(1), options))
    return entries


class Options:
    """Reads a layer's options; unknown keys are a Skip, so no option is silently ignored."""

    def __init__(self, name, options):
        self.name, self.options, self.used = name, dict(options), set()

    def get(self, key, default=None, kind=int):
        self.used.add(key)
        if key not in self.options:
            return default
        value = self.options[key]
        if kind is bool:
            return value in ("true", "1", "on", "yes")
        return kind(value)

    def pair(self, both, first, second, default):
        """k | kh,kw style: (first, second), each defaulting to `both`, then `default`."""
        b = self.get(both, default)
        return self.get(first, b), self.get(second, b)

    def padding(self):
        p = self.get("pad", 0)
        return tuple(self.get(k, p) for k in ("pad_top", "pad_bottom", "pad_left", "pad_right"))

    def done(self):
        self.used.add("overlap")  # how Tessera schedules the halo; no math
        unknown = sorted(set(self.options) - self.used)
        if unknown:
            raise Skip(f"{self.name} option(s) {', '.join(unknown)} have no PyTorch mapping here")


def module_for(nn, name, raw_options, shape):
    """The torch module for one spec entry on an input of `shape` (N, C, H, W) or (N, F)."""
    o = Options(name, raw_options)
    channels = shape[1]
    if name in ("conv", "deconv"):
        out = o.get("out")
        if out is None:
            raise Skip(f"{name} needs out=")
        kernel = o.pair("k", "kh", "kw", 1)
        stride = o.pair("stride", "sh", "sw", 1)
        dilation = o.pair("dilation", "dh", "dw", 1)
        top, bottom, left, right = o.padding()
        groups, bias = o.get("groups", 1), o.get("bias", True, bool)
        if name == "deconv":
            output_padding = o.pair("out_pad", "out_pad_h", "out_pad_w", 0)
            o.done()
            if (top, left) != (bottom, right):
                raise Skip("deconv with asymmetric padding has no nn.ConvTranspose2d form")
            return nn.ConvTranspose2d(channels, out, kernel, stride, (top, left), output_padding, groups, bias, dilation)
        o.done()
        conv = nn.Conv2d(channels, out, kernel, stride, 0, dilation, groups, bias)
        if (top, left) == (bottom, right):
            conv.padding = (top, left)
            return conv
        return nn.Sequential(nn.ZeroPad2d((left, right, top, bottom)), conv)
    if name in ("maxpool", "avgpool", "l2pool"):
        kernel = o.pair("k", "kh", "kw", None)
        if None in kernel:
            raise Skip(f"{name} needs k=")
        stride = o.pair("stride", "sh", "sw", None)
        stride = tuple(s if s is not None else k for s, k in zip(stride, kernel))
        dilation = o.pair("dilation", "dh", "dw", 1)
        top, bottom, left, right = o.padding()
        if (top, left) != (bottom, right):
            raise Skip(f"{name} with asymmetric padding has no nn form")
        if name == "maxpool":
            o.done()
            return nn.MaxPool2d(kernel, stride, (top, left), dilation)
        if dilation != (1, 1):
            raise Skip(f"{name} with dilation has no nn form")
        if name == "avgpool":
            include = o.get("count_include_pad", True, bool)
            o.done()
            return nn.AvgPool2d(kernel, stride, (top, left), count_include_pad=include)
        o.done()
        if (top, left) != (0, 0):
            raise Skip("l2pool with padding has no nn.LPPool2d form")
        return nn.LPPool2d(2, kernel, stride)
    if name == "batchnorm":
        eps, momentum = o.get("eps", 1e-5, float), o.get("momentum", 0.1, float)
        affine = o.get("affine", True, bool)
        o.get("stats", "spatial", str)  # which ranks share statistics: one process here
        o.done()
        return nn.BatchNorm2d(channels, eps, momentum, affine)
    if name == "leakyrelu":
        slope = o.get("slope", 0.01, float)
        o.done()
        return nn.LeakyReLU(slope)
    if name in ("relu", "sigmoid", "tanh"):
        o.done()
        return {"relu": nn.ReLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh}[name]()
    if name == "upsample":
        scale = o.get("scale", 2)
        o.done()
        return nn.Upsample(scale_factor=scale, mode="nearest")
    if name == "flatten":
        o.done()
        return nn.Flatten()
    if name == "linear":
        out, bias = o.get("out"), o.get("bias", True, bool)
        o.done()
        if out is None:
            raise Skip("linear needs out=")
        features = 1
        for d in shape[1:]:
            features *= d
        layer = nn.Linear(features, out, bias)
        return layer if len(shape) == 2 else nn.Sequential(nn.Flatten(), layer)
    if name == "gap":
        o.done()
        return nn.AdaptiveAvgPool2d(1)
    raise Skip(f"no PyTorch mapping for layer '{name}' in torch_layers.py")


def build(torch, spec, shape):
    """nn.Sequential of the spec's modules and its output shape."""
    modules = []
    probe = torch.zeros(shape)
    with torch.no_grad():
        for name, options in parse_spec(spec):
            modules.append(module_for(torch.nn, name, options, tuple(probe.shape)))
            probe = modules[-1](probe)
    return torch.nn.Sequential(*modules), tuple(probe.shape)


def time_case(torch, spec, shape, warmup, repeats, device="cpu", precision="fp32"):
    """bf16: torch.autocast(bfloat16) around forward and backward, as mixed-precision
    training runs it (fp32 parameters and input, bf16 where autocast casts)."""
    import contextlib
    autocast = (lambda: torch.autocast(device_type=device, dtype=torch.bfloat16)) if precision == "bf16" \
        else contextlib.nullcontext
    model, out_shape = build(torch, spec, shape)
    model.train()
    model.to(device)
    generator = torch.Generator().manual_seed(11)
    x = (torch.rand(shape, generator=generator) * 2 - 1).to(device).requires_grad_()
    dy = (torch.rand(out_shape, generator=generator) * 2 - 1).to(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    forward, backward, total, cpu = [], [], [], []
    for i in range(warmup + repeats):
        model.zero_grad(set_to_none=True)
        x.grad = None
        sync()
        c0 = time.process_time()
        t0 = time.perf_counter()
        with autocast():
            y = model(x)
        sync()
        t1 = time.perf_counter()
        y.backward(dy.to(y.dtype))
        sync()
        t2 = time.perf_counter()
        c = time.process_time() - c0
        del y
        if i >= warmup:
            forward.append(t1 - t0)
            backward.append(t2 - t1)
            total.append(t2 - t0)
            cpu.append(c)
    ms = lambda v: 1e3 * statistics.median(v)
    return ms(forward), ms(backward), ms(total), ms(cpu), "-> " + "x".join(str(d) for d in out_shape)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=str(DEFAULT_CASES))
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "0") or 0),
                    help="torch.set_num_threads (default: OMP_NUM_THREADS, else torch's choice)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--format", choices=("table", "tsv"), default="table")
    ap.add_argument("--case", default="", help="comma-separated case numbers to run (default: all)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                    help="bf16: torch.autocast(bfloat16), to compare with bench_layers --precision bf16")
    a = ap.parse_args()
    if a.repeats < 1 or a.warmup < 0:
        ap.error("--repeats must be >= 1 and --warmup >= 0")

    import torch  # after argument errors, which should not wait for the import

    if a.device == "cuda":
        if not torch.cuda.is_available():
            ap.error("--device cuda: this torch sees no GPU")
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    cases = read_cases(a.cases)
    wanted = {int(v) for v in a.case.split(",") if v.strip()}
    tsv = a.format == "tsv"
    about = (f"torch {torch.__version__} precision={a.precision} threads={torch.get_num_threads()} "
             f"mkldnn={torch.backends.mkldnn.is_available()} python={sys.version.split()[0]}")
    if a.device == "cuda":
        about += f" device={torch.cuda.get_device_name()} cudnn={torch.backends.cudnn.version()} tf32=off"
    if tsv:
        print(f"# {about}\n# {a.warmup} warm-up + {a.repeats} timed repeats")
        print("case\tinput\tspec\tstatus\tforward_ms\tbackward_ms\ttotal_ms\tcpu_ms\tnote")
    else:
        print(about)
        print(f"cases from {a.cases}; {a.warmup} warm-up + {a.repeats} timed repeats; median ms")
        print(f"{'case':<4} {'input':<14} {'spec':<36} {'fwd_ms':>9} {'bwd_ms':>9} {'total_ms':>9} {'cpu_ms':>9}  note")
    for index, line_no, shape, spec in cases:
        if wanted and index not in wanted:
            continue
        shape_text = "x".join(map(str, shape))
        try:
            f, b, t, c, note = time_case(torch, spec, shape, a.warmup, a.repeats, a.device, a.precision)
            status = "ok"
        except Skip as e:
            f = b = t = c = 0.0
            status, note = "skip", str(e)
        except (RuntimeError, ValueError) as e:  # torch rejects the shape or options
            f = b = t = c = 0.0
            status, note = "error", f"{type(e).__name__}: {str(e).splitlines()[0]}"
        if tsv:
            print(f"{index}\t{shape_text}\t{spec}\t{status}\t{f:.3f}\t{b:.3f}\t{t:.3f}\t{c:.3f}\t{note}")
        elif status == "ok":
            print(f"{index:<4} {shape_text:<14} {spec:<36} {f:9.2f} {b:9.2f} {t:9.2f} {c:9.2f}  {note}")
        else:
            print(f"{index:<4} {shape_text:<14} {spec:<36} {status}: {note}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

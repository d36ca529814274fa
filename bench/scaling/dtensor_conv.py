#!/usr/bin/env python3
"""PyTorch DTensor side of a spatially split convolution: what torch.distributed.tensor does
with an image sharded over H or W, and how long its forward + backward takes.

    dtensor_conv.py probe [--ranks 2] [--threads 1]
    dtensor_conv.py time  [--ranks 2] [--threads 1] --grid 1x1x2 [--cases FILE] [--case I,J]
                          [--warmup 1] [--repeats 3]

Starts --ranks processes itself (torch.multiprocessing, gloo on 127.0.0.1; a rank that
gloo aborts is recorded as that item's result and fresh ranks go on). A Tessera grid NxHxW names the DTensor
layout: a device mesh of the dimensions larger than 1, in N, H, W order, and Shard(0),
Shard(2), Shard(3) of the NCHW input on them (1x1x2: mesh (2,), [Shard(3)]; 1x2x2: mesh
(2, 2), [Shard(2), Shard(3)]), so each rank owns the block Tessera's rank of the same
number owns. Weight and bias are Replicate; the output gradient is distributed as the
output came out.

probe: for each convolution variant of a built-in list (kernel, padding, stride, dilation)
and each grid of --ranks ranks, on a small even and a small odd image: runs F.conv2d
forward and backward on DTensors, compares output, input gradient, weight and bias
gradient with the unsharded convolution (max abs difference over the largest magnitude of
the reference; "ok" below 1e-4) and lists the communication: collectives (CommDebugMode)
and point-to-point halo messages (batch_isend_irecv calls, counted here). An exception is
a finding too: its type and first line.

time: the cases of a bench_layers case list (default bench/scaling/dtensor_cases.txt; conv
entries only) on --grid: checks the result against the unsharded convolution first and
times only a correct one; forward + backward, a barrier before each repeat, the slowest
rank, median over repeats. Writes bench_layers' --format tsv columns, so
bench/layers/join_results.py joins it with bench_layers run on the same grid.

Exits 3 with a one-line message when torch cannot be imported.
"""

import argparse
import datetime
import os
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "layers"))
from torch_layers import Skip, module_for, parse_spec, read_cases  # noqa: E402

DEFAULT_CASES = Path(__file__).resolve().parent / "dtensor_cases.txt"
NO_TORCH = 3
TOLERANCE = 1e-4  # relative to the largest magnitude of the reference; fp32 sums in another order

# (label, Conv2d keyword arguments): what a spatially split conv net meets.
PROBE_CONVS = [
    ("k3 pad1", dict(kernel_size=3, padding=1)),
    ("k5 pad2", dict(kernel_size=5, padding=2)),
    ("k3 pad0 (valid)", dict(kernel_size=3, padding=0)),
    ("k3 pad1 stride2", dict(kernel_size=3, padding=1, stride=2)),
    ("k2 stride2 pad0", dict(kernel_size=2, stride=2)),
    ("k3 pad2 dilation2", dict(kernel_size=3, padding=2, dilation=2)),
    ("k3 pad1 no bias", dict(kernel_size=3, padding=1, bias=False)),
]
PROBE_GRIDS = {2: ["1x1x2", "1x2x1", "2x1x1"], 4: ["1x2x2", "1x1x4", "1x4x1", "2x1x2"]}
PROBE_IMAGES = [(2, 4, 24, 32), (2, 4, 25, 37)]  # even; odd (uneven shards)


def parse_grid(text):
    parts = text.split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"grid '{text}' is not NxHxW")
    return tuple(int(p) for p in parts)


def layout(grid):
    """(mesh shape, placements) for a Tessera grid; (1,), [Replicate] for 1x1x1."""
    from torch.distributed.tensor import Replicate, Shard

    dims = [(size, Shard(dim)) for size, dim in zip(grid, (0, 2, 3)) if size > 1]
    if not dims:
        return (1,), [Replicate()]
    return tuple(s for s, _ in dims), [p for _, p in dims]


def text_of(placements):
    return "[" + ", ".join(str(p) for p in placements) + "]"


def shape_text(shape):
    return "x".join(map(str, shape))


def relative_error(torch, got, want):
    if tuple(got.shape) != tuple(want.shape):
        return None
    scale = max(want.abs().max().item(), 1e-30)
    return (got - want).abs().max().item() / scale


class P2PCounter:
    """Counts torch.distributed.batch_isend_irecv calls and the bytes sent through them: the
    halo exchange of DTensor's convolution (torch/distributed/tensor/_tp_conv.py) uses it,
    and CommDebugMode sees only collectives."""

    def __init__(self, dist):
        self.dist, self.calls, self.bytes = dist, 0, 0
        self.original = dist.batch_isend_irecv

    def __enter__(self):
        def counting(ops):
            self.calls += 1
            self.bytes += sum(o.tensor.numel() * o.tensor.element_size() for o in ops
                              if getattr(o.op, "__name__", "") == "isend")
            return self.original(ops)

        self.dist.batch_isend_irecv = counting
        return self

    def __exit__(self, *exc):
        self.dist.batch_isend_irecv = self.original


def describe_comm(comm_counts, p2p):
    parts = [f"{str(op).split('.')[-2] if str(op).endswith('.default') else str(op).split('.')[-1]} x{n}"
             for op, n in comm_counts.items() if n]
    if p2p.calls:
        parts.append(f"halo p2p x{p2p.calls} ({p2p.bytes / 1024:.1f} KiB sent)")
    return ", ".join(parts) or "none"


class Problem:
    """One convolution on one image: parameters, input and output gradient, the same on
    every rank, and the unsharded reference results."""

    def __init__(self, torch, conv, shape, seed=11):
        g = torch.Generator().manual_seed(seed)
        self.conv = conv
        with torch.no_grad():
            for p in conv.parameters():
                p.copy_(torch.rand(p.shape, generator=g) * 2 - 1)
        self.x = torch.rand(shape, generator=g) * 2 - 1
        x = self.x.clone().requires_grad_()
        t0 = time.perf_counter()
        y = conv(x)
        self.dy = torch.rand(y.shape, generator=g) * 2 - 1
        y.backward(self.dy)
        self.reference_s = time.perf_counter() - t0
        self.y, self.dx = y.detach(), x.grad
        self.dw = conv.weight.grad
        self.db = conv.bias.grad if conv.bias is not None else None

    def args(self):
        c = self.conv
        return dict(stride=c.stride, padding=c.padding, dilation=c.dilation, groups=c.groups)


class Sharded:
    """The problem's tensors as DTensors on `mesh`: x with `placements`, weights Replicate."""

    def __init__(self, torch, problem, mesh, placements):
        from torch.distributed.tensor import Replicate, distribute_tensor

        self.torch, self.problem = torch, problem
        replicate = [Replicate()] * mesh.ndim
        self.x = distribute_tensor(problem.x, mesh, placements).requires_grad_()
        self.w = distribute_tensor(problem.conv.weight.detach(), mesh, replicate).requires_grad_()
        self.b = None
        if problem.conv.bias is not None:
            self.b = distribute_tensor(problem.conv.bias.detach(), mesh, replicate).requires_grad_()
        self.mesh = mesh
        self.dy = None

    def forward(self):
        return self.torch.nn.functional.conv2d(self.x, self.w, self.b, **self.problem.args())

    def backward(self, y):
        from torch.distributed.tensor import distribute_tensor

        if self.dy is None or self.dy.placements != y.placements:
            self.dy = distribute_tensor(self.problem.dy, self.mesh, y.placements)
        y.backward(self.dy)

    def zero_grad(self):
        self.x.grad = self.w.grad = None
        if self.b is not None:
            self.b.grad = None

    def check(self, y):
        """('ok' or what differs from the reference, the errors as text). Each result is
        compared as a whole (full_tensor) and, when that fails, block by block: each
        rank's local tensor against the block of the reference its input block implies
        (the block Tessera's rank would own) — to tell wrong numbers from wrong metadata."""
        p = self.problem
        pairs = [("y", y, p.y), ("dx", self.x.grad, p.dx), ("dw", self.w.grad, p.dw)]
        if self.b is not None:
            pairs.append(("db", self.b.grad, p.db))
        wrong, errors = [], []
        for name, got, want in pairs:
            if got is None:
                wrong.append(f"{name} missing (grad None)")
                errors.append(f"{name} -")
                continue
            whole = got.full_tensor()
            e = relative_error(self.torch, whole, want)
            if e is not None and e < TOLERANCE:
                errors.append(f"{name} {e:.1e}")
                continue
            what = (f"{name} shape {shape_text(whole.shape)} != {shape_text(want.shape)}" if e is None
                    else f"{name} off by {e:.1e}")
            errors.append(f"{name} shape" if e is None else f"{name} {e:.1e}")
            if name in ("y", "dx"):
                local = self.local_error(got.to_local(), want)
                what += f" (local blocks {'match' if local is not None and local < TOLERANCE else 'wrong'}"
                what += f", {got.placements[0] if len(got.placements) == 1 else got.placements})"
            wrong.append(what)
        return ("ok" if not wrong else "WRONG: " + "; ".join(wrong)), ", ".join(errors)

    def local_error(self, local, want):
        """Largest relative error over ranks of `local` against the block of `want` that
        the input's placements give this rank (torch.chunk sizes), None if shapes differ."""
        block = want
        coordinate = self.mesh.get_coordinate()
        for mesh_dim, placement in enumerate(self.x.placements):
            if placement.is_shard():
                block = self.torch.chunk(block, self.mesh.size(mesh_dim), dim=placement.dim)[coordinate[mesh_dim]]
        e = relative_error(self.torch, local, block)
        worst = self.torch.tensor([1e30 if e is None else e], dtype=self.torch.float64)
        self.torch.distributed.all_reduce(worst, op=self.torch.distributed.ReduceOp.MAX)
        return None if worst.item() >= 1e30 else worst.item()


def first_line(e):
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:200]


def run_once(torch, dist, sharded):
    """One forward + backward under CommDebugMode and the p2p counter; (y, comm text)."""
    from torch.distributed.tensor.debug import CommDebugMode

    comm = CommDebugMode()
    with comm, P2PCounter(dist) as p2p:
        y = sharded.forward()
        sharded.backward(y)
    return y, describe_comm(comm.get_comm_counts(), p2p)


# ---- items: one probe or timed case each; rows are what rank 0 prints for them ----------

def probe_items(world):
    """[(grid, image, label, Conv2d kwargs)] for `world` ranks."""
    return [(grid, image, label, kwargs) for grid in PROBE_GRIDS.get(world, []) for image in PROBE_IMAGES
            for label, kwargs in PROBE_CONVS]


def time_items(a):
    wanted = {int(v) for v in a.case.split(",") if v.strip()}
    return [(index, shape, spec) for index, _, shape, spec in read_cases(a.cases) if not wanted or index in wanted]


def probe_header(torch, world):
    return [f"torch {torch.__version__}, {world} ranks, gloo; error = max|sharded - unsharded| / max|unsharded|, "
            f"ok < {TOLERANCE:g}; local blocks: each rank's tensor against the reference block its input block implies",
            "",
            "| grid | mesh, input placements | image | conv | result | errors (y, dx, dw, db) | output placements | communication |",
            "|---|---|---|---|---|---|---|---|"]


def probe_row(item, result, errors="-", out_placements="-", comm="-"):
    grid, image, label, _ = item
    mesh_shape, placements = layout(parse_grid(grid))
    return (f"| {grid} | {mesh_shape}, {text_of(placements)} | {shape_text(image)} | {label} | {result.replace('|', '/')} "
            f"| {errors} | {out_placements} | {comm} |")


def probe_one(torch, dist, mesh, item):
    _, image, _, kwargs = item
    torch.manual_seed(3)
    problem = Problem(torch, torch.nn.Conv2d(image[1], 8, **kwargs), image)
    stage = "forward/backward"
    try:
        sharded = Sharded(torch, problem, mesh, layout(parse_grid(item[0]))[1])
        y, comm = run_once(torch, dist, sharded)
        stage = "reading the result"
        result, errors = sharded.check(y)
        return probe_row(item, result, errors, text_of(y.placements), comm)
    except Exception as e:  # noqa: BLE001 (every failure is a finding)
        return probe_row(item, f"error ({stage}): " + first_line(e))


def time_header(torch, world, a):
    mesh_shape, placements = layout(parse_grid(a.grid))
    return [f"# torch {torch.__version__} DTensor, gloo, {world} ranks x {a.threads} thread(s), "
            f"grid {a.grid} = mesh {mesh_shape} {text_of(placements)}",
            f"# {a.warmup} warm-up + {a.repeats} timed repeats, slowest rank, median",
            "case\tinput\tspec\tstatus\tforward_ms\tbackward_ms\ttotal_ms\tcpu_ms\tnote"]


def time_row(item, status, note, times=(0.0, 0.0, 0.0, 0.0)):
    index, shape, spec = item
    f, b, t, c = times
    return f"{index}\t{shape_text(shape)}\t{spec}\t{status}\t{f:.3f}\t{b:.3f}\t{t:.3f}\t{c:.3f}\t{note}"


def conv_of(torch, spec, shape):
    entries = parse_spec(spec)
    if len(entries) != 1 or entries[0][0] != "conv":
        raise Skip("dtensor_conv.py times one conv layer a case")
    return module_for(torch.nn, entries[0][0], entries[0][1], shape)


def time_one(torch, dist, mesh, item, a):
    _, shape, spec = item
    stage = "forward/backward"
    try:
        torch.manual_seed(3)
        problem = Problem(torch, conv_of(torch, spec, shape), shape)
        sharded = Sharded(torch, problem, mesh, layout(parse_grid(a.grid))[1])
        y, comm = run_once(torch, dist, sharded)
        stage = "reading the result"
        verdict, errors = sharded.check(y)
        stage = "timing"
        if verdict != "ok":
            return time_row(item, "error", f"not timed: {verdict}; comm: {comm}")
        series = [[], [], [], []]  # forward, backward, total, cpu (ms)
        for i in range(a.warmup + a.repeats):
            sharded.zero_grad()
            dist.barrier()
            c0, t0 = time.process_time(), time.perf_counter()
            y = sharded.forward()
            t1 = time.perf_counter()
            sharded.backward(y)
            t2 = time.perf_counter()
            times = torch.tensor([t1 - t0, t2 - t1, t2 - t0, time.process_time() - c0], dtype=torch.float64)
            dist.all_reduce(times, op=dist.ReduceOp.MAX)
            del y
            if i >= a.warmup:
                for v, s in zip(times.tolist(), series):
                    s.append(1e3 * v)
        note = (f"-> {shape_text(problem.y.shape)}; errors {errors}; comm: {comm}; "
                f"unsharded once on each rank {1e3 * problem.reference_s:.0f} ms")
        return time_row(item, "ok", note, [statistics.median(s) for s in series])
    except Skip as e:
        return time_row(item, "skip", str(e))
    except Exception as e:  # noqa: BLE001 (a DTensor failure is a row of the table)
        return time_row(item, "error", f"({stage}) {first_line(e)}")


# ---- processes ---------------------------------------------------------------------------
# A collective that ranks enter with different sizes (DTensor on uneven shards) aborts the
# processes inside gloo, beyond any except. So the ranks work through the items from a
# given one on, rank 0 recording in files which item it started and each row it finished;
# after a crash the parent writes the crash as that item's row and starts fresh ranks at
# the next item.

def worker(rank, world, a, items, first, work):
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    err = os.open(os.path.join(work, f"rank{rank}.err"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(err, 2)  # gloo's abort message, for the crash row
    os.environ.setdefault("RANK", str(rank))
    os.environ.setdefault("WORLD_SIZE", str(world))
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
    meshes = {}
    try:
        for i in range(first, len(items)):
            grid = items[i][0] if a.mode == "probe" else a.grid
            if grid not in meshes:
                meshes[grid] = init_device_mesh("cpu", layout(parse_grid(grid))[0])
            if rank == 0:
                with open(os.path.join(work, "started"), "w") as f:
                    f.write(str(i))
            row = probe_one(torch, dist, meshes[grid], items[i]) if a.mode == "probe" else \
                time_one(torch, dist, meshes[grid], items[i], a)
            dist.barrier()
            if rank == 0:
                with open(os.path.join(work, "rows"), "a") as f:
                    f.write(f"{i}\t{row}\n".replace("\n", " ").rstrip() + "\n")
    finally:
        dist.destroy_process_group()


def crash_text(work):
    """The first line of a rank's stderr that says why it died."""
    for name in sorted(os.listdir(work)):
        if name.endswith(".err"):
            with open(os.path.join(work, name), errors="replace") as f:
                for line in f:
                    if "what():" in line or "Error" in line:
                        return line.strip()[:200]
    return "a rank died"


def run_items(mp, a, world, items):
    """Rows of `items` (the crash-recovering loop described above)."""
    import tempfile

    rows, first = {}, 0
    with tempfile.TemporaryDirectory() as work:
        while first < len(items):
            os.environ["MASTER_ADDR"] = "127.0.0.1"
            os.environ["MASTER_PORT"] = str(free_port())
            try:
                mp.spawn(worker, args=(world, a, items, first, work), nprocs=world, join=True)
                crashed = None
            except Exception as e:  # noqa: BLE001 (a rank died: the item it was on is a finding)
                crashed = f"{type(e).__name__}"
            done = {}
            if os.path.exists(os.path.join(work, "rows")):
                with open(os.path.join(work, "rows")) as f:
                    for line in f:
                        index, row = line.rstrip("\n").split("\t", 1)
                        done[int(index)] = row
            rows.update(done)
            if crashed is None:
                break
            with open(os.path.join(work, "started")) as f:
                at = int(f.read())
            if at not in rows:  # else it died after the row, in teardown
                text = "crash: process aborted: " + crash_text(work)
                rows[at] = probe_row(items[at], text) if a.mode == "probe" else time_row(items[at], "error", text)
            for name in os.listdir(work):
                if name.endswith(".err"):
                    os.remove(os.path.join(work, name))
            first = at + 1
    return [rows.get(i, "") for i in range(len(items))]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("probe", "time"))
    ap.add_argument("--ranks", type=int, default=2, help="processes to start")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads per rank")
    ap.add_argument("--grid", default="1x1x2", help="time: Tessera grid NxHxW naming the sharding")
    ap.add_argument("--cases", default=str(DEFAULT_CASES))
    ap.add_argument("--case", default="", help="time: comma-separated case numbers (default: all)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    if a.repeats < 1 or a.warmup < 0 or a.ranks < 1 or a.threads < 1:
        ap.error("--repeats, --ranks and --threads must be >= 1, --warmup >= 0")
    try:
        grid = parse_grid(a.grid)
    except ValueError as e:
        ap.error(str(e))
    if a.mode == "time" and grid[0] * grid[1] * grid[2] != a.ranks:
        ap.error(f"grid {a.grid} needs {grid[0] * grid[1] * grid[2]} ranks, not --ranks {a.ranks}")
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError as e:
        print(f"dtensor_conv.py: skip: torch is not importable by {sys.executable} ({e}); "
              "scripts/setup-bench.sh prints a python that has it", file=sys.stderr)
        return NO_TORCH
    items = probe_items(a.ranks) if a.mode == "probe" else time_items(a)
    header = probe_header(torch, a.ranks) if a.mode == "probe" else time_header(torch, a.ranks, a)
    print("\n".join(header), flush=True)
    for row in run_items(mp, a, a.ranks, items):
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Writes and compiles stand-in libraries for the CUDA libraries a PyTorch wheel links.

The Linux x86-64 torch wheel on the package index is a CUDA build: libtorch_cpu.so itself
links libcudart and libcupti, and torch/_C links libtorch_cuda.so, which links cuDNN,
cuBLAS, NCCL, ... Installed with its CUDA wheels that is several GB; installed alone
(--no-deps) it does not import. For CPU-only use (bench/layers/torch_layers.py) nothing in
those libraries is ever called, so each one can be replaced by a small library with the
same soname, the same symbol versions and every symbol torch asks of it. Each function
returns 100 — cudaErrorNoDevice, which torch takes quietly as "no GPU" — except those
that return a message (cudaGetErrorString, ...), which return a fixed string.

    torch_cuda_stubs.py TORCH_LIB_DIR OUT_DIR [--cc cc]

TORCH_LIB_DIR is site-packages/torch/lib. The libraries are written to OUT_DIR (put it on
the wheel's RPATH, e.g. TORCH_LIB_DIR itself: $ORIGIN comes before the system's CUDA, so the
result does not depend on what the machine has installed). Needs binutils (readelf) and a
C compiler. Prints one line per library written.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

# The CUDA libraries (what the nvidia-* wheels and the driver provide). Any other library
# the wheel does not ship (libz, libquadmath, ...) is the system's, found by the loader.
CUDA = re.compile(r"^lib(cuda|cudart|cublas|cublasLt|cudnn[a-z_]*|cufft|cufile|cupti|curand|cusolver|cusparse|"
                  r"cusparseLt|nccl|nvrtc|nvshmem[a-z_]*|nvJitLink|nvToolsExt)\.so")
# Symbols the Python interpreter provides at run time.
PYTHON = re.compile(r"^_?Py")
# Functions that return a message (const char*) rather than a status code.
MESSAGE = re.compile(r"(ErrorString|ErrorName|StatusString|StatusName)$|^ncclGetLastError$")
NO_DEVICE = 100  # cudaErrorNoDevice
# In OUT_DIR: the stand-ins written there, one name a line (so a rerun rewrites them).
MANIFEST = "TESSERA_CUDA_STUBS"


def readelf(*args):
    return subprocess.run(["readelf", "-W", *args], check=True, capture_output=True, text=True).stdout


def needed(lib):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf("-d", str(lib)))


def version_needs(lib):
    """{soname: {version names}} from the .gnu.version_r section."""
    needs, current = {}, None
    for line in readelf("-V", str(lib)).splitlines():
        m = re.search(r"File: (\S+)", line)
        if m:
            current = needs.setdefault(m.group(1), set())
            continue
        m = re.search(r"Name: (\S+)", line)
        if m and current is not None and "Version needs" not in line:
            current.add(m.group(1))
    return needs


def dynamic_symbols(lib):
    """(name, version or None, type, bind, defined) for each dynamic symbol."""
    out = []
    for line in readelf("--dyn-syms", str(lib)).splitlines():
        f = line.split()
        if len(f) < 8 or not f[0].rstrip(":").isdigit():
            continue
        name, version = f[7], None
        if "@" in name:
            name, version = re.split(r"@+", name, maxsplit=1)
        out.append((name, version, f[3], f[4], f[6] != "UND"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("torch_lib")
    ap.add_argument("out_dir")
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    a = ap.parse_args()
    lib_dir, out_dir = Path(a.torch_lib), Path(a.out_dir)
    # Stand-ins written by an earlier run (into the same folder) are neither torch's nor shipped.
    manifest = out_dir / MANIFEST
    ours = set(manifest.read_text().split()) if manifest.exists() else set()
    libs = [p for p in sorted(lib_dir.glob("*.so*")) + sorted(lib_dir.parent.glob("_C*.so"))
            if p.is_file() and not (lib_dir == out_dir and p.name in ours)]
    shipped = {p.name for p in libs}

    missing, versions, symbols, defined = set(), {}, [], set()
    for lib in libs:
        missing.update(n for n in needed(lib) if n not in shipped and CUDA.match(n))
        for soname, names in version_needs(lib).items():
            versions.setdefault(soname, set()).update(names)
        for name, version, kind, bind, is_defined in dynamic_symbols(lib):
            if is_defined:
                defined.add(name)
            elif bind != "WEAK":
                symbols.append((name, version, kind))
    stub_versions = {v for soname in missing for v in versions.get(soname, ())}
    # Versioned references name their library's version; unversioned ones that no torch
    # library defines (nccl*, cusparseLt*, the driver API, ...) go into every stub: the
    # loader takes the first definition it finds, whichever library that is.
    wanted = {}
    for name, version, kind in symbols:
        if version in stub_versions or (version is None and name not in defined and not PYTHON.match(name)):
            wanted.setdefault((name, version), kind)
    system = system_symbols(a.cc)
    wanted = {k: v for k, v in wanted.items() if k[1] is not None or k[0] not in system}

    out_dir.mkdir(parents=True, exist_ok=True)
    manifest.write_text("".join(f"{soname}\n" for soname in sorted(missing | ours)))
    with tempfile.TemporaryDirectory() as tmp:
        for soname in sorted(missing):
            own = sorted(versions.get(soname, ()))
            mine = {(n, v): k for (n, v), k in wanted.items() if v is None or v in own}
            build_stub(soname, own, mine, Path(tmp), out_dir, a.cc)
            print(f"{out_dir / soname}: {len(mine)} symbols, versions {', '.join(own) or '(none)'}")
    return 0


def system_symbols(cc):
    """Names the C/C++ runtime defines (so an unversioned reference to them is not stubbed)."""
    names = set()
    for soname in ("libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "libgomp.so.1"):
        path = subprocess.run([cc, f"-print-file-name={soname}"], capture_output=True, text=True).stdout.strip()
        if not os.path.isabs(path):
            path = find_in_ldconfig(soname)
        if path and os.path.exists(path):
            names.update(n for n, _, _, _, d in dynamic_symbols(path) if d)
    return names


def find_in_ldconfig(soname):
    listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    m = re.search(rf"\s{re.escape(soname)} \(libc6,x86-64\) => (\S+)", listing)
    return m.group(1) if m else None


def build_stub(soname, own_versions, symbols, tmp, out_dir, cc):
    c_lines = ["/* Generated by scripts/lib/torch_cuda_stubs.py: a CPU-only stand-in. */",
               'static const char message[] = "CUDA stand-in library: no CUDA device";']
    by_version = {v: [] for v in own_versions}
    base = own_versions[0] if own_versions else None
    for (name, version), kind in sorted(symbols.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        node = version if version is not None else base
        if version is None and any(n == name for n, v in symbols if v is not None):
            continue  # the versioned definition also answers unversioned references
        ident = name
        if kind == "OBJECT" or kind == "TLS":
            c_lines.append(f"char {ident}[256];")
        elif MESSAGE.search(name):
            c_lines.append(f"const char* {ident}(void) {{ return message; }}")
        else:
            c_lines.append(f"int {ident}(void) {{ return {NO_DEVICE}; }}")
        if node is not None:
            by_version[node].append(name)
    src, script = tmp / f"{soname}.c", tmp / f"{soname}.map"
    src.write_text("\n".join(c_lines) + "\n")
    cmd = [cc, "-shared", "-fPIC", "-O0", "-w", f"-Wl,-soname,{soname}", "-o", str(out_dir / soname), str(src)]
    if own_versions:
        script.write_text("".join(f"{v} {{ global: {' '.join(s + ';' for s in by_version[v])} }};\n"
                                  for v in own_versions))
        cmd.insert(-1, f"-Wl,--version-script,{script}")
    subprocess.run(cmd, check=True)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# Installs what bench/layers/torch_layers.py and scripts/checkpoint_to_torch.py need: a
# Python venv with a CPU-only PyTorch and h5py, from the Python package index alone. Idempotent: a rerun only checks, in seconds.
#
#   scripts/setup-bench.sh [VENV]      default VENV: $TESSERA_BENCH_VENV, else
#                                      ${XDG_CACHE_HOME:-~/.cache}/tessera/bench-venv
#
# TESSERA_TORCH_VERSION pins the torch version (default 2.15.0). Prints the venv's python.
#
# How: the index's Linux x86-64 torch wheel is a CUDA build whose dependencies are the
# nvidia-*/cuda-* wheels (several GB). We install torch with --no-deps plus its
# pure-Python dependencies, then replace every CUDA library the wheel links by a small
# generated stand-in (scripts/lib/torch_cuda_stubs.py) in torch/lib, where the wheel's
# RPATH ($ORIGIN) finds it before any CUDA the machine has. CPU ops never call into them;
# torch.cuda.is_available() is False. Then a convolution forward and backward must run.
# Needs python3 with venv, a C compiler and binutils (readelf).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/lib/common.sh"

case "${1:-}" in
  -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
esac
venv="${1:-$(bench_venv_default)}"
torch_version="${TESSERA_TORCH_VERSION:-2.15.0}"
python="$venv/bin/python"

# A forward and backward convolution on the CPU, and no CUDA device.
smoke_test() {
  "$python" - "$torch_version" <<'EOF' 2>/dev/null
import sys
import h5py
import torch
assert torch.__version__.split("+")[0] == sys.argv[1], f"torch {torch.__version__}, wanted {sys.argv[1]}"
x = torch.randn(2, 3, 16, 16, requires_grad=True)
torch.nn.Conv2d(3, 4, 3, padding=1)(x).square().sum().backward()
assert x.grad.shape == x.shape and torch.isfinite(x.grad).all()
print(f"torch {torch.__version__} (CPU; mkldnn={torch.backends.mkldnn.is_available()}, threads={torch.get_num_threads()})")
EOF
}

stubs_tool="$here/lib/torch_cuda_stubs.py"
stubs_stamp="$venv/cuda-stubs.sha256"  # which version of the stand-in generator ran
stubs_hash="$(sha256sum "$stubs_tool" | cut -c1-16)"

if [[ -x $python && "$(cat "$stubs_stamp" 2>/dev/null)" == "$stubs_hash" ]] && smoke_test >/dev/null; then
  log "bench venv: $(smoke_test) in $venv"
  echo "$python"
  exit 0
fi

installed="$("$python" -c 'from importlib.metadata import version; print(version("torch"))' 2>/dev/null || true)"
if [[ ${installed%%+*} != "$torch_version" ]]; then
  command -v readelf >/dev/null || die "readelf (binutils) is needed to write the CUDA stand-ins"
  command -v "${CC:-cc}" >/dev/null || die "a C compiler (${CC:-cc}) is needed to build the CUDA stand-ins"
  log "bench venv: creating $venv with torch $torch_version (CPU only)"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
  pip=("$python" -m pip install --quiet --disable-pip-version-check)
  "${pip[@]}" --no-deps "torch==$torch_version" || die "pip could not install torch==$torch_version"
  # torch's own requirements less the CUDA wheels and extras (filelock, sympy, jinja2, ...),
  # and numpy, which torch warns about when it is missing.
  mapfile -t requirements < <("$python" -c '
import re
from importlib.metadata import requires
for r in requires("torch") or []:
    name = re.match(r"[A-Za-z0-9._-]+", r).group(0).lower()
    if "extra ==" not in r and not name.startswith(("nvidia-", "cuda-", "triton")):
        print(r)
')
  "${pip[@]}" --no-warn-conflicts "${requirements[@]}" numpy || die "pip could not install: ${requirements[*]} numpy"
fi

# h5py reads checkpoints (scripts/checkpoint_to_torch.py); a venv made before it was
# listed gets it here.
if ! "$python" -c 'import h5py' 2>/dev/null; then
  "$python" -m pip install --quiet --disable-pip-version-check h5py || die "pip could not install h5py"
fi

torch_lib="$("$python" -c 'import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec("torch").origin).parent / "lib")')"
"$python" "$stubs_tool" "$torch_lib" "$torch_lib" >"$venv/cuda-stubs.txt" || die "writing the CUDA stand-ins failed"
echo "$stubs_hash" >"$stubs_stamp"
log "bench venv: $(wc -l <"$venv/cuda-stubs.txt") CUDA libraries replaced by stand-ins (list: $venv/cuda-stubs.txt)"
result="$(smoke_test)" || die "torch does not run a CPU convolution in $venv; run: $python -c 'import torch'"
log "bench venv: $result in $venv"
echo "$python"

#!/usr/bin/env bash
# Tessera and PyTorch side by side in one run, on this machine's CPU; writes the tables, with
# the machine, versions and load, to bench/results/torch-compare-cpu-<date>.md.
#
#   bench/scaling/torch_compare.sh BUILD_DIR [PYTHON]
#
#   BUILD_DIR  a CPU build with the benchmarks built:
#                cmake --build BUILD_DIR --target bench_scaling bench_layers
#   PYTHON     a python with CPU torch, as scripts/setup-bench.sh prints it (default: that
#              script's default venv). Without torch the PyTorch side is skipped, with a
#              note, and the Tessera side still runs.
#
# Parts (PARTS, default "net dtensor"):
#   net      bench_scaling's training step (forward, MSE loss, backward, SGD) on one rank
#            beside torch_net.py, the same spec, shape, warm-up and repeats, THREADS threads
#            each; one line of net_cases.txt ("<NxCxHxW> <spec>") a row, Tessera then PyTorch.
#   dtensor  one conv layer forward + backward on 2 ranks (OMP_NUM_THREADS=1 and
#            torch.set_num_threads(1) per rank): bench_layers under mpiexec on each grid of
#            GRIDS beside dtensor_conv.py on the DTensor layout of that grid (gloo); the
#            same cases (dtensor_cases.txt) on one rank (bench_layers, torch_layers.py) for
#            the speed-up; and dtensor_conv.py probe on 2 and 4 ranks (what DTensor
#            computes correctly for a spatially sharded convolution, tiny images).
#
# Environment: THREADS (net, default 1), WARMUP (1), REPEATS (net 5, dtensor 3),
# GRIDS ("1x1x2 1x2x1 2x1x1"), NET_CASES, DTENSOR_CASES (case files), PROBE_RANKS ("2 4";
# empty: no probe), OUT (default bench/results/torch-compare-cpu-<date>.md), MPIEXEC
# (mpiexec, with any flags it needs).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../scripts/lib/common.sh"

bench_arguments "$@" -- bench/scaling/bench_scaling bench/layers/bench_layers
bench_scaling="$build/bench/scaling/bench_scaling"
bench_layers="$build/bench/layers/bench_layers"
parts="${PARTS:-net dtensor}"
threads="${THREADS:-1}"
warmup="${WARMUP:-1}"
net_repeats="${REPEATS:-5}"
dtensor_repeats="${REPEATS:-3}"
grids="${GRIDS:-1x1x2 1x2x1 2x1x1}"
net_cases="${NET_CASES:-$here/net_cases.txt}"
dtensor_cases="${DTENSOR_CASES:-$here/dtensor_cases.txt}"
probe_ranks="${PROBE_RANKS-2 4}"
read -ra mpiexec <<<"${MPIEXEC:-mpiexec}"  # may carry flags: "mpiexec -launcher fork"
date="$(date +%F)"
out="${OUT:-$TESSERA_ROOT/bench/results/torch-compare-cpu-$date.md}"
cores="$(getconf _NPROCESSORS_ONLN)"  # not nproc: it reports OMP_NUM_THREADS when set
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

torch_note=""
if ! torch_about="$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null)"; then
  torch_note="skip: $python cannot import torch (scripts/setup-bench.sh prints a python that can); PyTorch columns are empty"
  log "$torch_note"
fi
have_torch() { [[ -z $torch_note ]]; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
load_start="$(load)"
started="$(date +%s)"
sections=()  # markdown files, in order

# A case list: "<index>\t<shape>\t<spec>" lines ('#' comments and blank lines dropped).
cases_of() { awk '{ sub(/#.*/, "") } NF >= 2 { shape = $1; sub(/^[ \t]*[^ \t]+[ \t]+/, ""); sub(/[ \t]+$/, ""); printf "%d\t%s\t%s\n", ++n, shape, $0 }' "$1"; }

if [[ " $parts " == *" net "* ]]; then
  log "net: $net_cases, $threads thread(s), $warmup warm-up + $net_repeats repeats, Tessera then PyTorch per case"
  : >"$work/net-tessera.jsonl"
  : >"$work/net-torch.jsonl"
  while IFS=$'\t' read -r index shape spec; do
    OMP_NUM_THREADS="$threads" "${mpiexec[@]}" -n 1 "$bench_scaling" --model "$spec" --shape "$shape" \
      --warmup "$warmup" --repeats "$net_repeats" --label "case $index" </dev/null >>"$work/net-tessera.jsonl" \
      || echo "{\"label\": \"case $index\", \"error\": \"bench_scaling failed\"}" >>"$work/net-tessera.jsonl"
    if have_torch; then
      OMP_NUM_THREADS="$threads" "$python" "$here/torch_net.py" --model "$spec" --shape "$shape" --threads "$threads" \
        --warmup "$warmup" --repeats "$net_repeats" --label "case $index" </dev/null >>"$work/net-torch.jsonl" \
        || echo "{\"label\": \"case $index\", \"error\": \"torch_net.py failed\"}" >>"$work/net-torch.jsonl"
    fi
    printf '.' >&2
  done < <(cases_of "$net_cases")  # (mpiexec forwards stdin to rank 0: hence the </dev/null)
  echo >&2
  python3 "$here/join_net.py" "$work/net-tessera.jsonl" "$work/net-torch.jsonl" --threads "$threads" \
    ${torch_note:+--torch-note "$torch_note"} >"$work/net.md"
  cat "$work/net.md"
  sections+=("$work/net.md")
fi

if [[ " $parts " == *" dtensor "* ]]; then
  dtensor_md="$work/dtensor.md"
  {
    echo "## One conv layer on 2 ranks: Tessera against DTensor"
    echo
    echo "Forward + backward (input, weight and bias gradients) of each case in \`$(basename "$dtensor_cases")\`, in ms:"
    echo "the median over $dtensor_repeats repeats (after $warmup warm-up) of the slowest rank; 1 thread per rank"
    echo "(OMP_NUM_THREADS=1, torch.set_num_threads(1)). The grid is Tessera's (NxHxW); DTensor gets the same"
    echo "blocks: a device mesh of the split dimensions and Shard(0), Shard(2) (H), Shard(3) (W) of the NCHW"
    echo "input, weights Replicate, gloo over loopback. DTensor's result is compared with the unsharded"
    echo "convolution first (max |difference| over max |reference|, of y, dx, dw, db) and timed only if"
    echo "correct; its note lists the errors and the communication it did (CommDebugMode collectives and"
    echo "the point-to-point halo messages of torch/distributed/tensor/_tp_conv.py)."
  } >"$dtensor_md"
  log "dtensor: one process each (Tessera bench_layers, PyTorch torch_layers.py), 1 thread"
  OMP_NUM_THREADS=1 "${mpiexec[@]}" -n 1 "$bench_layers" --cases "$dtensor_cases" --format tsv --warmup "$warmup" \
    --repeats "$dtensor_repeats" >"$work/one-tessera.tsv" || true  # an error is a row, not the end
  if have_torch; then
    OMP_NUM_THREADS=1 "$python" "$here/../layers/torch_layers.py" --cases "$dtensor_cases" --format tsv --threads 1 \
      --warmup "$warmup" --repeats "$dtensor_repeats" >"$work/one-torch.tsv"
    { echo; echo "### 1 rank (grid 1x1x1; PyTorch: plain nn.Conv2d in one process)"; echo
      python3 "$here/../layers/join_results.py" --markdown "$work/one-tessera.tsv" "$work/one-torch.tsv"; } >>"$dtensor_md"
  fi
  for grid in $grids; do
    log "dtensor: grid $grid, 2 ranks x 1 thread"
    OMP_NUM_THREADS=1 "${mpiexec[@]}" -n 2 -genv OMP_NUM_THREADS 1 "$bench_layers" --cases "$dtensor_cases" --grid "$grid" \
      --format tsv --warmup "$warmup" --repeats "$dtensor_repeats" >"$work/grid-tessera.tsv" || true
    if have_torch; then
      OMP_NUM_THREADS=1 "$python" "$here/dtensor_conv.py" time --ranks 2 --threads 1 --grid "$grid" --cases "$dtensor_cases" \
        --warmup "$warmup" --repeats "$dtensor_repeats" >"$work/grid-torch.tsv"
      { echo; echo "### 2 ranks, grid $grid ($(sed -n 's/^# torch .*, grid [^ ]* = //p' "$work/grid-torch.tsv"))"; echo
        python3 "$here/../layers/join_results.py" --markdown "$work/grid-tessera.tsv" "$work/grid-torch.tsv"
        echo; echo "DTensor, case by case (errors relative to the unsharded convolution; communication in one forward + backward):"; echo
        awk -F'\t' '!/^#/ && $1 != "case" { print "- case " $1 ": " $4 ": " $9 }' "$work/grid-torch.tsv"; } >>"$dtensor_md"
    else
      { echo; echo "### 2 ranks, grid $grid (Tessera only)"; echo; echo '```'; cat "$work/grid-tessera.tsv"; echo '```'; } >>"$dtensor_md"
    fi
  done
  if have_torch && [[ -n $probe_ranks ]]; then
    { echo; echo "### What DTensor computes: spatially sharded conv2d on tiny images"; } >>"$dtensor_md"
    for ranks in $probe_ranks; do
      log "dtensor probe: $ranks ranks"
      { echo; echo "$ranks ranks$( ((ranks > cores)) && echo " (more than the $cores cores: correctness only)"):"; echo
        OMP_NUM_THREADS=1 "$python" "$here/dtensor_conv.py" probe --ranks "$ranks" --threads 1; } >>"$dtensor_md"
    done
  fi
  [[ -n $torch_note ]] && printf '\n%s\n' "$torch_note" >>"$dtensor_md"
  cat "$dtensor_md"
  sections+=("$dtensor_md")
fi

model="$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
memory="$(free -g | awk '/^Mem:/ {print $2}')"
onednn="$(dpkg-query -W -f='${Version}' libdnnl-dev 2>/dev/null || echo unknown)"
mkdir -p "$(dirname "$out")"
{
  echo "# Tessera and PyTorch side by side on the CPU — $date"
  echo
  echo "Written by \`bench/scaling/torch_compare.sh\` (how to read it: bench/README.md). Whole run: $(($(date +%s) - started)) s."
  echo
  echo "Machine: $model, $cores cores, $memory GiB. Load average (1/5/15 min) at the start: $load_start; at the end: $(load)."
  echo "The machine is shared with other work: the times are upper bounds, and each side met whatever load there was"
  echo "while it ran (the two sides of a row run one right after the other)."
  echo
  echo "- Tessera: Kokkos OpenMP, oneDNN (libdnnl-dev) $onednn, $(mpichversion 2>/dev/null | sed -n 's/^MPICH Version:[[:space:]]*/MPICH /p')"
  echo "- PyTorch: ${torch_about:-not available} (CPU-only install: scripts/setup-bench.sh)"
  for s in "${sections[@]}"; do echo; cat "$s"; done
} >"$out"
log "wrote $out"

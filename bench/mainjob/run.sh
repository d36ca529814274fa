#!/usr/bin/env bash
# The main job (scripts/demo.sh: tessera-train on the fashion-cnn preset, Adam, Fashion-MNIST)
# timed beside the same training in PyTorch, in one run, on this machine's CPU; writes the
# table, with the machine, versions and load, to bench/results/mainjob-cpu-<date>.md.
#
#   bench/mainjob/run.sh BUILD_DIR [PYTHON]
#
#   BUILD_DIR  a CPU build with the apps: cmake --build BUILD_DIR --target tessera-train tessera-data
#   PYTHON     a python with CPU torch, as scripts/setup-bench.sh prints it (default: that
#              script's default venv). Without torch the PyTorch row is skipped, with a note,
#              and the Tessera rows still run.
#
# Every run trains the demo's model with its optimizer, learning rate and batch (read from
# the settings in scripts/demo.sh) for STEPS steps; the first SKIP are warm-up, the rest are
# timed (steady state). Runs (CONFIGS, default all, in this order):
#   1x1x1    Tessera, 1 rank x THREADS threads
#   pytorch  bench/mainjob/torch_mainjob.py: the same layers (the spec tessera-train resolved
#            the preset to), Adam, cross-entropy, batch and data, THREADS threads; it refuses
#            to train unless its parameter count is Tessera's
#   2x1x1    Tessera, 2 ranks x 1 thread, samples split
#   1x1x2    Tessera, 2 ranks x 1 thread, space split (each image cut into two tiles)
#   demo     Tessera as the demo runs it: its ranks and grid for this machine's cores
#            (scripts/lib/common.sh's demo_ranks/demo_grid: 1x1x2 on 2 cores), OMP_NUM_THREADS
#            unset (Tessera picks the threads per rank)
# The PyTorch run follows the first Tessera run (it needs that run's model description).
#
# PRECISION (fp32, bf16 or both): fp32 (the default) is the table above. bf16 runs every
# Tessera run with tessera-train --precision bf16 and PyTorch under torch.autocast("cpu",
# dtype=torch.bfloat16) (torch_mainjob.py --autocast bf16); both runs each of them in fp32
# and then in bf16, one right after the other, and adds a table of each run's bf16 step
# beside its fp32 step and beside PyTorch's bf16 step. The results file is then
# mainjob-bf16-cpu-<date>.md. On a CPU without AVX512-BF16 or AMX Tessera's bf16 is emulated
# (converted to fp32 around every oneDNN call: slower than fp32); the file says so.
#
# Data: the demo's HDF5 files (BUILD_DIR/data/fashion-mnist, made with tessera-data when
# missing, as the demo does) for Tessera; PyTorch reads the IDX files they are made from
# (SOURCE), the same images and labels.
#
# Environment: STEPS (60), SKIP (10), THREADS (2), BATCH (the demo's), LIMIT (0: all 60,000
# training images; N: a data set of the first N, made in a scratch directory: smoke tests),
# SOURCE (/usr/share/datasets/fashion-mnist, Debian's dataset-fashion-mnist), CONFIGS,
# PRECISION (fp32), OUT (default bench/results/mainjob-cpu-<date>.md, with bf16
# mainjob-bf16-cpu-<date>.md), MPIEXEC (mpiexec, with any flags it needs).
# DEVICE (cpu; cuda: BUILD_DIR is a CUDA build, PyTorch trains on the GPU with TF32 off, the
# results file is mainjob[-bf16]-gpu-<date>.md; the runs that split over ranks share the one
# GPU, so CONFIGS="1x1x1 pytorch" is the comparison there).
# Exits 77 (skipped) when SOURCE has no Fashion-MNIST.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../scripts/lib/common.sh"

bench_arguments "$@" -- apps/tessera-train apps/data/tessera-data
train="$build/apps/tessera-train"
case "${PRECISION:-fp32}" in
  fp32) precisions=(fp32) ;;
  bf16) precisions=(bf16) ;;
  both) precisions=(fp32 bf16) ;;
  *) die "PRECISION must be fp32, bf16 or both, got '$PRECISION'" ;;
esac
make_data="$build/apps/data/tessera-data"
source_dir="$(fashion_mnist_source)" || exit 77

# The demo's settings (scripts/lib/common.sh's demo_setting: the config scripts/demo.sh writes).
model="$(demo_setting model)"
optimizer="$(demo_setting optimizer)"
lr="$(demo_setting lr)"
batch="${BATCH:-$(demo_setting batch)}"
# The demo's ranks and grid on this machine (scripts/lib/common.sh, as scripts/demo.sh).
demo_rank_count="$(demo_ranks)" || exit 1
demo_layout="$(demo_grid "$demo_rank_count")"
[[ $optimizer == adam ]] || die "the demo trains with $optimizer; torch_mainjob.py times Adam only"

steps="${STEPS:-60}"
skip="${SKIP:-10}"
threads="${THREADS:-2}"
limit="${LIMIT:-0}"
configs="${CONFIGS:-1x1x1 pytorch 2x1x1 1x1x2 demo}"
read -ra mpiexec <<<"${MPIEXEC:-mpiexec}"  # may carry flags: "mpiexec -launcher fork"
((skip < steps)) || die "SKIP ($skip) must be less than STEPS ($steps)"
date="$(date +%F)"
precision_words="${precisions[*]}" && precision_words="${precision_words// / and }"  # "fp32 and bf16"
what=mainjob && [[ $precision_words != fp32 ]] && what=mainjob-bf16
device="${DEVICE:-cpu}"
case "$device" in
  cpu) kind=cpu where="the CPU" ;;
  cuda) kind=gpu where="the GPU" ;;
  *) die "DEVICE must be cpu or cuda, got '$device'" ;;
esac
out="${OUT:-$TESSERA_ROOT/bench/results/$what-$kind-$date.md}"
cores="$(getconf _NPROCESSORS_ONLN)"  # not nproc: it reports OMP_NUM_THREADS when set
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

data="$(fashion_mnist_h5 "$make_data" "$source_dir" "$build" "$work" "$limit")" || die "making the Fashion-MNIST HDF5 files failed"

torch_note=""
if ! torch_about="$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null)"; then
  torch_note="skip: $python cannot import torch (scripts/setup-bench.sh prints a python that can); no PyTorch row"
  log "$torch_note"
fi
load() { cut -d' ' -f1-3 /proc/loadavg; }
load_start="$(load)"
started="$(date +%s)"

# tessera-train on <ranks> x <threads> (auto: OMP_NUM_THREADS unset) with <grid>, once in
# each precision of PRECISION; its metrics in $work/<name>-<precision>.jsonl, its output in
# $work/<name>-<precision>.log. The rows for report.py collect in `rows` (report.py reads
# each run's precision from its log).
rows=()
run_tessera() {
  local name="$1" ranks="$2" threads="$3" grid="$4" label="$5" precision run
  local environment=(env OMP_NUM_THREADS="$threads") per_rank=(-genv OMP_NUM_THREADS "$threads")
  [[ $threads == auto ]] && environment=(env -u OMP_NUM_THREADS) && per_rank=()
  for precision in "${precisions[@]}"; do
    run="$name-$precision"
    log "tessera: $label, $precision ($steps steps)"
    "${environment[@]}" "${mpiexec[@]}" -n "$ranks" "${per_rank[@]}" "$train" --model "$model" --grid "$grid" \
      --data "$data/fashion-mnist-train.h5" --batch "$batch" --optimizer "$optimizer" --lr "$lr" --steps "$steps" \
      --precision "$precision" --metrics "$work/$run.jsonl" --progress off --verbose </dev/null >"$work/$run.log" 2>&1 \
      || { tail -20 "$work/$run.log" >&2; die "tessera-train failed: $label, $precision"; }
    rows+=("$label=$work/$run.jsonl:$work/$run.log")
  done
}

# The first Tessera run's description of the model: its layers as a spec, and the count.
spec="" parameters=""
describe_model() {
  spec="$(grep -E '^[0-9]+ +[A-Za-z]' "$1" | sed -E 's/^[0-9]+ +([A-Za-z0-9_-]+(\([^)]*\))?).*/\1/' | paste -sd, -)"
  parameters="$(sed -n 's/^total parameters: //p' "$1")"
  [[ -n $spec && -n $parameters ]] || die "no model description in $1"
}

# PyTorch in each precision of PRECISION (bf16: under autocast), its line in
# $work/torch-<precision>.jsonl (empty when skipped).
torch_files=()
for precision in "${precisions[@]}"; do
  : >"$work/torch-$precision.jsonl"
  torch_files+=(--torch "$work/torch-$precision.jsonl")
done
run_torch() {
  [[ -z $torch_note ]] || return 0
  local precision autocast
  for precision in "${precisions[@]}"; do
    autocast=off && [[ $precision == bf16 ]] && autocast=bf16
    log "pytorch: $threads thread(s), $precision$([[ $autocast == bf16 ]] && echo " (autocast)") ($steps steps)"
    OMP_NUM_THREADS="$threads" "$python" "$here/torch_mainjob.py" --model "$spec" --expect-parameters "$parameters" \
      --source "$source_dir" --limit "$limit" --batch "$batch" --lr "$lr" --steps "$steps" --skip "$skip" \
      --threads "$threads" --autocast "$autocast" --device "$device" >"$work/torch-$precision.jsonl" || die "torch_mainjob.py failed"
  done
}

torch_done=0
for config in $configs; do
  case "$config" in
    1x1x1) run_tessera one 1 "$threads" 1x1x1 "1 rank x $threads thread(s), grid 1x1x1" ;;
    2x1x1) run_tessera samples 2 1 2x1x1 "2 ranks x 1 thread, grid 2x1x1 (samples split)" ;;
    1x1x2) run_tessera space 2 1 1x1x2 "2 ranks x 1 thread, grid 1x1x2 (space split)" ;;
    demo) run_tessera demo "$demo_rank_count" auto "$demo_layout" "the demo: $demo_rank_count ranks, grid $demo_layout" ;;
    pytorch) continue ;;
    *) die "unknown config '$config' (1x1x1 pytorch 2x1x1 1x1x2 demo)" ;;
  esac
  if ((!torch_done)) && [[ " $configs " == *" pytorch "* ]]; then
    describe_model "${rows[0]##*:}"
    run_torch
    torch_done=1
  fi
done
((${#rows[@]} > 0)) || die "CONFIGS ($configs) names no Tessera run"
[[ -n $spec ]] || describe_model "${rows[0]##*:}"

python3 "$here/report.py" --skip "$skip" "${torch_files[@]}" ${torch_note:+--torch-note "$torch_note"} \
  "${rows[@]}" >"$work/table.md"
cat "$work/table.md"

cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
bf16_warning="$(sed -n 's/^warning: --precision bf16/--precision bf16/p' "$work"/*-bf16.log 2>/dev/null | head -1 || true)"
memory="$(free -g | awk '/^Mem:/ {print $2}')"
onednn="$(dpkg-query -W -f='${Version}' libdnnl-dev 2>/dev/null || echo unknown)"
# A bundled build (scripts/gpu-bundle.sh) carries no CMakeCache.txt, nor its compiler.
compiler="$("$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null)" --version 2>/dev/null | head -1 || true)"
mkdir -p "$(dirname "$out")"
{
  if [[ $precision_words == fp32 ]]; then
    echo "# The main job beside PyTorch on $where — $date"
  else
    echo "# The main job in $precision_words beside PyTorch on $where — $date"
  fi
  echo
  echo "Written by \`bench/mainjob/run.sh\` (how to read it: bench/README.md). Whole run: $(($(date +%s) - started)) s."
  echo
  [[ $device == cuda ]] && echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)." && echo
  echo "Machine: $cpu, $cores cores, $memory GiB. Load average (1/5/15 min) at the start: $load_start; at the end: $(load)."
  echo
  echo "- Tessera (the first run's runtime): $(head -1 "${rows[0]##*:}")"
  echo "- oneDNN (libdnnl-dev) $onednn; compiler: ${compiler:-unknown}"
  echo "- PyTorch: ${torch_about:-not available} (CPU-only install: scripts/setup-bench.sh)"
  echo "- Training: \`$model\` = \`$spec\` ($parameters parameters), $optimizer lr $lr, global batch $batch,"
  echo "  cross-entropy; Fashion-MNIST training set$( ((limit > 0)) && echo " (first $limit samples)"); $steps steps per run, the first $skip untimed."
  if [[ $precision_words != fp32 ]]; then
    echo "- Precision: $precision_words (PRECISION=${PRECISION}): Tessera \`--precision\`, PyTorch fp32 or \`torch.autocast('$device', dtype=torch.bfloat16)\`$([[ ${#precisions[@]} -gt 1 ]] && echo "; each run in fp32, then at once in bf16")."
    if [[ -n $bf16_warning ]]; then
      echo "  **Tessera's bf16 is emulated on this CPU** (no AVX512-BF16 or AMX): oneDNN runs its fp32 primitives and the"
      echo "  bf16 operands are converted around every call, so bf16 is slower than fp32 here (docs/training.md,"
      echo "  \"Mixed precision\"). tessera-train said: \"$bf16_warning\""
    fi
  fi
  echo
  cat "$work/table.md"
} >"$out"
log "wrote $out"

#!/usr/bin/env bash
# Graph networks — a ResNet-18-style classifier and a U-Net denoiser — trained by
# tessera-train on 1, 2 and 4 ranks beside the same networks in PyTorch in one process, in
# one run, on this machine's CPU; with each rank's activation memory as tessera-train plans
# it. Writes bench/results/graph-nets-cpu-<date>.md.
#
#   bench/graphnets/run.sh BUILD_DIR [PYTHON]
#
#   BUILD_DIR  a CPU build with the apps: cmake --build BUILD_DIR --target tessera-train tessera-data
#   PYTHON     a python with CPU torch, as scripts/setup-bench.sh prints it (default: that
#              script's default venv). Without torch the PyTorch column is empty, with a note.
#
# For each size S of SIZES and each net: Tessera on each rank count of RANKS (grids 1x1x1,
# 1x2x1, 1x2x2; OMP_NUM_THREADS = THREADS / ranks, at least 1 — more ranks than cores are
# oversubscribed, and the table says so), STEPS steps of plain SGD on BATCH photographs of
# SxS (scikit-image's astronaut and coffee, resized by tessera-data); the step time is the
# median of step_s - data_s over the steps after the first SKIP; the activation bytes are
# rank 0's "activations+gradients" of tessera-train's header (models/memory_plan.hpp: every
# activation and its gradient with halos, rank 0's tile). Then torch_graph_nets.py: the same
# network, loss and optimizer in one process with THREADS threads.
#   resnet  resnet(depth=18,width=RESNET_WIDTH,classes=10), cross-entropy against label 0
#   unet    unet(depth=UNET_DEPTH,width=UNET_WIDTH), --noise NOISE denoising (MSE)
#
# PRECISION: fp32 (default), bf16 or both: tessera-train --precision and PyTorch under
# torch.autocast("cpu", dtype=torch.bfloat16) (forward and loss; fp32 master weights), each
# run in one precision then at once in the other; with both, a table of bf16 against fp32.
#
# Environment: THREADS (the core count; 1 on a machine others load: OpenMP threads that
# wait for a busy core slow every step many times over), SIZES ("512 1024"), RANKS ("1 2 4"), NETS ("resnet unet"), RESNET_WIDTH (16),
# UNET_WIDTH (8), UNET_DEPTH (4), BATCH (1), STEPS (4), SKIP (1), NOISE (0.1), OUT (default
# bench/results/graph-nets-cpu-<date>.md), MPIEXEC (mpiexec, with any flags it needs).
# Exits 77 (skipped) without scikit-image's photographs (Debian's python3-skimage).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../scripts/lib/common.sh"

bench_arguments "$@" -- apps/tessera-train apps/data/tessera-data
train="$build/apps/tessera-train"
make_data="$build/apps/data/tessera-data"
case "${PRECISION:-fp32}" in
  fp32) precisions=(fp32) what=graph-nets ;;
  bf16) precisions=(bf16) what=graph-nets-bf16 ;;
  both) precisions=(fp32 bf16) what=graph-nets-bf16 ;;
  *) die "PRECISION must be fp32, bf16 or both, got '$PRECISION'" ;;
esac
if [[ ! -f $SKIMAGE_PHOTOS/astronaut.png || ! -f $SKIMAGE_PHOTOS/coffee.png ]]; then
  echo "tessera: skip: no scikit-image sample photographs in $SKIMAGE_PHOTOS (install python3-skimage)" >&2
  exit 77
fi
sizes="${SIZES:-512 1024}"
rank_counts="${RANKS:-1 2 4}"
nets="${NETS:-resnet unet}"
resnet_width="${RESNET_WIDTH:-16}"
unet_width="${UNET_WIDTH:-8}"
unet_depth="${UNET_DEPTH:-4}"
batch="${BATCH:-1}"
steps="${STEPS:-4}"
skip="${SKIP:-1}"
noise="${NOISE:-0.1}"
((skip < steps)) || die "SKIP ($skip) must be less than STEPS ($steps)"
read -ra mpiexec <<<"${MPIEXEC:-mpiexec}"
date="$(date +%F)"
out="${OUT:-$TESSERA_ROOT/bench/results/$what-cpu-$date.md}"
cores="$(getconf _NPROCESSORS_ONLN)"  # not nproc: it reports OMP_NUM_THREADS when set
budget="${THREADS:-$cores}"
[[ $budget =~ ^[1-9][0-9]*$ ]] || die "THREADS must be a positive whole number, got '$budget'"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

torch_note=""
if ! torch_about="$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null)"; then
  torch_note="skip: $python cannot import torch (scripts/setup-bench.sh prints a python that can); no PyTorch column"
  log "$torch_note"
fi
load() { cut -d' ' -f1-3 /proc/loadavg; }
load_start="$(load)"
started="$(date +%s)"

grid_of() {
  case "$1" in
    1) echo 1x1x1 ;; 2) echo 1x2x1 ;; 4) echo 1x2x2 ;;
    *) die "RANKS: $1 ranks has no grid here (1, 2 or 4)" ;;
  esac
}

# Rows for report.py: "net<TAB>size<TAB>precision<TAB>ranks<TAB>grid<TAB>threads<TAB>metrics<TAB>log"
# and "net<TAB>size<TAB>precision<TAB>torch<TAB><TAB>threads<TAB>json<TAB>".
: >"$work/rows.tsv"
for size in $sizes; do
  "$make_data" images --resize --size "${size}x${size}" --label 0 --out "$work/labelled-$size.h5" \
    "$SKIMAGE_PHOTOS"/{astronaut,coffee}.png >/dev/null
  "$make_data" images --resize --size "${size}x${size}" --out "$work/plain-$size.h5" \
    "$SKIMAGE_PHOTOS"/{astronaut,coffee}.png >/dev/null
  for net in $nets; do
    case "$net" in
      resnet) model="resnet(depth=18,width=$resnet_width,classes=10)"
              args=(--data "$work/labelled-$size.h5")
              torch_args=(--net resnet --depth 18 --width "$resnet_width" --classes 10) ;;
      unet) model="unet(depth=$unet_depth,width=$unet_width)"
            args=(--data "$work/plain-$size.h5" --noise "$noise")
            torch_args=(--net unet --depth "$unet_depth" --width "$unet_width" --noise "$noise") ;;
      *) die "NETS: unknown net '$net' (resnet unet)" ;;
    esac
    for ranks in $rank_counts; do
      grid="$(grid_of "$ranks")"
      threads=$((budget / ranks > 0 ? budget / ranks : 1))
      for precision in "${precisions[@]}"; do
        name="$net-$size-$ranks-$precision"
        log "tessera: $model on ${size}x${size}, $ranks rank(s) x $threads thread(s), grid $grid, $precision"
        OMP_NUM_THREADS="$threads" "${mpiexec[@]}" -n "$ranks" -genv OMP_NUM_THREADS "$threads" "$train" \
          --model "$model" --grid "$grid" "${args[@]}" --batch "$batch" --steps "$steps" --optimizer sgd --lr 0.0001 \
          --precision "$precision" --metrics "$work/$name.jsonl" --progress off --watchdog 300 </dev/null \
          >"$work/$name.log" 2>&1 || { tail -5 "$work/$name.log" >&2; die "tessera-train failed: $name"; }
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$net" "$size" "$precision" "$ranks" "$grid" "$threads" \
          "$work/$name.jsonl" "$work/$name.log" >>"$work/rows.tsv"
      done
    done
    if [[ -z $torch_note ]]; then
      for precision in "${precisions[@]}"; do
        name="$net-$size-torch-$precision"
        log "pytorch: $model on ${size}x${size}, 1 process x $budget threads, $precision"
        OMP_NUM_THREADS="$budget" "$python" "$here/torch_graph_nets.py" "${torch_args[@]}" \
          --shape "${batch}x3x${size}x${size}" --threads "$budget" --warmup "$skip" --repeats "$((steps - skip))" \
          --lr 0.0001 --precision "$precision" >"$work/$name.json" || die "torch_graph_nets.py failed: $name"
        printf '%s\t%s\t%s\ttorch\t\t%s\t%s\t\n' "$net" "$size" "$precision" "$budget" "$work/$name.json" \
          >>"$work/rows.tsv"
      done
    fi
  done
done

python3 "$here/report.py" --skip "$skip" --cores "$cores" --torch-threads "$budget" ${torch_note:+--torch-note "$torch_note"} \
  "$work/rows.tsv" >"$work/table.md"
cat "$work/table.md"

cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
bf16_warning="$(sed -n 's/^warning: --precision bf16/--precision bf16/p' "$work"/*-bf16.log 2>/dev/null | head -1 || true)"
memory="$(free -g | awk '/^Mem:/ {print $2}')"
onednn="$(dpkg-query -W -f='${Version}' libdnnl-dev 2>/dev/null || echo unknown)"
mkdir -p "$(dirname "$out")"
{
  echo "# Graph networks (ResNet-18-style, U-Net) beside PyTorch on the CPU, ${precisions[*]} — $date"
  echo
  echo "Written by \`bench/graphnets/run.sh\` (how to read it: bench/README.md). Whole run: $(($(date +%s) - started)) s."
  echo
  echo "Machine: $cpu, $cores cores, $memory GiB. Load average (1/5/15 min) at the start: $load_start; at the end: $(load)."
  echo "The machine is shared with other work: the times are upper bounds, and each run met whatever load there was."
  echo
  echo "- Tessera: tessera-train, Kokkos OpenMP, oneDNN (libdnnl-dev) $onednn"
  echo "- PyTorch: ${torch_about:-not available} (CPU-only install: scripts/setup-bench.sh), bench/graphnets/torch_graph_nets.py"
  echo "- Global batch $batch, plain SGD, $steps steps a run, the first $skip untimed; U-Net noise $noise."
  echo "- Precision: ${precisions[*]} (PRECISION=${PRECISION:-fp32}): Tessera \`--precision\`, PyTorch fp32 or \`torch.autocast('cpu', dtype=torch.bfloat16)\` around forward and loss."
  if [[ -n $bf16_warning ]]; then
    echo "  **This CPU has no bf16 instructions** (no AVX512-BF16 or AMX): Tessera's bf16 is emulated (oneDNN runs"
    echo "  its fp32 primitives, the bf16 operands converted around each call), and so are PyTorch's bf16 kernels;"
    echo "  the bf16 columns compare the two emulations. tessera-train said: \"$bf16_warning\""
  fi
  echo
  cat "$work/table.md"
} >"$out"
log "wrote $out"

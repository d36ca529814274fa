#!/usr/bin/env bash
# Runs the layer benchmarks on this machine in one go and writes the results, with the
# machine and versions, to bench/results/layers-cpu-<date>.md. Builds and installs nothing.
#
#   bench/layers/run.sh BUILD_DIR [PYTHON]
#
#   BUILD_DIR  a CPU build with the benchmarks built:
#                cmake --build BUILD_DIR --target bench_layers bench_overlap
#   PYTHON     a python with CPU torch, as scripts/setup-bench.sh prints it
#              (default: that script's default venv)
#
# 1. bench_layers and torch_layers.py on one rank/process, the same cases (cases.txt), the
#    same thread count: Tessera through OMP_NUM_THREADS, PyTorch through set_num_threads;
#    case by case, one side right after the other.
# 2. bench_overlap under mpiexec on each rank count of RANKS, threads per rank
#    THREADS / ranks (at least 1); rank counts that need more cores than the machine has
#    are labelled oversubscribed.
#
# Environment: THREADS (default: nproc), WARMUP (2), REPEATS (10), RANKS ("2 4"),
# OUT (default bench/results/layers-<cpu|gpu>-<date>.md), MPIEXEC (mpiexec), DEVICE (cpu;
# cuda: BUILD_DIR is a CUDA build and PYTHON's torch runs on the GPU, as
# scripts/gpu-check.sh calls it), PRECISION (fp32; bf16: per case Tessera --precision bf16,
# Tessera fp32 and PyTorch autocast bf16, the table with bf16/fp32 and issue 13's goals,
# OUT default layers-bf16-<cpu|gpu>-<date>.md, no bench_overlap: its halo is fp32).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../scripts/lib/common.sh"

bench_arguments "$@" -- bench/layers/bench_layers bench/layers/bench_overlap
bench_layers="$build/bench/layers/bench_layers"
bench_overlap="$build/bench/layers/bench_overlap"
"$python" -c 'import torch' 2>/dev/null || die "$python has no torch: run scripts/setup-bench.sh (it prints the python to pass)"

cores="$(nproc)"
threads="${THREADS:-$cores}"
warmup="${WARMUP:-2}"
repeats="${REPEATS:-10}"
ranks_list="${RANKS:-2 4}"
mpiexec="${MPIEXEC:-mpiexec}"
date="$(date +%F)"
device="${DEVICE:-cpu}"
case "$device" in
  cpu) kind=cpu ;;
  cuda) kind=gpu ;;
  *) die "DEVICE must be cpu or cuda, got '$device'" ;;
esac
precision="${PRECISION:-fp32}"
case "$precision" in
  fp32) out_name="layers-$kind-$date.md" ;;
  bf16) out_name="layers-bf16-$kind-$date.md" ranks_list="" ;;
  *) die "PRECISION must be fp32 or bf16, got '$precision'" ;;
esac
out="${OUT:-$TESSERA_ROOT/bench/results/$out_name}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

load() { cut -d' ' -f1-3 /proc/loadavg; }
load_start="$(load)"

# Case by case, Tessera then PyTorch, so that both meet the same load on a shared machine.
# The case list beside this script: the build's compiled-in path names the tree it was built
# from, which a bundled build (scripts/gpu-bundle.sh) does not have.
case_list=(--cases "$here/cases.txt")
cases="$("$bench_layers" "${case_list[@]}" --list | wc -l)"
log "layers: $cases cases, $([[ $device == cuda ]] && echo "on the GPU" || echo "$threads threads"), $warmup warm-up + $repeats repeats, Tessera then PyTorch per case"
append() {  # append() TSV_OUT CASE_TSV: keeps the '#' lines and header of the first case only
  if [[ -s $1 ]]; then grep -v -e '^#' -e '^case' "$2" >>"$1" || true; else cat "$2" >"$1"; fi
}
: >"$work/tessera.tsv"
: >"$work/torch.tsv"
: >"$work/tessera-fp32.tsv"
tessera_flags=("${case_list[@]}" --format tsv --warmup "$warmup" --repeats "$repeats" --precision "$precision")
torch_flags=("${case_list[@]}" --format tsv --warmup "$warmup" --repeats "$repeats" --precision "$precision" --device "$device")
# On a GPU nothing else shares the device, and a process per case would pay CUDA's start-up
# 32 times: each side runs every case in one process.
if [[ $device == cuda ]]; then
  "$bench_layers" "${tessera_flags[@]}" >"$work/tessera.tsv" || true
  if [[ $precision == bf16 ]]; then
    "$bench_layers" "${tessera_flags[@]}" --precision fp32 >"$work/tessera-fp32.tsv" || true
  fi
  "$python" "$here/torch_layers.py" "${torch_flags[@]}" >"$work/torch.tsv"
  cases=0
fi
for ((i = 1; i <= cases; ++i)); do
  OMP_NUM_THREADS="$threads" "$bench_layers" "${tessera_flags[@]}" --case "$i" \
    >"$work/case.tsv" || true  # a spec error is a row of the table, not the end of the run
  append "$work/tessera.tsv" "$work/case.tsv"
  if [[ $precision == bf16 ]]; then
    OMP_NUM_THREADS="$threads" "$bench_layers" "${tessera_flags[@]}" --precision fp32 --case "$i" >"$work/case.tsv" || true
    append "$work/tessera-fp32.tsv" "$work/case.tsv"
  fi
  OMP_NUM_THREADS="$threads" "$python" "$here/torch_layers.py" "${torch_flags[@]}" --case "$i" --threads "$threads" \
    >"$work/case.tsv"
  append "$work/torch.tsv" "$work/case.tsv"
  printf '.' >&2
done
echo >&2
join_flags=()
[[ $precision == bf16 ]] && join_flags=(--fp32 "$work/tessera-fp32.tsv")
python3 "$here/join_results.py" "${join_flags[@]}" "$work/tessera.tsv" "$work/torch.tsv" | tee "$work/table.txt"
python3 "$here/join_results.py" "${join_flags[@]}" --markdown "$work/tessera.tsv" "$work/torch.tsv" >"$work/table.md"

overlap_sections=()
for ranks in $ranks_list; do
  per_rank=$((threads / ranks > 0 ? threads / ranks : 1))
  label="$ranks ranks x $per_rank thread(s) on $cores cores"
  ((ranks * per_rank > cores)) && label+=" — oversubscribed: ranks share cores, so times include waiting to be scheduled"
  log "bench_overlap: $label"
  "$mpiexec" -n "$ranks" -genv OMP_NUM_THREADS "$per_rank" "$bench_overlap" --warmup "$warmup" --repeats "$repeats" \
    >"$work/overlap-$ranks.txt"
  cat "$work/overlap-$ranks.txt"
  overlap_sections+=("$label" "$work/overlap-$ranks.txt")
done
load_end="$(load)"

model="$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
sockets="$(lscpu | sed -n 's/^Socket(s): *//p' | head -1)"
per_socket="$(lscpu | sed -n 's/^Core(s) per socket: *//p' | head -1)"
smt="$(lscpu | sed -n 's/^Thread(s) per core: *//p' | head -1)"
memory="$(free -g | awk '/^Mem:/ {print $2}')"
compiler="$(c++ --version 2>/dev/null | head -1 || true)"
onednn="$(dpkg-query -W -f='${Version}' libdnnl-dev 2>/dev/null || echo unknown)"
tessera_about="$(sed -n 's/^# //p' "$work/tessera.tsv" | head -1)"
torch_about="$(sed -n 's/^# //p' "$work/torch.tsv" | head -1)"

mkdir -p "$(dirname "$out")"
{
  build_kind="$([[ $device == cuda ]] && echo CUDA || echo CPU)"
  if [[ $precision == bf16 ]]; then echo "# bench_layers in bf16 beside fp32 and PyTorch autocast bf16, $build_kind build — $date"
  else echo "# bench_layers and bench_overlap on the $build_kind build — $date"; fi
  echo
  echo "Written by \`bench/layers/run.sh\` (how to read it: bench/README.md)."
  echo
  echo "Machine: $model, $sockets socket(s) x $per_socket core(s) x $smt thread(s) per core ($cores logical CPUs), ${memory} GiB."
  if [[ $device == cuda ]]; then echo "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)."; fi
  echo "Load average (1/5/15 min) at the start: $load_start; at the end: $load_end."
  echo
  echo "- Tessera: $tessera_about"
  if [[ $device == cuda ]]; then
    echo "- PyTorch: $torch_about"
    echo "- Both sides on the GPU, one process each for all cases; $warmup warm-up + $repeats timed repeats, medians."
  else
    echo "- oneDNN (libdnnl-dev) $onednn; compiler: $compiler"
    echo "- PyTorch: $torch_about (CPU-only install: scripts/setup-bench.sh)"
    echo "- oneDNN dispatch: $(grep -o 'isa=[^ ]* bf16-hardware=[a-z]*' "$work/tessera.tsv" | head -1) (ONEDNN_MAX_CPU_ISA=${ONEDNN_MAX_CPU_ISA:-unset})"
    echo "- Threads: $threads for both (OMP_NUM_THREADS=$threads; torch.set_num_threads($threads)); $warmup warm-up + $repeats timed repeats, medians."
  fi
  echo
  echo "## Layers: forward + backward, one process each"
  echo
  echo "Milliseconds per forward + backward (median over repeats); tessera/torch > 1 means Tessera is slower."
  if [[ $precision == bf16 ]]; then
    echo "Tessera runs --precision bf16 and PyTorch torch.autocast(bfloat16); \"tessera fp32 ms\" is Tessera's fp32 run of"
    echo "the same case right after its bf16 run, \"bf16/fp32\" their ratio (< 1: bf16 faster). Goals (issue 13): a"
    echo "convolution at least 2.5x faster than its fp32; every case at most PyTorch autocast's time."
  fi
  echo "The case list is bench/layers/cases.txt; a layer one side lacks is shown as skipped."
  echo
  cat "$work/table.md"
  if ((${#overlap_sections[@]} > 0)); then
  echo
  echo "## Exposed halo time, overlap on and off"
  echo
  echo "exposed = step − alone, where alone is the same layer on each rank's own tile with no neighbours"
  echo "(every rank at once): the halo work a step does not hide behind compute. wait = time blocked in"
  echo "MPI_Waitall in the halo exchange. on/off = the overlap=on value over the overlap=off value."
  for ((i = 0; i < ${#overlap_sections[@]}; i += 2)); do
    echo
    echo "${overlap_sections[i]}:"
    echo
    echo '```'
    cat "${overlap_sections[i + 1]}"
    echo '```'
  done
  fi
  echo
  echo "## Raw output"
  echo
  echo '```'
  cat "$work/tessera.tsv"
  echo
  if [[ $precision == bf16 ]]; then cat "$work/tessera-fp32.tsv"; echo; fi
  cat "$work/torch.tsv"
  echo '```'
} >"$out"
log "wrote $out"

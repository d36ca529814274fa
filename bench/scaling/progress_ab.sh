#!/usr/bin/env bash
# The MPI progress thread on and off (distarray/mpi_progress.hpp), side by side in one run:
# bench_scaling's training step on one rank, then on each 2-rank GRID with the thread on and
# with TESSERA_MPI_PROGRESS=off; prints step, compute, exposed halo and allreduce seconds and
# the efficiency against one rank (1-rank step / (P x step)). Writes nothing.
#
#   bench/scaling/progress_ab.sh BUILD_DIR
#
# Environment: MODEL (denoise-dilated), SHAPE (2x1x1024x1024), GRIDS ("1x2x1 2x1x1"),
# WARMUP (1), REPEATS (3), MPIEXEC (mpiexec). One thread per rank. Run it on an idle
# machine: 2 ranks need 2 free cores.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../scripts/lib/common.sh"

bench_arguments "$@" -- bench/scaling/bench_scaling
model="${MODEL:-denoise-dilated}" shape="${SHAPE:-2x1x1024x1024}"
read -r -a launcher <<<"${MPIEXEC:-mpiexec}"

step() {  # step <ranks> <grid> [env...]: one JSON line of bench_scaling
  local ranks=$1 grid=$2
  shift 2
  env OMP_NUM_THREADS=1 "$@" "${launcher[@]}" -n "$ranks" "$build/bench/scaling/bench_scaling" --model "$model" \
    --shape "$shape" --grid "$grid" --warmup "${WARMUP:-1}" --repeats "${REPEATS:-3}" | grep '"bench"'
}

{
  step 1 1x1x1 | sed 's/^/one /'
  for grid in ${GRIDS:-1x2x1 2x1x1}; do
    step 2 "$grid" | sed 's/^/on /'
    step 2 "$grid" TESSERA_MPI_PROGRESS=off | sed 's/^/off /'
  done
} | python3 "$here/progress_table.py"

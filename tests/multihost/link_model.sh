#!/usr/bin/env bash
# Under tests/multihost/cluster.sh --hosts N --link PROFILE: the performance model against the
# link. Measures the link by MPI between two hosts (bench_scaling --measure-links:
# inter_latency_s, inter_bandwidth, inter_reduce_bandwidth), each layer alone on one rank of h1 (--profile), then one
# training step on 4 ranks over the N hosts next to the model's prediction from those numbers
# (--timings, --machine). Appends bench_scaling's JSON line to OUT and prints the comparison.
#   link_model.sh BENCH_SCALING WORK_DIR OUT_JSONL [MODEL SHAPE GRID]
# RANKS (default 4) sets the step's rank count, spread evenly over the hosts; GRID defaults to
# 1xRANKSx1. With no more ranks than cores no rank waits for a core, which the model does not
# model: only then do its link terms meet a measurement undisturbed. OVERLAP_ALLREDUCE (default
# off, what the model predicts) is the step's --overlap-allreduce.
set -uo pipefail
source "$MH_LIB"
bench=$1 dir=$2 out=$3
model=${4:-"conv(out=8,k=3,pad=1),relu,conv(out=8,k=3,pad=1),relu,flatten,linear(out=16)"}
shape=${5:-4x1x96x96}
ranks=${RANKS:-4}
grid=${6:-1x${ranks}x1}
hosts=$(wc -w <<<"$MH_HOSTS")
((ranks % hosts == 0)) || fail "RANKS ($ranks) must be a multiple of the host count ($hosts)"
per_host=$((ranks / hosts))
mkdir -p "$dir"
export OMP_NUM_THREADS=1

on_host h1 mpiexec -n 1 "$bench" --model "$model" --shape "$shape" --grid 1x1x1 --repeats 5 \
  --profile "$dir/profile.txt" >"$dir/profile.json" || fail "profiling the layers failed"
srun_on -N 2 -n 2 --ntasks-per-node=1 "$bench" --measure-links "$dir/links.txt" || fail "the ping-pong failed"
grep -q '^inter_bandwidth ' "$dir/links.txt" || fail "the ping-pong did not run between two hosts: $(cat "$dir/links.txt")"
# A delay the link emulator adds must show in the one-way latency the model is given.
awk -v want="${MH_LATENCY_US:-0}" '/^inter_latency_s/ { us = $2 * 1e6; found = 1 }
  END { if (!found || us < want) { printf "the ping-pong measured %.1f us one way, less than the link'"'"'s %d us\n", us, want; exit 1 } }' \
  "$dir/links.txt" || fail "the link's latency is not in the measurement"
# The hosts share this machine's cores: each rank gets cores / ranks of them, so the model is told
# that (devices_per_rank) and how many ranks each host holds.
cores=$(getconf _NPROCESSORS_ONLN)
{
  cat "$dir/links.txt"
  echo "ranks_per_node $per_host"
  echo "devices_per_node 1"
  awk -v c="$cores" -v r="$ranks" 'BEGIN { printf "devices_per_rank %g\n", (c / r > 1 ? 1 : c / r) }'
} >"$dir/machine.txt"
# MPI_Finalize can stop for good across these hosts after the result line (MPICH 4.0 over
# UCX's TCP, distarray/finalize_guard.hpp): the runtime's deadline ends the ranks 10 s later.
TESSERA_FINALIZE_TIMEOUT=10 srun_on -N "$hosts" -n "$ranks" --ntasks-per-node="$per_host" "$bench" --model "$model" \
  --shape "$shape" --grid "$grid" --warmup 1 --repeats 5 --overlap-allreduce "${OVERLAP_ALLREDUCE:-off}" --timings "$dir/profile.txt" --machine "$dir/machine.txt" \
  --label "hosts=$hosts link=$MH_LINK_PROFILE overlap_allreduce=${OVERLAP_ALLREDUCE:-off}" >"$dir/step.json" || { cat "$dir/step.json"; fail "the step benchmark failed"; }
grep -q '"bench": "scaling"' "$dir/step.json" || { cat "$dir/step.json"; fail "no result line from the step benchmark"; }
line=$(grep '"bench": "scaling"' "$dir/step.json")
links=$(awk '/^inter_latency_s/ {l = $2} /^inter_bandwidth/ {b = $2} /^inter_reduce_bandwidth/ {r = $2}
             END {printf "inter_latency_s %g inter_bandwidth %g inter_reduce_bandwidth %g", l, b, r}' "$dir/links.txt")
echo "${line%\}}, \"links\": \"$links\"}" >>"$out"
python3 - "$line" "$links" <<'PY'
import json, sys
r = json.loads(sys.argv[1]); p = r["predicted"]
print(f'{r["label"]} grid {r["grid"]}: {sys.argv[2]}')
for k in ("step_s", "compute_s", "halo_s", "allreduce_s"):
    m, q = r[k], p[k]
    print(f'  {k:12s} measured {m*1e3:8.3f} ms  predicted {q*1e3:8.3f} ms  ratio {q/m if m else float("nan"):.2f}')
PY

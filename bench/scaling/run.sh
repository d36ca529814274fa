#!/usr/bin/env bash
# Strong and weak scaling of one training step (bench_scaling) on this machine, each run
# next to the performance model's prediction; writes into bench/results/
#   scaling-<backend>-<date>.jsonl   one JSON line per run (bench_scaling's)
#   scaling-<backend>-<date>.md      machine, settings, efficiency tables, predicted vs measured
#   scaling-<backend>-<date>-*.png   step time and efficiency plots
#
#   bench/scaling/run.sh [BUILD_DIR]        (default: build; needs bench_scaling built)
#
# Series (batch 1, one rank per core, OMP_NUM_THREADS=1, 1 warm-up and 5 timed steps;
# about 8 minutes on 2 cores):
#   strong-1024  denoise-fcn (32 channels) on 1x1x1024x1024, P = 1 2 4 8, grid from the model
#   strong-2048  the same net with 16 channels on 1x1x2048x2048 (memory and time on 2 cores)
#   weak-512     denoise-fcn, a 512x512 tile per rank: 512², 1024x512, 1024², 2048x1024
#   grids        2x1x512x512 on 2 ranks, every grid: does the model rank them right?
# The P = 1 run of each series profiles every layer alone (models/layer_profile.hpp); the
# model predicts the others from that profile, the ping-pong link numbers measured first,
# and its stated defaults for the rest. More ranks than cores are oversubscribed: such
# rows are marked, and their times measure the scheduler as much as Tessera.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
bench=$build/bench/scaling/bench_scaling
[[ -x $bench ]] || { echo "run.sh: $bench not found; build the target bench_scaling first" >&2; exit 1; }

python=/usr/bin/python3  # Debian's, for Debian's matplotlib
if ! "$python" -c 'import matplotlib' 2>/dev/null; then
  [[ $(id -u) == 0 ]] || { echo "run.sh: python3-matplotlib is missing and this is not root: apt-get install python3-matplotlib" >&2; exit 1; }
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-matplotlib >/dev/null
fi

cores=$(getconf _NPROCESSORS_ONLN)  # not nproc: it reports OMP_NUM_THREADS when set
export OMP_NUM_THREADS=1
backend=cpu
[[ -f $build/CMakeCache.txt ]] && grep -q '^TESSERA_ENABLE_CUDA:BOOL=ON' "$build/CMakeCache.txt" && backend=cuda
stamp=$(date +%F)
out=$repo/bench/results/scaling-$backend-$stamp
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: >"$out.jsonl"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date +%s)

# One rank per core while they fit (pinned: an unpinned pair may share a core); beyond
# that, unpinned and oversubscribed.
launch() {
  local p=$1
  shift
  if ((p <= cores)); then mpiexec -bind-to core -n "$p" "$bench" "$@"; else mpiexec -n "$p" "$bench" "$@"; fi
}
# Other processes on these cores change every number here (the development machine is
# shared), so each run first waits, up to 20 s, for 3 s without another runnable
# process, and its JSON line gets "other_runnable": the mean count of runnable processes
# besides its own ranks while it ran (sampled from /proc/loadavg).
runnable() { awk '{split($4, r, "/"); print r[1] - 1}' /proc/loadavg; }  # minus awk itself
wait_quiet() {
  local quiet=0 i
  for ((i = 0; i < 20 && quiet < 3; ++i)); do
    if (($(runnable) <= 0)); then quiet=$((quiet + 1)); else quiet=0; fi
    sleep 1
  done
}
record() {
  local p=$1 sampler others
  wait_quiet
  (while :; do runnable >>"$work/load"; sleep 0.5; done) &
  sampler=$!
  launch "$@" >"$work/line"
  kill "$sampler"
  wait "$sampler" 2>/dev/null || true
  others=$(awk -v p="$p" '{o = $1 - p; s += o > 0 ? o : 0; n++} END {printf "%.1f", n ? s / n : 0}' "$work/load")
  rm -f "$work/load"
  sed "s/}\$/, \"other_runnable\": $others}/" "$work/line" | tee -a "$out.jsonl"
}

echo "== links (MPI ping-pong, 2 ranks)"
mpiexec -bind-to core -n 2 "$bench" --measure-links "$work/links.txt"
cp "$work/links.txt" "$out-links.txt"

fcn16="conv(out=16,k=3,pad=1),relu,conv(out=16,k=3,pad=1),relu,conv(out=16,k=3,pad=1),relu,conv(out=1,k=3,pad=1)"
common=(--warmup 1 --repeats 5 --machine "$work/links.txt")

echo "== strong scaling, denoise-fcn on 1x1x1024x1024"
record 1 --label strong-1024 --model denoise-fcn --shape 1x1x1024x1024 "${common[@]}" --profile "$work/p1024.txt"
for p in 2 4 8; do
  record "$p" --label strong-1024 --model denoise-fcn --shape 1x1x1024x1024 "${common[@]}" --timings "$work/p1024.txt"
done

echo "== strong scaling, 16-channel fcn on 1x1x2048x2048"
record 1 --label strong-2048 --model "$fcn16" --shape 1x1x2048x2048 "${common[@]}" --profile "$work/p2048.txt"
for p in 2 4 8; do
  record "$p" --label strong-2048 --model "$fcn16" --shape 1x1x2048x2048 "${common[@]}" --timings "$work/p2048.txt"
done

echo "== weak scaling, denoise-fcn with a 512x512 tile per rank"
record 1 --label weak-512 --model denoise-fcn --shape 1x1x512x512 --grid 1x1x1 "${common[@]}" --profile "$work/p512.txt"
record 2 --label weak-512 --model denoise-fcn --shape 1x1x1024x512 --grid 1x2x1 "${common[@]}" --timings "$work/p512.txt"
record 4 --label weak-512 --model denoise-fcn --shape 1x1x1024x1024 --grid 1x2x2 "${common[@]}" --timings "$work/p512.txt"
record 8 --label weak-512 --model denoise-fcn --shape 1x1x2048x1024 --grid 1x4x2 "${common[@]}" --timings "$work/p512.txt"

echo "== every grid of 2 ranks, denoise-fcn on 2x1x512x512"
for g in 2x1x1 1x2x1 1x1x2; do
  record 2 --label grids --model denoise-fcn --shape 2x1x512x512 --grid "$g" "${common[@]}" --timings "$work/p512.txt"
done

machine="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $cores cores, $(free -g | awk '/^Mem:/ {print $2}') GiB"
"$python" "$here/report.py" "$out" --machine "$machine" --cores "$cores" --date "$stamp" \
  --mpi "$(mpichversion 2>/dev/null | sed -n 's/^MPICH Version:[[:space:]]*//p')" \
  --load "$load_before -> $(cut -d' ' -f1-3 /proc/loadavg)" --seconds $(($(date +%s) - started))
echo "wrote $out.md, $out.jsonl and $out-*.png"

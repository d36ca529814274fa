#!/usr/bin/env bash
# Under tests/multihost/cluster.sh --hosts 2: tessera-train on 2 hosts x 2 ranks (grid 1x2x2:
# the row halo and the gradient allreduce cross the link) gives the same losses and the same
# checkpoint as the same grid on one host (1e-6 relative). Shows that the two-host run's
# bytes cross the links (switch port counters) while the one-host run's do not, and that
# MPICH saw two nodes of two ranks (--verbose: per-node=2).
#   same_answers.sh TESSERA_TRAIN DATA_FILE WORK_DIR
set -uo pipefail
source "$MH_LIB"
train=$1 data=$2 dir=$3
rm -rf "$dir" && mkdir -p "$dir"
# --watchdog 60: the final checkpoint is a few hundred collective HDF5 calls, each waiting
# for 4 busy-waiting ranks to be scheduled on 2 shared cores; at load 16 one in five runs
# passed the default 20 s there.
args=(--data "$data" --batch 12 --steps 6 --grid 1x2x2 --progress off --verbose --optimizer sgd --lr 0.05
      --momentum 0.9 --seed 3 --watchdog 60
      --model "conv(out=4,k=3,pad=1),batchnorm(stats=all),relu,maxpool(k=2),conv(out=6,k=3,pad=1),relu,flatten,linear(out=4)")

# run <name> <srun placement...>: trains, and prints the bytes each host's link carried.
run() {
  local name=$1 h before=() after=()
  shift
  for h in h1 h2; do before+=("$(link_bytes "$h")"); done
  srun_on "$@" --kill-on-bad-exit=1 "$train" "${args[@]}" --metrics "$dir/$name.jsonl" --save "$dir/$name.h5" \
    >"$dir/$name.out" 2>&1 || { cat "$dir/$name.out"; fail "the $name run failed"; }
  for h in h1 h2; do after+=("$(link_bytes "$h")"); done
  printf '%s: link bytes h1 %d, h2 %d; %s\n' "$name" $((after[0] - before[0])) $((after[1] - before[1])) \
    "$(grep -o 'ranks=4 per-node=[0-9]*' "$dir/$name.out")"
  echo $((after[1] - before[1])) >"$dir/$name.h2-bytes"
}
run one-host -N 1 -n 4 -w h1
run two-hosts -N 2 -n 4 --ntasks-per-node=2

grep -q 'ranks=4 per-node=4' "$dir/one-host.out" || fail "the one-host run did not see its 4 ranks on one node"
grep -q 'ranks=4 per-node=2' "$dir/two-hosts.out" || fail "MPICH did not see two nodes of two ranks"
one=$(cat "$dir/one-host.h2-bytes") two=$(cat "$dir/two-hosts.h2-bytes")
# The halo of 6 steps, forward and backward, and the gradient allreduce are ~100 KB; the
# one-host run leaves h2's link to Slurm's few messages.
((two > 100000)) || fail "only $two bytes crossed h2's link in the two-host run: did the halo take another way?"
((one < two / 4)) || fail "the one-host run moved $one bytes over h2's link, the two-host run $two"
same_losses "$dir/one-host.jsonl" "$dir/two-hosts.jsonl" 1e-6 || fail "the losses differ"
for group in /params /optimizer; do
  h5diff --relative=1e-6 "$dir/one-host.h5" "$dir/two-hosts.h5" "$group" "$group" \
    || fail "the checkpoints' $group differ by more than 1e-6 relative"
done
echo "same_answers: $(grep -c '"step"' "$dir/two-hosts.jsonl") steps, losses and checkpoint equal to 1e-6; ok"

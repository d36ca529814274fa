#!/usr/bin/env bash
# Under tests/multihost/cluster.sh --hosts 2: tessera-train on 2 hosts x 2 ranks loses host h2
# mid-run, after a few steps and checkpoints:
#   cut   its cable is pulled at the switch (its ranks live on, unreachable)
#   kill  its ranks and its slurmd (every process of the host) are killed
# Passes when every rank has ended within 30 s, srun has exited non-zero, a rank names the
# lost ranks and their host in its one line, the last checkpoint is intact, and a run resumed
# from it on the surviving host, on another grid, equals the uninterrupted run.
#   lost_host.sh cut|kill TESSERA_TRAIN DATA_FILE WORK_DIR
set -uo pipefail
source "$MH_LIB"
mode=$1 train=$2 data=$3 dir=$4
rm -rf "$dir" && mkdir -p "$dir"
common=(--data "$data" --batch 12 --progress off --optimizer sgd --lr 0.05 --momentum 0.9 --seed 5
        --model "conv(out=4,k=3,pad=1),relu,maxpool(k=2),flatten,linear(out=4)")

# A checkpoint takes seconds on this loaded 2-core machine (4 ranks, all busy-waiting in MPI,
# share 2 cores with other work): the watchdog waits 15 s.
srun_on -N 2 -n 4 --ntasks-per-node=2 --kill-on-bad-exit=1 "$train" "${common[@]}" --grid 1x2x2 --steps 100000000 \
  --checkpoint-every 3 --save "$dir/run.h5" --metrics "$dir/run.jsonl" --watchdog 15 >"$dir/out" 2>"$dir/err" &
job=$!
wait_for_lines "$dir/run.jsonl" 4 120 "$job" || { cat "$dir/err"; fail "the run ended or stalled before step 4"; }
case $mode in
  cut) set_link h2 down ;;
  kill) kill -KILL $(ip netns pids "$(mh_var NS h2)") ;;
  *) fail "unknown mode '$mode'" ;;
esac
start=$SECONDS
echo "lost_host: h2 ${mode} after $(wc -l <"$dir/run.jsonl") steps"

# Every rank, on both hosts, ends by itself (on a cut host, by its watchdog).
while [[ -n $(ranks_on h1 "$train")$(ranks_on h2 "$train") ]] && ((SECONDS - start <= 60)); do sleep 0.2; done
ranks_end=$((SECONDS - start))
left="$(ranks_on h1 "$train" | xargs) $(ranks_on h2 "$train" | xargs)"

# srun waits for word from every host's step daemon: from a host cut off, none comes until
# slurmctld declares the node down (about a minute here). Once the ranks have ended, give it
# 10 s, then cancel the job as that declaration would.
deadline=$((SECONDS + 10))
while kill -0 "$job" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
cancelled=
if kill -0 "$job" 2>/dev/null; then
  nsenter --net="/run/netns/$MH_CTL" scancel --full "$(nsenter --net="/run/netns/$MH_CTL" squeue -h -o %i | head -n 1)"
  cancelled=" (cancelled after 10 s: srun was waiting for the lost host's step daemon)"
  deadline=$((SECONDS + 20))
  while kill -0 "$job" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
  kill -0 "$job" 2>/dev/null && { kill -KILL "$job"; fail "srun still runs 20 s after its job was cancelled"; }
fi
wait "$job"
status=$?
srun_end=$((SECONDS - start))
cat "$dir/err"
echo "lost_host: the ranks ended ${ranks_end} s after, srun ${srun_end} s after (exit status $status)$cancelled"
[[ -z ${left// /} ]] || fail "rank processes still running 60 s after: $left"
((ranks_end <= 30)) || fail "the ranks took more than 30 s to end"
((status != 0)) || fail "srun exited 0"
# By the watchdog (silence) or MPI's error handler (a connection that failed), same line.
grep -Eq "error: rank [01]( made no progress for [0-9]+ s \(step [0-9]+: [a-z ]+\)|: MPI failed \(.*\)); (unreachable|gone \(connection refused\)): (.*, )?rank\(s\) 2, 3 on host h2 \(10\.77\.0\.2\), so this rank ends the job" \
  "$dir/err" || fail "no rank named the lost ranks 2, 3 on host h2"

# The last checkpoint is whole: it resumes on the surviving host alone (mpiexec there), on
# another grid, and continues exactly the run that never lost a host.
saved=$(h5dump -d /meta/step "$dir/run.h5" 2>/dev/null | awk '/\(0\)/ {print $2}')
[[ $saved =~ ^[0-9]+$ ]] || fail "the last checkpoint has no readable step: $(h5dump -H "$dir/run.h5" 2>&1 | head -3)"
until_step=$((saved + 2))
on_host h1 mpiexec -n 2 "$train" "${common[@]}" --grid 1x2x1 --steps "$until_step" --resume "$dir/run.h5" \
  --metrics "$dir/resumed.jsonl" >"$dir/resumed.out" 2>&1 || { cat "$dir/resumed.out"; fail "the resumed run failed"; }
on_host h1 mpiexec -n 2 "$train" "${common[@]}" --grid 2x1x1 --steps "$until_step" \
  --metrics "$dir/whole.jsonl" >"$dir/whole.out" 2>&1 || { cat "$dir/whole.out"; fail "the uninterrupted run failed"; }
same_losses "$dir/whole.jsonl" "$dir/resumed.jsonl" 1e-5 || fail "the resumed run departs from the uninterrupted one"
echo "lost_host: resumed at step $saved on h1 (grid 1x2x1) to step $until_step: the uninterrupted run's losses; ok"

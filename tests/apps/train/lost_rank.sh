#!/usr/bin/env bash
# lost_rank.sh kill|stop MPIEXEC TESSERA_TRAIN DATA DIR
# Starts a 3-rank training run, waits until it has taken a few steps, then takes one rank
# away: `kill` sends it SIGKILL (the launcher sees it die), `stop` sends SIGSTOP (it hangs
# alive, so only the other ranks' watchdogs can end the job). Passes when the whole job
# ends within 30 s, with a non-zero status and a message saying what happened.
set -u
mode=$1 mpiexec=$2 train=$3 data=$4 dir=$5
rm -rf "$dir" && mkdir -p "$dir"
metrics=$dir/metrics.jsonl
"$mpiexec" -n 3 "$train" --data "$data" --model "conv(out=4,k=3,pad=1),relu,flatten,linear(out=4)" \
  --grid 1x3x1 --batch 12 --steps 100000000 --metrics "$metrics" --watchdog 5 --progress off \
  >"$dir/out" 2>"$dir/err" &
launcher=$!
victim=""
cleanup() {
  [ -n "$victim" ] && kill -CONT "$victim" 2>/dev/null
  pkill -KILL -f -- "$metrics" 2>/dev/null
  kill -KILL "$launcher" 2>/dev/null
}
trap cleanup EXIT

for _ in $(seq 1 1200); do  # up to 120 s for three steps
  [ -f "$metrics" ] && [ "$(wc -l <"$metrics")" -ge 3 ] && break
  kill -0 "$launcher" 2>/dev/null || { echo "lost_rank: the run ended before it was disturbed"; cat "$dir/err"; exit 1; }
  sleep 0.1
done
victim=$(pgrep -f -- "^$train .*$metrics" | tail -n 1)
[ -n "$victim" ] || { echo "lost_rank: no rank process found"; exit 1; }
[ "$mode" = kill ] && signal=KILL || signal=STOP
kill -"$signal" "$victim"
start=$(date +%s)
echo "lost_rank: sent SIG$signal to rank process $victim after $(wc -l <"$metrics") steps"

while kill -0 "$launcher" 2>/dev/null && [ $(($(date +%s) - start)) -le 60 ]; do sleep 0.2; done
if kill -0 "$launcher" 2>/dev/null; then
  echo "lost_rank: the job still runs 60 s after losing a rank: it hangs"
  exit 1
fi
wait "$launcher"
status=$?
elapsed=$(($(date +%s) - start))
cat "$dir/err"
echo "lost_rank: the job ended ${elapsed} s after losing a rank, exit status $status"
[ "$status" -ne 0 ] || { echo "lost_rank: but it exited 0"; exit 1; }
[ "$elapsed" -le 30 ] || { echo "lost_rank: but that is more than 30 s"; exit 1; }
if [ "$mode" = stop ]; then
  expect="made no progress for [0-9]+ s \\(step [0-9]+: [a-z ]+\\); another rank has probably died or hangs"
else
  expect="made no progress|MPI failed|BAD TERMINATION|KILLED|killed"
fi
grep -Eq "$expect" "$dir/err" "$dir/out" || { echo "lost_rank: but no message matches /$expect/"; exit 1; }
echo "lost_rank: ok"

# Helpers for commands run by tests/multihost/cluster.sh (sourced: `source "$MH_LIB"`).

# srun_on <srun arguments...>: submits from the head node, with MPICH's ranks wired by pmi2.
# HDF5_USE_FILE_LOCKING=FALSE: with HDF5's own file locks (flock), the ranks started by these
# slurmds stop for good in H5Fclose of a checkpoint (measured; the same run under mpiexec, or
# under the one-node Slurm of tests/slurm, does not). Clusters' parallel file systems are
# commonly run with the same setting; the checkpoint's atomic rename does not rely on it.
srun_on() {
  HDF5_USE_FILE_LOCKING=FALSE nsenter --net="/run/netns/$MH_CTL" srun --mpi=pmi2 "$@"
}

# on_host <host> <command...>: runs it on that host (its network, host name, IPC and mounts,
# entered through its slurmd), as a user logged in there would, e.g. mpiexec without Slurm.
on_host() {
  local h=$1 pid daemon=
  shift
  for pid in $(ip netns pids "$(mh_var NS "$h")"); do
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == slurmd ]] && daemon=$pid
  done
  [[ -n $daemon ]] || { echo "on_host: no slurmd on $h" >&2; return 1; }
  HDF5_USE_FILE_LOCKING=FALSE nsenter --target "$daemon" --net --uts --ipc --mount "$@"
}

mh_var() { local v="MH_$1_$2"; printf '%s\n' "${!v}"; }
switch_ns() { printf '%s\n' "${MH_CTL%-ctl}-sw"; }

# link_bytes <host>: bytes through the host's link so far, both directions (its switch port
# behind a bridge; its own eth0 behind the link emulator, whose ports are not interfaces).
link_bytes() {
  local ns=$(switch_ns) dev=$(mh_var LINK "$1")
  [[ ${MH_SWITCH:-bridge} == emulator ]] && ns=$(mh_var NS "$1") dev=eth0
  ip -n "$ns" -s link show dev "$dev" | awk '/RX:/ {getline; rx = $1} /TX:/ {getline; tx = $1} END {print rx + tx}'
}

# set_link <host> up|down: plugs or unplugs the host's cable at the switch (behind the link
# emulator: at the host, whose eth0 then refuses the emulator's frames).
set_link() {
  if [[ ${MH_SWITCH:-bridge} == emulator ]]; then
    ip -n "$(mh_var NS "$1")" link set dev eth0 "$2"
  else
    ip -n "$(switch_ns)" link set dev "$(mh_var LINK "$1")" "$2"
  fi
}

# ranks_on <host> <program path>: pids of the program's processes on that host.
ranks_on() {
  local pid
  for pid in $(ip netns pids "$(mh_var NS "$1")"); do
    [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$2" ]] && echo "$pid"
  done
}

# wait_for_lines <file> <count> <seconds> <pid>: until the file has that many lines; fails
# when the time is up or the process ends first.
wait_for_lines() {
  local deadline=$((SECONDS + $3))
  until [[ -f $1 && $(wc -l <"$1") -ge $2 ]]; do
    kill -0 "$4" 2>/dev/null && ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

# same_losses <a.jsonl> <b.jsonl> <relative tolerance>: every step's loss of b equals a's.
same_losses() {
  awk -v tol="$3" '
    function loss_of(line) { sub(/.*"loss": /, "", line); sub(/,.*/, "", line); return line + 0 }
    function step_of(line) { sub(/.*"step": /, "", line); sub(/,.*/, "", line); return line + 0 }
    /"eval"/ { next }
    FNR == NR { want[step_of($0)] = loss_of($0); next }
    { s = step_of($0); n++
      if (!(s in want)) { printf "step %d: not in the reference run\n", s; bad = 1; next }
      d = loss_of($0) - want[s]; if (d < 0) d = -d; m = want[s] < 0 ? -want[s] : want[s]
      if (d > tol * m) { printf "step %d: loss %.9g, the reference has %.9g\n", s, loss_of($0), want[s]; bad = 1 } }
    END { if (!n) { print "no steps to compare"; bad = 1 } exit bad }' "$1" "$2"
}

fail() { echo "FAILED: $*"; exit 1; }

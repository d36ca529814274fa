#!/usr/bin/env bash
# Runs one program under a real, private, one-node Slurm: `srun --mpi=pmi2 -n RANKS program args`.
#
#   tests/slurm/run_under_slurm.sh [--ranks N] [--timeout SECONDS] [--keep] -- <program> [args...]
#
# Everything lives in a fresh temporary folder: a munge key and munged on its own socket, a
# slurm.conf for one node on 127.0.0.1 with free ports, slurmctld and slurmd started by hand.
# Whatever happens, the daemons, the job's processes and the folder are gone when this exits
# (--keep leaves the folder, for reading the daemons' logs). Needs root and Debian's slurm-wlm,
# slurm-wlm-basic-plugins and munge (scripts/setup-deps.sh installs them).
#
# Exit status: the program's (srun's: the highest of its tasks'); 124 when it ran past
# --timeout; 77 (ctest's SKIP_RETURN_CODE) with one line saying why when no Slurm can be
# started here, or 1 instead where TESSERA_SLURM_REQUIRED=1 (CI: a skip would hide a
# regression); 2 for a bad command line.
set -uo pipefail

readonly SKIP=77
ranks=4
timeout_s=240
keep=0
while (($#)); do
  case "$1" in
    --ranks) ranks="${2:-}"; shift 2 || true ;;
    --timeout) timeout_s="${2:-}"; shift 2 || true ;;
    --keep) keep=1; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_under_slurm: unknown option '$1' (the program goes after --)" >&2; exit 2 ;;
  esac
done
[[ $ranks =~ ^[1-9][0-9]*$ ]] || { echo "run_under_slurm: --ranks needs a positive integer" >&2; exit 2; }
[[ $timeout_s =~ ^[1-9][0-9]*$ ]] || { echo "run_under_slurm: --timeout needs a positive number of seconds" >&2; exit 2; }
(($#)) || { echo "run_under_slurm: no program given (put it after --)" >&2; exit 2; }

skip() {
  [[ ${TESSERA_SLURM_REQUIRED:-0} == 1 ]] && { echo "run_under_slurm: FAILED (TESSERA_SLURM_REQUIRED=1): $*"; exit 1; }
  echo "run_under_slurm: SKIPPED: $*"
  exit "$SKIP"
}

# Inside a real Slurm job (CI under sbatch), srun would talk to that job's cluster: forget it.
# shellcheck disable=SC2046  # one name per word
unset $(compgen -e | grep -E '^(SLURM|SRUN|SALLOC|SBATCH|PMI|PMIX)_')

# --- Can Slurm run here at all? ---------------------------------------------------------------
[[ $(id -u) == 0 ]] || skip "slurmd must run as root and this is uid $(id -u)"
for tool in munged munge unmunge slurmctld slurmd srun sinfo scontrol timeout; do
  command -v "$tool" >/dev/null || skip "'$tool' is not installed (scripts/setup-deps.sh installs slurm-wlm and munge)"
done
source "$(dirname "${BASH_SOURCE[0]}")/slurm_sandbox.sh"
find_plugin_dir

# --- Teardown, whatever happens -----------------------------------------------------------------
# Every process started from here carries a marker in its environment (the daemons inherit it,
# srun hands it to the tasks), except slurmstepd, which writes its title over its environment:
# it is found by the sockets it holds in the sandbox. Teardown kills exactly those processes.
sandbox=$(mktemp -d /tmp/tessera-slurm.XXXXXX) || skip "cannot create a temporary folder"
chmod 755 "$sandbox"  # munged wants every folder above its socket searchable by all
export TESSERA_SLURM_SANDBOX="$sandbox"

marked_processes() {
  grep -lzx "TESSERA_SLURM_SANDBOX=$sandbox" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3
}
socket_holders() {  # processes with a unix socket in the sandbox open
  local inode inodes=() pattern=()
  # /proc/net/unix: Num RefCount Protocol Flags Type St Inode Path
  mapfile -t inodes < <(while read -r _ _ _ _ _ _ inode path; do
                          [[ $path == "$sandbox"/* ]] && echo "$inode"
                        done </proc/net/unix)
  ((${#inodes[@]})) || return 0
  for inode in "${inodes[@]}"; do pattern+=(-o -lname "socket:\\[$inode\\]"); done
  find /proc/[0-9]*/fd -mindepth 1 -maxdepth 1 \( "${pattern[@]:1}" \) 2>/dev/null | cut -d/ -f3
}
our_processes() { { marked_processes; socket_holders; } | sort -u; }

# bounded_wait <seconds>: until none of ours is left, or the time is up.
bounded_wait() {
  local deadline=$((SECONDS + $1))
  while [[ -n $(our_processes) ]] && ((SECONDS < deadline)); do sleep 0.2; done
}

teardown() {
  trap - EXIT INT TERM HUP
  export -n TESSERA_SLURM_SANDBOX  # the helpers run below must not look like ours
  local pid term=() kill=()
  # TERM for the daemons and the tasks. KILL for slurmstepd, which ignores TERM (it is the one
  # holding sockets without the marker), and for srun, which on TERM keeps trying to reach the
  # daemons that are being stopped beside it. Where srun is still running, this is no normal end.
  for pid in $(marked_processes); do
    case $(cat "/proc/$pid/comm" 2>/dev/null) in
      srun|timeout) kill+=("$pid") ;;
      *) term+=("$pid") ;;
    esac
  done
  mapfile -t -O "${#kill[@]}" kill < <(comm -13 <(printf '%s\n' "${term[@]}" "${kill[@]}" | sort) <(socket_holders | sort -u))
  { kill -KILL "${kill[@]}"; kill -TERM "${term[@]}"; } 2>/dev/null
  bounded_wait 10
  # shellcheck disable=SC2046
  kill -KILL $(our_processes) 2>/dev/null && bounded_wait 5
  [[ -n $(our_processes) ]] && echo "run_under_slurm: warning: processes left behind: $(our_processes | xargs)" >&2
  if ((keep)); then echo "run_under_slurm: kept $sandbox" >&2; else rm -rf "$sandbox"; fi
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# Ports nobody listens on now (TCP, IPv4 and IPv6), picked at random so that parallel runs differ.
listening_ports() {
  local local_address state
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | while read -r _ local_address _ state _; do
    [[ $state == 0A ]] && echo $((16#${local_address##*:}))  # 0A: LISTEN
  done
}
free_ports() {  # free_ports <how many>
  local taken want="$1" port found=()
  taken=" $(listening_ports | xargs) "
  while ((${#found[@]} < want)); do
    port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
    [[ $taken == *" $port "* || " ${found[*]} " == *" $port "* ]] && continue
    found+=("$port")
  done
  echo "${found[@]}"
}

# --- munge --------------------------------------------------------------------------------------
start_munge
mkdir -p "$sandbox/spool"

# --- slurm.conf -----------------------------------------------------------------------------------
read -r ctld_port slurmd_port < <(free_ports 2)
node=$(hostname -s 2>/dev/null || hostname)
cpus=$(nproc)
((cpus < ranks)) && cpus=$ranks  # more tasks than cores is fine here: each gets fewer threads
export SLURM_CONF="$sandbox/slurm.conf"
{
  echo "# One node on loopback, made by tests/slurm/run_under_slurm.sh; gone when it exits."
  slurm_conf_common "$plugin_dir"
  cat <<EOF
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmdSpoolDir=$sandbox/spool
SlurmdPidFile=$sandbox/run/slurmd.pid
NodeName=$node NodeAddr=127.0.0.1 NodeHostname=$node CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
} >"$SLURM_CONF"

# --- slurmctld and slurmd -------------------------------------------------------------------------
slurmctld -D -i >>"$sandbox/log/slurmctld.log" 2>&1 &  # with -D and no LogFile, logs go to stderr
ctld_pid=$!
disown
wait_until 15 "$ctld_pid" timeout 5 scontrol ping \
  || daemon_failed slurmctld "$ctld_pid" "did not answer on port $ctld_port in 15 s"
slurmd -D -N "$node" >>"$sandbox/log/slurmd.log" 2>&1 &
slurmd_pid=$!
disown
node_idle() { [[ $(timeout 5 sinfo -h -n "$node" -o %t 2>/dev/null) == idle ]]; }
wait_until 30 "$slurmd_pid" node_idle \
  || daemon_failed slurmd "$slurmd_pid" "node $node is not idle after 30 s: '$(timeout 5 sinfo -h -n "$node" -o '%t %E' 2>&1)'"

# --- the program ----------------------------------------------------------------------------------
echo "run_under_slurm: srun --mpi=pmi2 -n $ranks $* (node $node, ports $ctld_port/$slurmd_port)"
# In the background so that a signal to this script runs the teardown at once, not after srun.
timeout --kill-after=10 "$timeout_s" \
  srun --mpi=pmi2 -n "$ranks" --kill-on-bad-exit=1 --wait=30 -- "$@" &
wait $!
status=$?
if ((status == 124)); then
  echo "run_under_slurm: srun ran past $timeout_s s" >&2
fi
((status != 0)) && show_logs
exit "$status"

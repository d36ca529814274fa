#!/usr/bin/env bash
# A private Slurm cluster of network-namespace hosts on this machine, then one command.
#
#   tests/multihost/cluster.sh --hosts N [--link none|10g|1g] [--latency US [--emulator PATH]]
#                              [--timeout S] [--keep] -- command [args...]
#
# Builds, in a fresh temporary folder and fresh network namespaces (nothing is added to the
# machine's own interfaces):
#   <tag>-sw    the switch: one bridge, the far end of every host's veth pair
#   <tag>-ctl   the head node, 10.77.0.100: slurmctld, and where srun runs
#   <tag>-h1..N the hosts, 10.77.0.1..N: one slurmd each (NodeName h<i>, its own spool and
#               log), and what a separate machine would not share with the others: its own
#               host name h<i> (MPICH tells nodes apart by host name), System V IPC, /dev/shm
#               and boot id (UCX, MPICH's network layer here, tells machines apart by boot id:
#               with one shared, it would carry inter-host messages through shared memory)
# munged runs once, outside them; every daemon reaches it through its socket file.
# --link shapes each host's link in both directions with a token bucket (tc tbf): 10g is
# 10 Gbit/s, 1g 1 Gbit/s; none (the default) leaves the veth at its own speed.
# --latency US adds US microseconds one way to every frame between hosts. This kernel has no
# netem, so then the switch is not a bridge but tests/multihost/link_emulator (--emulator,
# default build/tests/multihost/link_emulator), a user-space switch whose ports are the hosts'
# eth0 TAPs: it holds each frame US microseconds and paces the switch side at the link's rate;
# tbf still paces each host's egress. Without --latency the latency is the stack's own.
#
# The command runs in the root namespace with these in its environment:
#   MH_DIR       the temporary folder (logs in $MH_DIR/log)
#   MH_CTL       the head node's namespace: `ip netns exec $MH_CTL srun ...` submits a job
#   MH_HOSTS     h1 .. hN;  MH_NS_<h> the namespace of host h;  MH_LINK_<h> its veth in the switch
#                (bridge only);  MH_SWITCH bridge or emulator;  MH_LINK_PROFILE e.g. 1g or 1g+100us;
#                MH_LATENCY_US the added one-way latency
#   MH_SLURMD_<h>  the pid of host h's slurmd;  SLURM_CONF
# and tests/multihost/lib.sh gives it helpers (srun_on, link_bytes, ...).
#
# Whatever happens, every process in these namespaces, munged, the namespaces (with their
# links and queueing disciplines) and the folder are gone when this exits (--keep keeps the
# folder). Exit status: the command's; 124 past --timeout; 77 (ctest's skip) with one line
# saying why when this machine cannot host such a cluster (not root, no `ip netns`, no Slurm),
# or 1 instead where TESSERA_MULTIHOST_REQUIRED=1 (CI); 2 for a bad command line.
set -uo pipefail

readonly SKIP=77
hosts=2
link=none
latency_us=0
emulator="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/tests/multihost/link_emulator"
timeout_s=240
keep=0
while (($#)); do
  case "$1" in
    --hosts) hosts="${2:-}"; shift 2 || true ;;
    --link) link="${2:-}"; shift 2 || true ;;
    --latency) latency_us="${2:-}"; shift 2 || true ;;
    --emulator) emulator="${2:-}"; shift 2 || true ;;
    --timeout) timeout_s="${2:-}"; shift 2 || true ;;
    --keep) keep=1; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,38p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "cluster: unknown option '$1' (the command goes after --)" >&2; exit 2 ;;
  esac
done
[[ $hosts =~ ^[2-4]$ ]] || { echo "cluster: --hosts must be 2, 3 or 4, got '$hosts'" >&2; exit 2; }
case "$link" in
  none) rate= bits_per_s=0 ;;
  10g) rate=10gbit bits_per_s=10000000000 ;;
  1g) rate=1gbit bits_per_s=1000000000 ;;
  *) echo "cluster: --link must be none, 10g or 1g, got '$link'" >&2; exit 2 ;;
esac
[[ $latency_us =~ ^[0-9]{1,6}$ ]] || { echo "cluster: --latency must be whole microseconds (0 to 999999), got '$latency_us'" >&2; exit 2; }
latency_us=$((10#$latency_us))
if ((latency_us > 0)) && [[ ! -x $emulator ]]; then
  echo "cluster: --latency needs the link emulator, and '$emulator' is not an executable (build tessera, or pass --emulator)" >&2
  exit 2
fi
[[ $timeout_s =~ ^[1-9][0-9]*$ ]] || { echo "cluster: --timeout needs a positive number of seconds" >&2; exit 2; }
(($#)) || { echo "cluster: no command given (put it after --)" >&2; exit 2; }

skip() {
  [[ ${TESSERA_MULTIHOST_REQUIRED:-0} == 1 ]] && { echo "cluster: FAILED (TESSERA_MULTIHOST_REQUIRED=1): $*"; exit 1; }
  echo "cluster: SKIPPED: $*"
  exit "$SKIP"
}
# shellcheck disable=SC2046  # one name per word; an enclosing Slurm job is not ours
unset $(compgen -e | grep -E '^(SLURM|SRUN|SALLOC|SBATCH|PMI|PMIX)_')

[[ $(id -u) == 0 ]] || skip "network namespaces need root and this is uid $(id -u)"
command -v ip >/dev/null || skip "'ip' (iproute2) is not installed"
ip netns list >/dev/null 2>&1 || skip "'ip netns' does not work here: $(ip netns list 2>&1 | head -n 1)"
for tool in munged munge unmunge slurmctld slurmd srun sinfo scontrol unshare nsenter timeout tc; do
  command -v "$tool" >/dev/null || skip "'$tool' is not installed (scripts/setup-deps.sh installs slurm-wlm and munge)"
done
source "$(dirname "${BASH_SOURCE[0]}")/../slurm/slurm_sandbox.sh"
find_plugin_dir

# --- teardown, whatever happens -------------------------------------------------------------------
sandbox=$(mktemp -d /tmp/tessera-hosts.XXXXXX) || skip "cannot create a temporary folder"
chmod 755 "$sandbox"
tag=tmh$(printf '%04x' $((RANDOM % 65536)))  # short: interface names have at most 15 characters
namespaces=()
munged_pid=

netns_pids() { local ns; for ns in "${namespaces[@]}"; do ip netns pids "$ns" 2>/dev/null; done; }
teardown() {
  trap - EXIT INT TERM HUP
  local deadline pids
  # slurmstepd ignores TERM; the tasks and daemons may take a moment: TERM, then KILL.
  pids=$(netns_pids | xargs)
  [[ -n $pids ]] && kill -TERM $pids 2>/dev/null
  deadline=$((SECONDS + 5))
  while [[ -n $(netns_pids) ]] && ((SECONDS < deadline)); do sleep 0.2; done
  pids=$(netns_pids | xargs)
  [[ -n $pids ]] && kill -KILL $pids 2>/dev/null
  deadline=$((SECONDS + 5))
  while [[ -n $(netns_pids) ]] && ((SECONDS < deadline)); do sleep 0.2; done
  [[ -n $(netns_pids) ]] && echo "cluster: warning: processes left in the namespaces: $(netns_pids | xargs)" >&2
  [[ -n $munged_pid ]] && kill -TERM "$munged_pid" 2>/dev/null
  local ns
  for ns in "${namespaces[@]}"; do ip netns delete "$ns" 2>/dev/null; done  # takes its links and qdiscs
  if ((keep)); then echo "cluster: kept $sandbox" >&2; else rm -rf "$sandbox"; fi
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# --- the network ------------------------------------------------------------------------------------
add_ns() { ip netns add "$1" || skip "cannot create network namespace '$1'"; namespaces+=("$1"); ip -n "$1" link set lo up; }
switch=$tag-sw
ctl=$tag-ctl
add_ns "$switch"
add_ns "$ctl"
host_names=()
for ((i = 1; i <= hosts; ++i)); do
  host_names+=("h$i")
  add_ns "$tag-h$i"
  export "MH_NS_h$i=$tag-h$i"
done
mkdir -p "$sandbox/log"
# address <namespace> <address>: its eth0 gets the address and comes up.
address() { ip -n "$1" addr add "$2/24" dev eth0 && ip -n "$1" link set eth0 up; }
if ((latency_us == 0)); then
  switch_kind=bridge
  ip -n "$switch" link add br0 type bridge && ip -n "$switch" link set br0 up || skip "cannot create a bridge"
  # plug <namespace> <address> <switch-side name>: a veth pair from the namespace to the bridge.
  plug() {
    ip link add "$3" netns "$switch" type veth peer name eth0 netns "$1" || skip "cannot create a veth pair"
    ip -n "$switch" link set "$3" master br0 up
    address "$1" "$2"
  }
  plug "$ctl" 10.77.0.100 "${tag}c"
  for ((i = 1; i <= hosts; ++i)); do
    plug "$tag-h$i" "10.77.0.$i" "${tag}h$i"
    export "MH_LINK_h$i=${tag}h$i"
    # The host's ingress: the switch port's egress, paced as the host's own below.
    [[ -n $rate ]] && { tc -n "$switch" qdisc add dev "${tag}h$i" root tbf rate "$rate" burst 256kb latency 50ms \
                          || skip "tc tbf is not available here"; }
  done
else
  switch_kind=emulator
  ports=("/run/netns/$ctl")
  for h in "${host_names[@]}"; do ports+=("/run/netns/$tag-$h"); done
  # In the switch's namespace, so that the teardown ends it with everything else there.
  nsenter --net="/run/netns/$switch" "$emulator" --delay-us "$latency_us" --rate-bps "$bits_per_s" \
    --ready "$sandbox/emulator.ready" "${ports[@]}" >>"$sandbox/log/link_emulator.log" 2>&1 &
  emulator_pid=$!
  for ((tries = 0; tries < 50; ++tries)); do
    [[ -f $sandbox/emulator.ready ]] && break
    kill -0 "$emulator_pid" 2>/dev/null || break
    sleep 0.1
  done
  [[ -f $sandbox/emulator.ready ]] || skip "the link emulator did not start: $(tail -n 1 "$sandbox/log/link_emulator.log")"
  address "$ctl" 10.77.0.100
  for ((i = 1; i <= hosts; ++i)); do address "$tag-h$i" "10.77.0.$i"; done
fi
for h in "${host_names[@]}"; do
  # The host's egress on its eth0; the bridge's port or the emulator paces its ingress.
  # Burst: at least one 64 KiB TSO segment plus a rate's millisecond.
  if [[ -n $rate ]]; then
    tc -n "$tag-$h" qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 50ms || skip "tc tbf is not available here"
  fi
done
profile=$link
((latency_us > 0)) && profile="$link+${latency_us}us"
export MH_DIR=$sandbox MH_CTL=$ctl MH_HOSTS="${host_names[*]}" MH_LINK_PROFILE=$profile MH_LATENCY_US=$latency_us \
  MH_SWITCH=$switch_kind

# --- munge -------------------------------------------------------------------------------------------
start_munge

# --- slurm.conf ----------------------------------------------------------------------------------------
export SLURM_CONF="$sandbox/slurm.conf"
cpus=$(getconf _NPROCESSORS_ONLN)
((cpus < 4)) && cpus=4  # each host may run 4 tasks; on this machine they share its cores
{
  echo "# $hosts hosts in network namespaces, made by tests/multihost/cluster.sh; gone when it exits."
  slurm_conf_common "$plugin_dir"
  cat <<EOF
SlurmctldHost=ctl(10.77.0.100)
SlurmdSpoolDir=$sandbox/spool-%n
SlurmdPidFile=$sandbox/run/slurmd-%n.pid
SlurmdLogFile=$sandbox/log/slurmd-%n.log
# A node silent for a minute is declared down (real clusters wait 300 s): the ranks' own
# watchdogs, which name what they lost, end a job on a cut link before Slurm does.
SlurmdTimeout=60
MessageTimeout=5
TCPTimeout=2
EOF
  for ((i = 1; i <= hosts; ++i)); do
    echo "NodeName=h$i NodeAddr=10.77.0.$i NodeHostname=h$i CPUs=$cpus State=UNKNOWN"
  done
  echo "PartitionName=test Nodes=h[1-$hosts] Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
} >"$SLURM_CONF"

# --- the daemons, each in its namespace under its own host name ------------------------------------
# in_ns <namespace> <hostname> <command...>: runs it there under that host name, with its
# own IPC namespace, /dev/shm and boot id; what it starts (slurmstepd, the tasks) inherits them.
# nsenter, not `ip netns exec`: that one remounts /sys, and slurmd needs /sys/fs/cgroup.
in_ns() {
  local ns=$1 name=$2
  shift 2
  cat /proc/sys/kernel/random/uuid >"$sandbox/boot_id-$name"
  nsenter --net="/run/netns/$ns" unshare --uts --ipc --mount --propagation private -- sh -c '
    hostname "$0" && mount -t tmpfs -o mode=1777 shm /dev/shm &&
    mount --bind "$1" /proc/sys/kernel/random/boot_id && shift && exec "$@"' "$name" "$sandbox/boot_id-$name" "$@"
}
in_ns "$ctl" ctl slurmctld -D -i >>"$sandbox/log/slurmctld.log" 2>&1 &
ctld_pid=$!
disown
wait_until 15 "$ctld_pid" ip netns exec "$ctl" timeout 5 scontrol ping \
  || daemon_failed slurmctld "$ctld_pid" "did not answer in 15 s"
for h in "${host_names[@]}"; do
  mkdir -p "$sandbox/spool-$h"
  in_ns "$tag-$h" "$h" slurmd -D -N "$h" >>"$sandbox/log/slurmd-$h.out" 2>&1 &
  export "MH_SLURMD_$h=$!"
  disown
done
all_idle() {
  [[ $(ip netns exec "$ctl" timeout 5 sinfo -h -o '%t %D' 2>/dev/null) == "idle $hosts" ]]
}
wait_until 30 "$ctld_pid" all_idle \
  || daemon_failed slurmd "$ctld_pid" "not all $hosts hosts are idle after 30 s: '$(ip netns exec "$ctl" timeout 5 sinfo -h -N -o '%N %t' 2>&1 | xargs)'"

# --- the command ---------------------------------------------------------------------------------------
export MH_LIB="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
echo "cluster: $hosts hosts (${host_names[*]}), link ${profile} through the ${switch_kind}: $*"
timeout --kill-after=10 "$timeout_s" "$@" &
wait $!
status=$?
((status == 124)) && echo "cluster: the command ran past $timeout_s s" >&2
((status != 0)) && show_logs
exit "$status"

# Sourced by tests/slurm/run_under_slurm.sh and tests/multihost/cluster.sh: what a private
# Slurm in a temporary folder needs whatever the machines are (one node on loopback, or
# hosts in network namespaces). The caller defines `skip <why>` and `$sandbox` first.

# find_plugin_dir: sets plugin_dir to Slurm's plugin folder (with pmi2), or skips naming the
# missing package.
find_plugin_dir() {
  plugin_dir=$(dirname "$(dpkg -L slurm-wlm-basic-plugins 2>/dev/null | grep -m1 '/mpi_pmi2\.so$')" 2>/dev/null)
  [[ -f $plugin_dir/mpi_pmi2.so ]] || skip "Slurm's pmi2 MPI plugin is missing (Debian package slurm-wlm-basic-plugins)"
}

# Prints the tail of the daemons' logs: on any failure, they say why.
show_logs() {
  local log
  for log in "$sandbox"/log/*.log; do
    [[ -s $log ]] || continue
    echo "----- $(basename "$log") (last 15 lines)" >&2
    tail -n 15 "$log" >&2
  done
}

# wait_until <seconds> <daemon pid> <command...>: waits for the command (each try bounded
# itself) to succeed; fails at once when the daemon dies, or when the time is up.
wait_until() {
  local deadline=$((SECONDS + $1)) pid="$2"
  shift 2
  until "$@" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

# daemon_failed <name> <pid> <what did not happen>: logs, then one line saying why, and skip.
daemon_failed() {
  show_logs
  kill -0 "$2" 2>/dev/null && skip "$1 started but $3 (logs above)"
  skip "$1 exited at start: $(grep -v '^\s*$' "$sandbox/log/$1.log" 2>/dev/null | tail -n 1)"
}

# start_munge: one munged with a fresh key in $sandbox/munge; sets munged_pid and socket
# (every daemon reaches it through that socket file).
start_munge() {
  mkdir -p "$sandbox"/{munge,log,state,run}
  chmod 755 "$sandbox/munge"  # munged wants its socket's folder searchable by all
  head -c 1024 /dev/urandom >"$sandbox/munge/munge.key" && chmod 400 "$sandbox/munge/munge.key"
  socket="$sandbox/munge/munge.socket"
  munged --foreground --force --socket="$socket" --key-file="$sandbox/munge/munge.key" \
         --pid-file="$sandbox/munge/munged.pid" --seed-file="$sandbox/munge/munged.seed" \
         --log-file="$sandbox/log/munged.log" >>"$sandbox/log/munged.log" 2>&1 &
  munged_pid=$!
  disown  # teardown kills it; no job notices from bash
  munge_works() { timeout 5 munge -n -S "$socket" | timeout 5 unmunge -S "$socket"; }
  wait_until 10 "$munged_pid" munge_works || daemon_failed munged "$munged_pid" "no credential round trip in 10 s"
}

# slurm_conf_common <plugin dir>: the slurm.conf lines both clusters share (root daemons,
# munge, state in the sandbox, no accounting, pmi2, CPUs as the only resource; a node may
# claim more CPUs than the machine has, so tasks then share cores).
slurm_conf_common() {
  cat <<CONF
ClusterName=tessera
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
StateSaveLocation=$sandbox/state
SlurmctldPidFile=$sandbox/run/slurmctld.pid
SlurmctldDebug=info
SlurmdDebug=info
PluginDir=$1
PlugStackConfig=$sandbox/plugstack.conf
TmpFS=$sandbox
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=pmi2
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
InactiveLimit=0
KillWait=5
MinJobAge=10
MailProg=/bin/true
CONF
  : >"$sandbox/plugstack.conf"
}

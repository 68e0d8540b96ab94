#!/usr/bin/env bash
# slurm-lab.sh: a real Slurm cluster on one machine, in one folder, for tenax's tests and for developers.
#
# It runs munged, slurmctld and one slurmd per emulated node (slurmd -N nI), all on 127.0.0.1 with ports chosen free
# at bring-up, every file (configuration, state, spool, logs, pid files, munge key and socket) under the lab folder.
# Several labs can run side by side (parallel ctest), and nothing outside the folder is touched. Needs root, the
# Debian packages slurmctld slurmd slurm-client munge, and a cgroup file system at /sys/fs/cgroup (slurmd 22.05
# refuses to start without one).
#
#   slurm-lab.sh up DIR [--nodes N] [--plugin SO [--plugin-args "key=value ..."]] [--slurmd-timeout S]
#                       [--switches halves|interleaved] [--owner-pid PID] [--netns [--isl-rate RATE]]
#       Writes DIR/etc/{slurm.conf,topology.conf,plugstack.conf} and starts the daemons; returns once every node is
#       idle. The nodes n1..nN sit under two leaf switches below a root switch: s1 holds the first half and s2 the
#       rest (halves, the default), or s1 the odd and s2 the even nodes (interleaved: Slurm's node order then
#       alternates between switches, as in a fragmented allocation, so topology-aware placement differs from it).
#       Partitions: debug (default), low (preemptible: REQUEUE after GraceTime=10) and high (preempts low).
#       --owner-pid: a watchdog tears the lab down as soon as that process is gone, so a test killed by a
#       timeout (SIGKILL, no trap runs) still leaves nothing behind.
#       --netns: every node is a host of its own: a network namespace with one interface (eth0, 10.A.B.i/24) whose
#       veth peer sits in its leaf switch's bridge; the two bridges are joined by an inter-switch link (a veth pair),
#       shaped with tc tbf to RATE (e.g. 100mbit) by --isl-rate. slurmd and everything it starts (slurmstepd, the
#       tasks, Open MPI's TCP traffic) run inside the node's namespace and reach the others only through the
#       bridges; slurmctld and munged stay on the host, which has the address 10.A.B.254 on the first bridge. The
#       tasks get OMPI_MCA_btl_tcp_if_include=eth0 from their environment only if the job sets it.
#   slurm-lab.sh down DIR          cancel every job, kill every step and daemon of this lab (by PID), wait for them
#   slurm-lab.sh env DIR           print `export SLURM_CONF=...` for eval in a shell (client commands need it)
#   slurm-lab.sh plugstack DIR [LINE...]  rewrite plugstack.conf (no LINE: empty); clients and new steps read it at
#                                  once, so allocator/local/remote behaviour changes without a restart
#   slurm-lab.sh kill-node DIR nX  simulate a node failure: SIGKILL nX's slurmstepd processes, their tasks, its slurmd
#   slurm-lab.sh start-node DIR nX restart nX's slurmd (ReturnToService=1 brings a DOWN node back to idle)
#   slurm-lab.sh wait-idle DIR [SECONDS]  wait until every node is idle (default 30 s)
#   slurm-lab.sh ports DIR         print the controller's and each node's port
# Faults of a --netns lab (each reversible; none sends a packet that would tell the peers):
#   slurm-lab.sh partition-node DIR nX   cut nX off: its interface leaves its switch (link still up, no RST, no FIN)
#   slurm-lab.sh heal-node DIR nX        put it back
#   slurm-lab.sh freeze-node DIR nX      SIGSTOP every process in nX's namespace; thaw-node DIR nX: SIGCONT
#   slurm-lab.sh throttle-node DIR nX RATE   tbf both ways on nX's link (RATE "off" removes it)
#   slurm-lab.sh exec DIR nX CMD...      run CMD inside nX's network namespace
set -euo pipefail

die() {
  echo "slurm-lab: $*" >&2
  exit 1
}

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
  exit 2
}

self=$(readlink -f "$0")

# --- ports -----------------------------------------------------------------------------------------------------------
# A port is free if nothing listens on it or uses it locally; the candidates are random so that labs started at the
# same moment rarely race for the same one (and `up` retries with new ports if a daemon still fails to bind).
declare -A taken_ports=()
used_ports() { ss -Htan 2>/dev/null | awk '{print $4}' | sed 's/.*://' | sort -u; }
pick_port() {
  local used candidate
  used=$(used_ports)
  for _ in $(seq 200); do
    candidate=$((20000 + RANDOM % 30000))
    [[ -n "${taken_ports[$candidate]:-}" ]] && continue
    grep -qx "$candidate" <<<"$used" && continue
    taken_ports[$candidate]=1
    echo "$candidate"
    return 0
  done
  die "no free TCP port found between 20000 and 50000"
}

# --- process helpers -------------------------------------------------------------------------------------------------
pid_of() { [[ -s "$1" ]] && cat "$1" 2>/dev/null || true; }
# A zombie counts as gone: where PID 1 does not reap, an exited daemon would otherwise look alive for ever.
alive() {
  [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null || return 1
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ "$state" != Z ]]
}

# Every descendant of a process, deepest first, so children cannot be re-parented and missed.
descendants() {
  local child
  for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do
    descendants "$child"
    echo "$child"
  done
}

kill_tree() {
  local sig=$1 pid=$2 p
  for p in $(descendants "$pid") "$pid"; do
    kill "-$sig" "$p" 2>/dev/null || true
  done
}

wait_gone() {
  local deadline=$((SECONDS + $1)) p
  shift
  for p in "$@"; do
    while alive "$p" && ((SECONDS < deadline)); do sleep 0.1; done
  done
  for p in "$@"; do
    alive "$p" && return 1
  done
  return 0
}

# slurmstepd processes outlive slurmd and carry no lab path on their command line: find them by the sockets they
# listen on inside the node's spool folder.
stepd_pids() {
  local spool=$1
  ss -xlpH 2>/dev/null | grep -F "$spool/" | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u || true
}

# Client processes of this lab left behind (an srun whose batch shell was killed is re-parented and no longer a
# descendant of any slurmstepd): every process whose environment points SLURM_CONF at this lab, except this script
# and its ancestors (a developer's shell that ran `eval "$(slurm-lab.sh env DIR)"` must survive `down`).
lab_clients() {
  local conf="SLURM_CONF=$1/etc/slurm.conf" p ancestors=" " a=$$ environ
  while [[ -n "$a" && "$a" != 0 ]]; do
    ancestors+="$a "
    a=$(awk '{print $4}' "/proc/$a/stat" 2>/dev/null || true)
  done
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [[ "$ancestors" == *" $p "* ]] && continue
    # Read first, then search: `grep -q` ending a pipe early would fail the pipeline under pipefail.
    environ=$({ tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null) || continue
    if grep -qxF "$conf" <<<"$environ"; then echo "$p"; fi
  done
}

# --- configuration ---------------------------------------------------------------------------------------------------
node_names() { seq -f 'n%g' 1 "$1"; }

write_configs() {
  local lab=$1 nodes=$2 timeout=$3 switches=$4 ctl_port=$5
  shift 5
  local controller=localhost node_addr
  if net_load "$lab"; then controller="localhost($NET_SUBNET.254)"; fi
  local node_ports=("$@") half=$(((nodes + 1) / 2)) i
  cat >"$lab/etc/slurm.conf" <<EOF
# Written by slurm-lab.sh: a ${nodes}-node cluster emulated on one host.
ClusterName=lab
SlurmctldHost=${controller}
SlurmctldPort=${ctl_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=${lab}/munge/munge.socket,cred_expire=5
StateSaveLocation=${lab}/state
SlurmdSpoolDir=${lab}/spool/%n
SlurmctldPidFile=${lab}/run/slurmctld.pid
SlurmdPidFile=${lab}/run/slurmd-%n.pid
SlurmctldLogFile=${lab}/log/slurmctld.log
SlurmdLogFile=${lab}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=1
JobRequeue=1
SlurmdTimeout=${timeout}
KillWait=5
MinJobAge=600
SchedulerParameters=bf_interval=1
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
SlurmctldParameters=preempt_send_user_signal
TopologyPlugin=topology/tree
PlugStackConfig=${lab}/etc/plugstack.conf
TmpFS=${lab}/tmp/%n
EOF
  for i in $(seq 1 "$nodes"); do
    node_addr=127.0.0.1
    if net_load "$lab"; then node_addr="$NET_SUBNET.$i"; fi
    echo "NodeName=n$i NodeHostname=localhost NodeAddr=$node_addr Port=${node_ports[$((i - 1))]} CPUs=4" \
      "RealMemory=2000 State=UNKNOWN" >>"$lab/etc/slurm.conf"
  done
  cat >>"$lab/etc/slurm.conf" <<EOF
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
PartitionName=low Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE GraceTime=10
PartitionName=high Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF
EOF
  {
    if ((nodes == 1)); then
      echo "SwitchName=s1 Nodes=n1"
      echo "SwitchName=root Switches=s1"
    elif [[ "$switches" == interleaved ]]; then
      echo "SwitchName=s1 Nodes=$(seq -s, -f 'n%g' 1 2 "$nodes")"
      echo "SwitchName=s2 Nodes=$(seq -s, -f 'n%g' 2 2 "$nodes")"
      echo "SwitchName=root Switches=s1,s2"
    else
      echo "SwitchName=s1 Nodes=$(seq -s, -f 'n%g' 1 "$half")"
      echo "SwitchName=s2 Nodes=$(seq -s, -f 'n%g' $((half + 1)) "$nodes")"
      echo "SwitchName=root Switches=s1,s2"
    fi
  } >"$lab/etc/topology.conf"
}

# --- network (--netns) -----------------------------------------------------------------------------------------------
# Names are derived from the lab folder so that labs side by side never share one: tl<4 hex> + s1/s2 (bridges), i1/i2
# (the inter-switch link), n<i> (a node's host-side interface) and tl<4 hex>-n<i> (its namespace). What exists is
# written to run/net.env before it is created, so `down` removes it even after a failed bring-up.
net_prefix() { printf 'tl%s' "$(printf '%s' "$1" | md5sum | cut -c1-4)"; }

# A /24 of 10.200.0.0/13 that no interface of the host uses yet.
pick_subnet() {
  local used candidate
  used=$(ip -4 -o addr show 2>/dev/null | awk '{print $4}')
  for _ in $(seq 100); do
    candidate="10.$((200 + RANDOM % 8)).$((RANDOM % 250))"
    grep -q "^${candidate//./\.}\." <<<"$used" || {
      echo "$candidate"
      return 0
    }
  done
  die "no free 10.200.0.0/13 subnet for the lab's network"
}

net_load() { # sets NET_PREFIX NET_SUBNET NET_NODES, or returns 1 when the lab has no network of its own
  [[ -s "$1/run/net.env" ]] || return 1
  # shellcheck disable=SC1091
  source "$1/run/net.env"
}

node_switch() { # node index -> bridge suffix (s1 or s2), as topology.conf places it
  local i=$1 nodes=$2 switches=$3
  if ((nodes == 1)); then echo s1; elif [[ "$switches" == interleaved ]]; then
    ((i % 2 == 1)) && echo s1 || echo s2
  else
    ((i <= (nodes + 1) / 2)) && echo s1 || echo s2
  fi
}

net_up() {
  local lab=$1 nodes=$2 switches=$3 isl_rate=$4 prefix subnet i ns
  command -v ip >/dev/null || die "--netns needs iproute2's ip"
  command -v nsenter >/dev/null || die "--netns needs util-linux's nsenter"
  prefix=$(net_prefix "$lab")
  subnet=$(pick_subnet)
  printf 'NET_PREFIX=%s\nNET_SUBNET=%s\nNET_NODES=%s\nNET_SWITCHES=%s\n' "$prefix" "$subnet" "$nodes" "$switches" \
    >"$lab/run/net.env"
  for sw in s1 s2; do
    ip link add "${prefix}$sw" type bridge || die "cannot create the bridge ${prefix}$sw (is the lab already up?)"
    ip link set "${prefix}$sw" up
  done
  ip link add "${prefix}i1" type veth peer name "${prefix}i2"
  ip link set "${prefix}i1" master "${prefix}s1" up
  ip link set "${prefix}i2" master "${prefix}s2" up
  if [[ -n "$isl_rate" ]]; then
    for end in i1 i2; do
      tc qdisc add dev "${prefix}$end" root tbf rate "$isl_rate" burst 64kb latency 100ms ||
        die "tc tbf rate '$isl_rate' on the inter-switch link failed"
    done
  fi
  ip addr add "$subnet.254/24" dev "${prefix}s1"
  for i in $(seq 1 "$nodes"); do
    ns="${prefix}-n$i"
    ip netns add "$ns"
    ip link add "${prefix}n$i" type veth peer name eth0 netns "$ns"
    ip link set "${prefix}n$i" master "${prefix}$(node_switch "$i" "$nodes" "$switches")" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$subnet.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
}

net_node_index() { # nX -> X, checked against the lab
  local node=$1
  [[ "$node" =~ ^n([1-9][0-9]*)$ ]] && ((BASH_REMATCH[1] <= NET_NODES)) || die "no node '$node' in this lab"
  echo "${BASH_REMATCH[1]}"
}

net_pids() { ip netns pids "$NET_PREFIX-n$1" 2>/dev/null || true; }

net_down() {
  local lab=$1 i p pids
  net_load "$lab" || return 0
  for i in $(seq 1 "$NET_NODES"); do
    pids=$(net_pids "$i")
    for p in $pids; do kill -CONT "$p" 2>/dev/null || true; done
    for p in $pids; do kill -KILL "$p" 2>/dev/null || true; done
  done
  for i in $(seq 1 "$NET_NODES"); do
    # shellcheck disable=SC2046
    [[ -z "$(net_pids "$i")" ]] || wait_gone 5 $(net_pids "$i") || true
    ip netns del "$NET_PREFIX-n$i" 2>/dev/null || true
    ip link del "${NET_PREFIX}n$i" 2>/dev/null || true
  done
  ip link del "${NET_PREFIX}i1" 2>/dev/null || true
  for sw in s1 s2; do ip link del "${NET_PREFIX}$sw" 2>/dev/null || true; done
  rm -f "$lab/run/net.env"
}

cmd_net_fault() {
  local fault=$1 lab node i p
  lab=$(readlink -f "$2")
  node=$3
  net_load "$lab" || die "$fault: $lab is not a --netns lab"
  i=$(net_node_index "$node")
  case "$fault" in
    partition-node) ip link set "${NET_PREFIX}n$i" nomaster ;;
    heal-node)
      ip link set "${NET_PREFIX}n$i" master "${NET_PREFIX}$(node_switch "$i" "$NET_NODES" "$NET_SWITCHES")"
      ;;
    freeze-node) for p in $(net_pids "$i"); do kill -STOP "$p" 2>/dev/null || true; done ;;
    thaw-node) for p in $(net_pids "$i"); do kill -CONT "$p" 2>/dev/null || true; done ;;
    throttle-node)
      local rate=$4
      tc qdisc del dev "${NET_PREFIX}n$i" root 2>/dev/null || true
      ip netns exec "$NET_PREFIX-n$i" tc qdisc del dev eth0 root 2>/dev/null || true
      if [[ "$rate" != off ]]; then
        tc qdisc add dev "${NET_PREFIX}n$i" root tbf rate "$rate" burst 16kb latency 400ms ||
          die "throttle-node: tc tbf rate '$rate' failed"
        nsenter --net="/run/netns/$NET_PREFIX-n$i" tc qdisc add dev eth0 root tbf rate "$rate" burst 16kb latency 400ms
      fi
      ;;
  esac
}

# --- daemons ---------------------------------------------------------------------------------------------------------
start_munged() {
  local lab=$1
  [[ -s "$lab/munge/munge.key" ]] || mungekey -c -k "$lab/munge/munge.key"
  chmod 600 "$lab/munge/munge.key"
  munged --force --key-file="$lab/munge/munge.key" --socket="$lab/munge/munge.socket" \
    --pid-file="$lab/run/munged.pid" --log-file="$lab/log/munged.log" --seed-file="$lab/munge/munged.seed" ||
    die "munged failed to start: see $lab/log/munged.log"
}

start_slurmd() {
  local lab=$1 node=$2
  mkdir -p "$lab/spool/$node" "$lab/tmp/$node"
  # In a --netns lab slurmd (and so every step and task) enters the node's network namespace only: nsenter, not
  # `ip netns exec`, which would also remount /sys and hide the cgroup file system slurmd needs.
  local enter=()
  if net_load "$lab"; then enter=(nsenter "--net=/run/netns/$NET_PREFIX-$node"); fi
  SLURM_CONF="$lab/etc/slurm.conf" "${enter[@]}" slurmd -f "$lab/etc/slurm.conf" -N "$node" ||
    die "slurmd -N $node failed to start: see $lab/log/slurmd-$node.log"
}

node_states() { SLURM_CONF="$1/etc/slurm.conf" sinfo -h -N -o '%N %T' 2>/dev/null | sort -u; }

wait_idle() {
  local lab=$1 limit=$2 deadline states
  deadline=$((SECONDS + limit))
  while ((SECONDS < deadline)); do
    states=$(node_states "$lab")
    if [[ -n "$states" ]] && ! grep -qv ' idle$' <<<"$states"; then
      return 0
    fi
    sleep 0.2
  done
  echo "slurm-lab: nodes not idle after ${limit}s:" >&2
  node_states "$lab" >&2 || true
  return 1
}

cmd_up() {
  local lab=$1
  shift
  local nodes=4 plugin="" plugin_args="" timeout=10 owner="" switches=halves netns=0 isl_rate=""
  while (($#)); do
    case "$1" in
      --nodes) nodes=$2; shift 2 ;;
      --plugin) plugin=$2; shift 2 ;;
      --plugin-args) plugin_args=$2; shift 2 ;;
      --slurmd-timeout) timeout=$2; shift 2 ;;
      --owner-pid) owner=$2; shift 2 ;;
      --switches) switches=$2; shift 2 ;;
      --netns) netns=1; shift ;;
      --isl-rate) isl_rate=$2; shift 2 ;;
      *) die "up: unknown argument '$1' (see: slurm-lab.sh --help)" ;;
    esac
  done
  [[ "$nodes" =~ ^[1-9][0-9]*$ ]] || die "--nodes must be a positive integer, not '$nodes'"
  [[ "$switches" == halves || "$switches" == interleaved ]] || die "--switches must be halves or interleaved"
  [[ $(id -u) -eq 0 ]] || die "the lab runs Slurm's daemons as root: run as root"
  [[ -d /sys/fs/cgroup ]] || die "slurmd needs a cgroup file system mounted at /sys/fs/cgroup"
  [[ -z "$plugin" || -r "$plugin" ]] || die "--plugin: '$plugin' is not a readable file"
  [[ -z "$isl_rate" || "$netns" == 1 ]] || die "--isl-rate shapes the --netns lab's inter-switch link: add --netns"
  [[ -z "$isl_rate" || "$isl_rate" =~ ^[1-9][0-9]*(bit|kbit|mbit|gbit)$ ]] ||
    die "--isl-rate: '$isl_rate' is not a rate such as 100mbit"
  mkdir -p "$lab"
  lab=$(readlink -f "$lab")
  [[ ! -s "$lab/run/slurmctld.pid" ]] || ! alive "$(pid_of "$lab/run/slurmctld.pid")" ||
    die "a lab is already running in $lab (slurm-lab.sh down $lab first)"
  mkdir -p "$lab"/{etc,munge,run,log,state,spool,tmp}
  chmod 755 "$lab" "$lab/munge"
  : >"$lab/etc/plugstack.conf"
  if [[ -n "$plugin" ]]; then
    echo "required $(readlink -f "$plugin") $plugin_args" >"$lab/etc/plugstack.conf"
  fi
  if [[ -n "$owner" ]]; then
    # The watchdog runs in its own session so that signals sent to the caller's process group do not reach it.
    setsid bash -c 'while kill -0 "$1" 2>/dev/null && [[ -d "$3" ]]; do sleep 1; done; exec "$2" down "$3"' \
      watchdog "$owner" "$self" "$lab" </dev/null >>"$lab/log/watchdog.log" 2>&1 &
    echo $! >"$lab/run/watchdog.pid"
  fi
  start_munged "$lab"
  if ((netns)); then net_up "$lab" "$nodes" "$switches" "$isl_rate"; fi
  local attempt ctl_port node_ports node
  for attempt in 1 2 3; do
    ctl_port=$(pick_port)
    node_ports=()
    for _ in $(seq "$nodes"); do node_ports+=("$(pick_port)"); done
    write_configs "$lab" "$nodes" "$timeout" "$switches" "$ctl_port" "${node_ports[@]}"
    rm -rf "$lab/state"/* "$lab/spool"/*
    # -i: ignore saved state (a fresh cluster every time; a DRAIN from an earlier failed start must not survive).
    SLURM_CONF="$lab/etc/slurm.conf" slurmctld -i -f "$lab/etc/slurm.conf" ||
      die "slurmctld failed to start: see $lab/log/slurmctld.log"
    for node in $(node_names "$nodes"); do start_slurmd "$lab" "$node"; done
    if wait_idle "$lab" 30; then
      echo "SLURM_CONF=$lab/etc/slurm.conf" >"$lab/lab.env"
      echo "slurm-lab: $nodes nodes idle in $lab (controller port $ctl_port); eval \"\$($self env $lab)\"" >&2
      return 0
    fi
    echo "slurm-lab: bring-up attempt $attempt failed (a port may have been taken meanwhile); retrying" >&2
    stop_slurm_daemons "$lab"
  done
  die "the cluster did not come up: see the logs in $lab/log"
}

stop_slurm_daemons() {
  local lab=$1 pids=() f p
  for f in "$lab"/run/slurmd-*.pid "$lab/run/slurmctld.pid"; do
    [[ -e "$f" ]] || continue
    p=$(pid_of "$f")
    alive "$p" && kill -TERM "$p" 2>/dev/null && pids+=("$p")
  done
  if ((${#pids[@]})) && ! wait_gone 15 "${pids[@]}"; then
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    wait_gone 5 "${pids[@]}" || true
  fi
  rm -f "$lab"/run/slurmd-*.pid "$lab/run/slurmctld.pid"
}

cmd_down() {
  local lab
  lab=$(readlink -f "$1")
  [[ -d "$lab/run" ]] || return 0
  local conf="$lab/etc/slurm.conf" ctl p node_dir stepds=()
  ctl=$(pid_of "$lab/run/slurmctld.pid")
  # Jobs first: slurmstepd processes and their tasks outlive slurmd.
  if alive "$ctl"; then
    SLURM_CONF="$conf" timeout 10 scancel --full --quiet --user=root 2>/dev/null || true
  fi
  for node_dir in "$lab"/spool/*; do
    [[ -d "$node_dir" ]] || continue
    for p in $(stepd_pids "$node_dir"); do
      stepds+=("$p")
    done
  done
  if ((${#stepds[@]})) && ! wait_gone 8 "${stepds[@]}"; then
    for p in "${stepds[@]}"; do kill_tree KILL "$p"; done
    wait_gone 5 "${stepds[@]}" || true
  fi
  local clients
  clients=$(lab_clients "$lab")
  for p in $clients; do kill -KILL "$p" 2>/dev/null || true; done
  stop_slurm_daemons "$lab"
  p=$(pid_of "$lab/run/munged.pid")
  if alive "$p"; then
    kill -TERM "$p" 2>/dev/null || true
    wait_gone 5 "$p" || kill -KILL "$p" 2>/dev/null || true
  fi
  rm -f "$lab/run/munged.pid"
  net_down "$lab"
  p=$(pid_of "$lab/run/watchdog.pid")
  # The watchdog itself calls `down`: it must not kill itself half-way.
  if alive "$p" && [[ "$p" != "$PPID" && "$p" != "$$" ]]; then
    kill -TERM "$p" 2>/dev/null || true
  fi
  rm -f "$lab/run/watchdog.pid" "$lab/lab.env"
}

cmd_kill_node() {
  local lab node p pids=()
  lab=$(readlink -f "$1")
  node=$2
  [[ -d "$lab/spool/$node" ]] || die "kill-node: no node '$node' in $lab"
  for p in $(stepd_pids "$lab/spool/$node"); do
    kill_tree KILL "$p"
    pids+=("$p")
  done
  p=$(pid_of "$lab/run/slurmd-$node.pid")
  if alive "$p"; then
    kill -KILL "$p"
    pids+=("$p")
  fi
  if net_load "$lab"; then # a host of its own: everything in its namespace dies with it
    for p in $(net_pids "$(net_node_index "$node")"); do
      kill -KILL "$p" 2>/dev/null || true
      pids+=("$p")
    done
  fi
  ((${#pids[@]} == 0)) || wait_gone 5 "${pids[@]}" || die "kill-node: processes of $node survived SIGKILL"
  rm -f "$lab/run/slurmd-$node.pid"
}

cmd_start_node() {
  local lab
  lab=$(readlink -f "$1")
  grep -q "^NodeName=$2 " "$lab/etc/slurm.conf" || die "start-node: no node '$2' in $lab/etc/slurm.conf"
  start_slurmd "$lab" "$2"
}

cmd_ports() {
  local conf
  conf="$(readlink -f "$1")/etc/slurm.conf"
  sed -n -e 's/^SlurmctldPort=/slurmctld /p' -e 's/^NodeName=\([^ ]*\) .*Port=\([0-9]*\).*/\1 \2/p' "$conf"
}

(($# >= 1)) || usage
command=$1
shift
case "$command" in
  -h | --help | help) usage ;;
esac
(($# >= 1)) || die "$command: the lab folder is missing (see: slurm-lab.sh --help)"
case "$command" in
  up) cmd_up "$@" ;;
  down) cmd_down "$1" ;;
  env) echo "export SLURM_CONF=$(readlink -f "$1")/etc/slurm.conf" ;;
  plugstack)
    lab=$1
    shift
    printf '%s\n' "$@" >"$lab/etc/plugstack.conf"
    ;;
  kill-node) (($# == 2)) || die "kill-node DIR NODE"; cmd_kill_node "$1" "$2" ;;
  start-node) (($# == 2)) || die "start-node DIR NODE"; cmd_start_node "$1" "$2" ;;
  wait-idle) wait_idle "$(readlink -f "$1")" "${2:-30}" ;;
  ports) cmd_ports "$1" ;;
  partition-node | heal-node | freeze-node | thaw-node)
    (($# == 2)) || die "$command DIR NODE"
    cmd_net_fault "$command" "$1" "$2"
    ;;
  throttle-node) (($# == 3)) || die "throttle-node DIR NODE RATE|off"; cmd_net_fault throttle-node "$1" "$2" "$3" ;;
  exec)
    (($# >= 3)) || die "exec DIR NODE COMMAND..."
    lab=$(readlink -f "$1")
    net_load "$lab" || die "exec: $lab is not a --netns lab"
    i=$(net_node_index "$2")
    shift 2
    exec nsenter --net="/run/netns/$NET_PREFIX-n$i" "$@"
    ;;
  *) die "unknown command '$command' (see: slurm-lab.sh --help)" ;;
esac

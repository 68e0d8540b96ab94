#!/usr/bin/env bash
# A shared directory on a file server across a slow link, for checkpoint benchmarks on one machine.
#
#   bench/checkpoint/slow_shared_dir.sh --rate RATE -- COMMAND [ARG...]
#
# The file server is a host of its own (a network namespace) that serves a directory over SFTP (OpenSSH's sshd);
# this host mounts it with sshfs (FUSE) across a veth pair whose two ends are shaped with tc tbf to RATE (tc's units:
# 100mbit, 1gbit). No delay is added (tbf cannot, and netem is not available everywhere): the round trip is the
# machine's own plus sshfs's. COMMAND runs with every `{}` in its arguments replaced by the mount point, as find -exec does; the
# mount, the server and the namespace are removed when it ends, fails or is interrupted. Needs root, iproute2, tc,
# sshfs and openssh-server (installed with apt-get when missing).
#
# Why this and not a throttled local directory: what a remote file system costs a checkpoint is a network round trip
# per metadata operation (create, rename, fsync, directory listing) and the link's bandwidth for the data, and a
# restart from it reads the data back across the same link. An SFTP mount has both; it is not a parallel file system
# (one server, no striping), so its figures show the shape of a slow shared tier, not a particular site's numbers.
set -euo pipefail

die() {
  echo "slow_shared_dir.sh: $*" >&2
  exit 2
}

rate=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rate) rate="${2:-}"; shift 2 ;;
    --) shift; break ;;
    -h | --help) sed -n '2,16p' "$0"; exit 0 ;;
    *) die "unknown option '$1' (usage: --rate RATE -- COMMAND [ARG...])" ;;
  esac
done
[[ -n "$rate" ]] || die "--rate is required (a tc rate such as 100mbit)"
[[ "$rate" =~ ^[0-9]+(bit|kbit|mbit|gbit)$ ]] || die "--rate '$rate' is not a tc rate such as 100mbit or 1gbit"
[[ $# -gt 0 ]] || die "no command given after --"
[[ $EUID -eq 0 ]] || die "needs root (network namespaces, tc, mount)"

missing=()
command -v sshfs >/dev/null || missing+=(sshfs)
[[ -x /usr/sbin/sshd ]] || missing+=(openssh-server)
command -v ssh-keygen >/dev/null || missing+=(openssh-client)
command -v tc >/dev/null || missing+=(iproute2)
if [[ ${#missing[@]} -gt 0 ]]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null ||
    die "could not install ${missing[*]} with apt-get"
fi

# Names and a subnet of this invocation's own, so that two benchmarks (or a test's network lab) never share them.
tag="ssd$(printf '%05d' $(($$ % 100000)))"
ns="$tag-fs"
here="${tag}a"
there="${tag}b"
octet=$((200 + $$ % 50))
third=$(($$ / 50 % 250))
client_ip="10.$octet.$third.1"
server_ip="10.$octet.$third.2"
ip -4 -o addr show | grep -q " 10\.$octet\.$third\." && die "subnet 10.$octet.$third.0/24 is in use here; run again"

work="$(mktemp -d /tmp/tenax-slow-shared-XXXXXX)"
export_dir="$work/export"
mount_point="$work/mnt"
mkdir -p "$export_dir" "$mount_point" "$work/sshd"

cleanup() {
  set +e
  if mountpoint -q "$mount_point"; then fusermount -u "$mount_point" 2>/dev/null || umount -l "$mount_point"; fi
  # sshfs and its ssh child outlive an unmount that came from outside them: both name this invocation's key.
  pkill -f -- "$work/sshd/client_key" 2>/dev/null
  # A mount still busy above was only detached lazily: gone once its daemon is.
  mountpoint -q "$mount_point" && umount -l "$mount_point"
  [[ -s "$work/sshd/pid" ]] && kill "$(cat "$work/sshd/pid")" 2>/dev/null
  ip link del "$here" 2>/dev/null
  ip netns del "$ns" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ip netns add "$ns"
ip link add "$here" type veth peer name "$there" netns "$ns"
ip addr add "$client_ip/24" dev "$here"
ip link set "$here" up
ip -n "$ns" addr add "$server_ip/24" dev "$there"
ip -n "$ns" link set "$there" up
ip -n "$ns" link set lo up
# Both directions: writes leave through $here, reads come back through $there.
tc qdisc add dev "$here" root tbf rate "$rate" burst 256kb latency 50ms
ip netns exec "$ns" tc qdisc add dev "$there" root tbf rate "$rate" burst 256kb latency 50ms

ssh-keygen -q -t ed25519 -N '' -f "$work/sshd/client_key" >/dev/null
ssh-keygen -q -t ed25519 -N '' -f "$work/sshd/host_key" >/dev/null
cat >"$work/sshd/sshd_config" <<EOF
ListenAddress $server_ip
Port 22
HostKey $work/sshd/host_key
AuthorizedKeysFile $work/sshd/client_key.pub
PermitRootLogin prohibit-password
PasswordAuthentication no
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
PidFile $work/sshd/pid
EOF
mkdir -p /run/sshd
ip netns exec "$ns" /usr/sbin/sshd -f "$work/sshd/sshd_config" -E "$work/sshd/log"
# AES-GCM: the cipher with the least CPU per byte where AES-NI exists, so that the link, not encryption on the
# machine's own cores, is what limits the mount.
sshfs "root@$server_ip:$export_dir" "$mount_point" \
  -o "IdentityFile=$work/sshd/client_key,StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,LogLevel=ERROR" \
  -o "Ciphers=aes128-gcm@openssh.com,ConnectTimeout=10" ||
  die "sshfs could not mount the server's directory (sshd log: $(tail -3 "$work/sshd/log" 2>/dev/null))"

echo "# shared directory $mount_point: sshfs to a file server in network namespace $ns, link $rate each way" >&2
args=()
for a in "$@"; do args+=("${a//\{\}/$mount_point}"); done
set +e
"${args[@]}"
status=$?
exit "$status"

#!/bin/bash
# tenax-bench-layout-traffic's model side, without Slurm: 4 ranks under mpirun, each told it runs on node n<rank+1>
# (SLURMD_NODENAME, as slurmd sets it), on two switches with interleaved names. The bytes the bench reports crossing
# the switches must be the cost model's for that map, worked out here by hand, and bad options must be refused.
#   layout_traffic_check.sh BENCH MPIEXEC
set -euo pipefail
bench=$1 mpiexec=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf 'SwitchName=s1 Nodes=n1,n3\nSwitchName=s2 Nodes=n2,n4\nSwitchName=root Switches=s1,s2\n' >"$dir/topology.conf"
cat >"$dir/as-node.sh" <<'SCRIPT'
#!/bin/bash
export SLURMD_NODENAME=n$((OMPI_COMM_WORLD_RANK + 1))
exec "$@"
SCRIPT
chmod +x "$dir/as-node.sh"

fail() { echo "FAIL: $*" >&2; exit 1; }
expect_field() { # output key value
  grep -q " $2=$3\( \|$\)" <<<"$1" || fail "expected $2=$3 in: $1"
}

# tp=1,pp=2,dp=2 in rank order on n1..n4: the DP pairs (n1,n2) and (n3,n4) cross between the switches, each a ring of
# two edges of 4 MiB (2(g-1)/g x S with g = 2), 16 MiB in all; the PP pairs (n1,n3), (n2,n4) stay inside.
out=$(TENAX_LAYOUT=tp=1,pp=2,dp=2 "$mpiexec" -n 4 "$dir/as-node.sh" "$bench" --topology "$dir/topology.conf" \
  --tp-bytes 0 --pp-bytes 1048576 --dp-bytes 4194304 --steps 2 --warmup 0 --link-rate 100e6 | grep '^layout-traffic:')
echo "$out"
expect_field "$out" ranks n1,n2,n3,n4
expect_field "$out" layout tp=1,pp=2,dp=2
expect_field "$out" cross_dp 16777216
expect_field "$out" cross_pp 0
expect_field "$out" cross_switch_bytes 16777216
expect_field "$out" inter_node_bytes 18874368 # + the PP pairs between nodes: 2 x 1 MiB
expect_field "$out" model_cross_switch_s 0.6711 # 16 MiB x 8 bits / 2 directions / 100e6 bits/s

# tp=1,pp=1,dp=4: one ring n1-n2-n3-n4-n1, every edge across: 4 edges x 1.5 x 4 MiB.
out=$(TENAX_LAYOUT=tp=1,pp=1,dp=4 "$mpiexec" -n 4 "$dir/as-node.sh" "$bench" --topology "$dir/topology.conf" \
  --dp-bytes 4194304 --steps 1 --warmup 0 | grep '^layout-traffic:')
echo "$out"
expect_field "$out" cross_switch_bytes 25165824
grep -q model_cross_switch_s <<<"$out" && fail "no --link-rate, yet a time was printed: $out"

# Bad options: a usage error (exit 64) naming the fix, before any traffic.
set +e
err=$("$bench" --dp-bytes 4096 2>&1)
code=$?
set -e
((code == 64)) || fail "no --topology: exit $code, expected 64: $err"
grep -q -- "--topology FILE is required" <<<"$err" || fail "no --topology: $err"
set +e
err=$("$bench" --topology "$dir/topology.conf" --dp-bytes -1 2>&1)
code=$?
set -e
((code == 64)) || fail "negative size: exit $code, expected 64: $err"
echo "PASS"

#!/usr/bin/env bash
# link-cut.sh - a peer node vanishes while its hub stays up, over verbs: two
# Soft-RoCE guests of tests/vm/run.sh, and the wire between them is cut.
#
#   tests/vm/run.sh --nodes 2 --node2 'bash tests/vm/link-cut.sh' \
#       -- bash tests/vm/link-cut.sh
#
# Node 2 (10.77.0.2) runs a hub and a pre-forked echo server; node 1
# (10.77.0.1) runs a hub, holds idle connections to node 2 (nothing in
# flight: only the link's keepalive can notice) and keeps a same-node
# echo busy.  First node 2 drops everything it sends for 3 s (netem) while
# node 1's echo clients stream to it; then node 2 takes its network
# interface down, its hub and server still running.  Node 1's checks, one
# "ok"/"not ok" line each:
#   - the 3 s outage costs no connection: the queue pair's retries (7, each
#     after a seventh of the 10 s link timeout) carry the streams through,
#     every byte verified, the link never dropped
#   - after the interface went down its hub drops the verbs link and resets
#     every connection on it within the documented time (rshare(7): the
#     link timeout, 10 s; the check allows 60 s, guest timers run slow)
#   - new connections take a new verbs link once the wire is back
#   - the same-node connections go on, every byte verified
# The nodes take turns through files in $RSHARE_VM_DIR.  Ends with
# "N passed, N failed"; exits nonzero when a check failed.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=${RSHARE_BUILD:-$ROOT/build}
node=${RSHARE_VM_NODE:?link-cut.sh runs inside a guest of tests/vm/run.sh --nodes 2}
dir=${RSHARE_VM_DIR:-/run/rshare-vm}
T=$(mktemp -d)
pass=0 fail=0
pids=()
trap 'for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$T"' EXIT

ok() { echo "ok - $*"; pass=$((pass + 1)); }
nok() { echo "not ok - $*"; fail=$((fail + 1)); }
wait_file() { # FILE SECS
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		[[ -e $1 ]] && return 0
		sleep 0.1
	done
	return 1
}
stat_json() { timeout 10 "$B/rshare" stat --json; }
# what the network and the RDMA device say, after a failure
net_state() {
	echo "# node $node: ip neigh: $(ip neigh | tr '\n' ';')"
	echo "# node $node: rdma link: $(rdma link 2>&1 | tr '\n' ';')"
	echo "# node $node: gids: $(cat /sys/class/infiniband/*/ports/1/gids/* 2>/dev/null | grep -v '^0000:0000:0000:0000:0000:0000:0000:0000$' | tr '\n' ' ')"
	echo "# node $node: addresses: $(ip -br addr | tr '\n' ';')"
	echo "# node $node: udp: $(grep '^Udp:' /proc/net/snmp | tail -1)"
	echo "# node $node: cm ids: $(rdma resource show cm_id 2>&1 | tr '\n' ';')"
	echo "# node $node: qps: $(rdma resource show qp 2>&1 | tr '\n' ';')"
	echo "# node $node: gid types: $(cd /sys/class/infiniband/rxe0/ports/1/gid_attrs 2>/dev/null && grep -H . types/0 types/1 ndevs/0 ndevs/1 2>&1 | tr '\n' ' ')"
	dmesg | tail -n 25 | sed "s/^/# node $node: dmesg: /"
	echo "# node $node: counters: $(cd /sys/class/infiniband/rxe0/ports/1/hw_counters 2>/dev/null && grep -H . * | grep -v ':0$' | tr '\n' ' ')"
}

RSHARE_LOG=${RSHARE_LINKCUT_LOG:-info} "$B/rshared" --transport verbs >"$T/hub.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
	stat_json >/dev/null 2>&1 && break
	sleep 0.1
done

if [[ $node == 2 ]]; then
	"$B/rshare" run -- "$B/tests/echo-server" -w 2 7301 >"$T/server.out" 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do grep -q '^ready$' "$T/server.out" && break; sleep 0.1; done
	touch "$dir/server-ready"
	# a short outage: what this node sends is lost for 3 s, the link stays
	if wait_file "$dir/blip" 300; then
		if tc qdisc add dev eth0 root netem loss 100% 2>"$T/tc.err"; then
			sleep 3
			tc qdisc del dev eth0 root
			touch "$dir/blip-done"
		else
			cp "$T/tc.err" "$dir/blip-failed"
		fi
	fi
	wait_file "$dir/cut" 300 || exit 1
	ip link set eth0 down
	touch "$dir/cut-done"
	wait_file "$dir/restore" 300 && { ip link set eth0 up; touch "$dir/restore-done"; }
	for _ in $(seq 3000); do
		[[ -e $dir/finished || -e $dir/diag ]] && break
		sleep 0.1
	done
	# its story, when node 1 saw a failure
	[[ -e $dir/diag ]] && { tail -n 25 "$T/hub.log"; net_state; touch "$dir/diag-done"; }
	wait_file "$dir/finished" 300
	exit 0
fi

# ---- node 1: the checks ----
fin() {
	((fail == 0)) || touch "$dir/failed"
	touch "$dir/finished"
	echo "$pass passed, $fail failed"
	((fail == 0))
	exit
}
if ! wait_file "$dir/server-ready" 120; then
	nok "node 2's echo server never became ready"
	fin
fi
# a 3 s outage in the middle of transfers to node 2: no connection lost
"$B/rshare" run -- "$B/tests/echo-client" -S -c 4 -s 7 -t 12 -m 65536 10.77.0.2 7301 >"$T/blip.out" 2>&1 &
blip_pid=$!
pids+=("$blip_pid")
sleep 3
touch "$dir/blip"
for _ in $(seq 600); do [[ -e $dir/blip-done || -e $dir/blip-failed ]] && break; sleep 0.1; done
wait "$blip_pid"
stat_json >"$T/blip.json"
dropped0=$(jq .counters.links_dropped "$T/blip.json")
if [[ -e $dir/blip-failed ]]; then
	nok "node 2 could not drop its packets: $(cat "$dir/blip-failed")"
elif grep -q 'conns=4 verified=4 resets=0 errors=0' "$T/blip.out" && [[ $dropped0 == 0 &&
	$(jq '[.links[] | select(.transport == "verbs" and .state == "up" and .connections_total >= 4)] | length' "$T/blip.json") == 1 ]]; then
	ok "a 3 s outage during transfers to node 2 lost no connection and no byte, the verbs link kept: $(grep '^echo-client:' "$T/blip.out")"
else
	nok "the 3 s outage: links_dropped $dropped0: $(tr '\n' ' ' <"$T/blip.out")"
	grep -v 'pool\|process' "$T/hub.log" | tail -n 8
fi

# a busy same-node echo, which must not notice the cut
"$B/rshare" run -- "$B/tests/echo-server" -w 1 7302 >"$T/local-server.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q '^ready$' "$T/local-server.out" && break; sleep 0.1; done
"$B/rshare" run -- "$B/tests/echo-client" -S -c 2 -t 25 -m 65536 127.0.0.1 7302 >"$T/local.out" 2>&1 &
local_pid=$!
# idle connections to node 2: verified once, then held with nothing in flight
"$B/rshare" run -- "$B/tests/echo-client" -c 4 -n 2 -m 4096 -w "$T/release" 10.77.0.2 7301 \
	>"$T/idle.out" 2>&1 &
idle_pid=$!
pids+=("$idle_pid")
for _ in $(seq 300); do grep -q '^done$' "$T/idle.out" && break; sleep 0.1; done
if ! grep -q 'verified=4 resets=0 errors=0' "$T/idle.out"; then
	nok "idle connections to node 2 were not set up: $(tr '\n' ' ' <"$T/idle.out")"
	grep -v 'pool\|process' "$T/hub.log" | tail -n 8
	touch "$dir/diag"
	wait_file "$dir/diag-done" 30
	fin
fi
stat_json >"$T/before.json"
n=$(jq '[.links[] | select(.transport == "verbs" and .state == "up")] | length' "$T/before.json")
c=$(jq '[.sockets[] | select(.state == "established" and .same_node != true and .link != 0)] | length' "$T/before.json")
if [[ $n == 1 && $c == 4 ]]; then
	ok "4 idle connections to node 2 on one verbs link"
else
	nok "before the cut: $n verbs links up, $c connections on links (want 1 and 4)"
fi
sleep 3 # idle for longer than a keepalive period

touch "$dir/cut"
wait_file "$dir/cut-done" 60 || nok "node 2 did not cut its link"
t0=$SECONDS
dropped=0
while ((SECONDS - t0 < 60)); do
	stat_json >"$T/after.json" 2>/dev/null || { sleep 0.5; continue; }
	live=$(jq '[.sockets[] | select(.state == "established" and .same_node != true and .link != 0)] | length' "$T/after.json")
	up=$(jq '[.links[] | select(.transport == "verbs" and .state == "up")] | length' "$T/after.json")
	if [[ $live == 0 && $up == 0 ]]; then
		dropped=1
		break
	fi
	sleep 0.5
done
secs=$((SECONDS - t0))
if ((dropped)); then
	ok "the cut verbs link was dropped and its 4 idle connections reset within ${secs} s (allowed 60 s)"
else
	nok "60 s after the cut: $live connections still established, $up verbs links up"
	tail -n 20 "$T/hub.log"
	touch "$T/release"
	fin
fi
closed=$(jq '[.sockets[] | select(.state == "closed")] | length' "$T/after.json" 2>/dev/null)
echo "# after ${secs} s: links_dropped $(jq .counters.links_dropped "$T/after.json" 2>/dev/null), sockets closed ${closed:-?}"
touch "$T/release"

# the wire back: new connections get a verbs link again
touch "$dir/restore"
wait_file "$dir/restore-done" 60 || nok "node 2 did not bring its link up again"
fb0=$(jq .counters.fallback_connects "$T/after.json" 2>/dev/null)
t0=$SECONDS
back=0
while ((SECONDS - t0 < 60)); do
	timeout 60 "$B/rshare" run -- "$B/tests/echo-client" -c 4 -n 2 -m 65536 10.77.0.2 7301 >"$T/back.out" 2>&1
	stat_json >"$T/back.json" 2>/dev/null
	up=$(jq '[.links[] | select(.transport == "verbs" and .state == "up")] | length' "$T/back.json" 2>/dev/null)
	fb=$(jq .counters.fallback_connects "$T/back.json" 2>/dev/null)
	if grep -q 'verified=4 resets=0 errors=0' "$T/back.out" && [[ $up == 1 && $fb == "$fb0" ]]; then
		back=1
		break
	fi
	sleep 1
done
if ((back)); then
	ok "after the wire came back, new connections to node 2 took a new verbs link within $((SECONDS - t0)) s, none fell back: $(tr '\n' ' ' <"$T/back.out")"
else
	nok "60 s after the wire came back: verbs links up ${up:-?}, fallback_connects ${fb0:-?} -> ${fb:-?}: $(tr '\n' ' ' <"$T/back.out")"
	grep -v 'pool\|process' "$T/hub.log" | tail -n 8
	net_state
	touch "$dir/diag"
	wait_file "$dir/diag-done" 30
fi

# the same-node echo went on
wait "$local_pid"
rc=$?
if [[ $rc == 0 ]] && grep -q 'resets=0 errors=0' "$T/local.out"; then
	ok "same-node connections went on through the cut: $(tr '\n' ' ' <"$T/local.out")"
else
	nok "same-node echo (exit $rc): $(tr '\n' ' ' <"$T/local.out")"
fi

fin

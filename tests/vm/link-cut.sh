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
#   - after the interface went down its hub loses the verbs link within the
#     documented time (rshare(7): the link timeout, 10 s; the check allows
#     60 s, guest timers run slow), and its connections, 4 idle and 4
#     streaming, wait: none is reset
#   - once the wire is back, they go on over a new link (RESUME), the
#     stream with every byte verified: verbs, or soft where verbs stayed
#     away for 30 s with the peer answering on IP (rshare(7): a guest's
#     RoCE can take that long after its port came back; the line says
#     which)
#   - new connections take a verbs link, none falls back (a soft link
#     made above has verbs tried beside it, and new connections take that)
#   - node 2 drops RoCE (UDP 4791) and keeps IP: the verbs link is lost
#     and does not come back, and with transport auto (both hubs) its
#     connections go on over a soft link, the stream with every byte
#   - RoCE back: new connections take a verbs link again (tried beside
#     the soft link), every byte verified
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
# wait_for PID SECS: its exit status; when it outlived SECS, 124, what the
# hub says of its sockets printed, and it is killed (a hung client is a
# failure of its own check, not the end of the run)
wait_for() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		kill -0 "$1" 2>/dev/null || { wait "$1"; return; }
		sleep 0.1
	done
	echo "# pid $1 still running after $2 s; the hub's sockets on links:"
	stat_json 2>/dev/null | jq -c '.sockets[] | select(.link != null)' 2>/dev/null | head -n 20 | sed 's/^/#   /'
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	return 124
}
# stat_until SECS FILE JQ: the hub's stat in FILE, every 0.3 s, until JQ
# (a jq condition on it) holds; 1 when SECS passed first
stat_until() {
	local t=$((SECONDS + $1))
	while ((SECONDS < t)); do
		stat_json >"$2" 2>/dev/null && jq -e "$3" "$2" >/dev/null 2>&1 && return 0
		sleep 0.3
	done
	return 1
}
verbs_up='[.links[] | select(.transport == "verbs" and .state == "up")] | length'
links_up='[.links[] | select(.state == "up")] | length'

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

RSHARE_LOG=${RSHARE_LINKCUT_LOG:-info} "$B/rshared" --transport auto >"$T/hub.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
	stat_json >/dev/null 2>&1 && break
	sleep 0.1
done

if [[ $node == 2 ]]; then
	# await FILE...: until one of them exists (at most 300 s), telling
	# node 1 this node's story whenever it asks (diag)
	await() {
		local f
		for _ in $(seq 3000); do
			for f; do [[ -e $dir/$f ]] && return 0; done
			if [[ -e $dir/diag && ! -e $dir/diag-done ]]; then
				grep -E 'warn|lost|go on|reset|not established|socket [0-9]+:' "$T/hub.log" | tail -n 30 |
					sed 's/^/# node 2: /'
				net_state
				touch "$dir/diag-done"
			fi
			sleep 0.1
		done
		return 1
	}
	"$B/rshare" run -- "$B/tests/echo-server" -w 2 7301 >"$T/server.out" 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do grep -q '^ready$' "$T/server.out" && break; sleep 0.1; done
	touch "$dir/server-ready"
	# a short outage: what this node sends is lost for 3 s, the link stays
	if await blip finished && [[ -e $dir/blip ]]; then
		if tc qdisc add dev eth0 root netem loss 100% 2>"$T/tc.err"; then
			sleep 3
			tc qdisc del dev eth0 root
			touch "$dir/blip-done"
		else
			cp "$T/tc.err" "$dir/blip-failed"
		fi
	fi
	if await cut finished && [[ -e $dir/cut ]]; then
		ip link set eth0 down
		touch "$dir/cut-done"
		await restore && { ip link set eth0 up; touch "$dir/restore-done"; }
	fi
	# RoCE (UDP 4791) dropped, IP kept: verbs cannot come back, soft can
	if await roce-block finished && [[ -e $dir/roce-block ]]; then
		if tc qdisc add dev eth0 root handle 1: prio 2>"$T/tc.err" &&
			tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip protocol 17 0xff \
				match ip dport 4791 0xffff action drop 2>>"$T/tc.err"; then
			touch "$dir/roce-blocked"
		else
			cp "$T/tc.err" "$dir/roce-block-failed"
		fi
		await roce-unblock && { tc qdisc del dev eth0 root 2>/dev/null; touch "$dir/roce-unblocked"; }
	fi
	await finished
	exit 0
fi

# ---- node 1: the checks ----
fin() {
	((fail == 0)) || touch "$dir/failed"
	touch "$dir/finished"
	wait_file "$dir/node2.status" 10 # node 2 ends too (run.sh writes its status)
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
wait_for "$blip_pid" 120
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
"$B/rshare" run -- "$B/tests/echo-client" -S -c 2 -t 70 -m 65536 127.0.0.1 7302 >"$T/local.out" 2>&1 &
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
# a stream to node 2 that the long cut below interrupts
"$B/rshare" run -- "$B/tests/echo-client" -S -c 4 -s 9 -t 45 -m 65536 10.77.0.2 7301 >"$T/cut.out" 2>&1 &
cut_pid=$!
pids+=("$cut_pid")
sleep 3 # idle for longer than a keepalive period

touch "$dir/cut"
wait_file "$dir/cut-done" 60 || nok "node 2 did not cut its link"
t0=$SECONDS
lost=0
stat_until 60 "$T/after.json" ".counters.conns_waiting >= 8 and ($verbs_up) == 0" && lost=1
secs=$((SECONDS - t0))
waiting=$(jq .counters.conns_waiting "$T/after.json" 2>/dev/null)
up=$(jq "$verbs_up" "$T/after.json" 2>/dev/null)
closed=$(jq '[.sockets[] | select(.state == "closed")] | length' "$T/after.json" 2>/dev/null)
if ((lost)) && [[ $closed == 0 ]]; then
	ok "the cut verbs link was lost after ${secs} s (allowed 60 s); its 8 connections wait, none reset"
else
	nok "60 s after the cut: ${waiting:-?} connections waiting, $up verbs links up, ${closed:-?} closed (want 8, 0, 0)"
	tail -n 20 "$T/hub.log"
fi
echo "# after ${secs} s: links_lost $(jq .counters.links_lost "$T/after.json" 2>/dev/null), waiting ${waiting:-?}"
sleep 3 # the outage goes on past the link's loss

# the wire back: the connections go on over a new verbs link
touch "$dir/restore"
wait_file "$dir/restore-done" 60 || nok "node 2 did not bring its link up again"
t0=$SECONDS
resumed=0
stat_until 60 "$T/resumed.json" ".counters.conns_resumed >= 8 and ($links_up) >= 1" && resumed=1
n=$(jq .counters.conns_resumed "$T/resumed.json" 2>/dev/null)
up=$(jq "$links_up" "$T/resumed.json" 2>/dev/null)
if ((resumed)); then
	ok "after the wire came back, the 8 connections went on over a new link within $((SECONDS - t0)) s: $(jq -c '[.links[] | select(.state == "up") | .transport]' "$T/resumed.json")"
else
	nok "60 s after the wire came back: ${n:-?} connections resumed, ${up:-?} links up (want 8 and 1 or more)"
	grep -v 'pool\|process' "$T/hub.log" | tail -n 12
	net_state
fi
wait_for "$cut_pid" 120
rc=$?
if [[ $rc == 0 ]] && grep -q 'conns=4 verified=4 resets=0 errors=0' "$T/cut.out"; then
	ok "the stream through the cut lost no byte and no connection: $(grep '^echo-client:' "$T/cut.out")"
else
	nok "the stream through the cut (exit $rc): $(tr '\n' ' ' <"$T/cut.out")"
	grep -E 'warn|lost|go on|socket [0-9]+:' "$T/hub.log" | tail -n 30
	touch "$dir/diag"
	wait_file "$dir/diag-done" 30
	rm -f "$dir/diag" "$dir/diag-done"
fi
touch "$T/release"
wait_for "$idle_pid" 60
rc=$?
if [[ $rc == 0 ]]; then
	ok "the idle connections were closed cleanly after the cut"
else
	nok "the idle connections (exit $rc): $(tr '\n' ' ' <"$T/idle.out")"
fi
stat_json >"$T/after.json"

# new connections take the verbs link too, none falls back
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
	ok "after the wire came back, new connections to node 2 took the new verbs link within $((SECONDS - t0)) s, none fell back: $(tr '\n' ' ' <"$T/back.out")"
else
	nok "60 s after the wire came back: verbs links up ${up:-?}, fallback_connects ${fb0:-?} -> ${fb:-?}: $(tr '\n' ' ' <"$T/back.out")"
	grep -v 'pool\|process' "$T/hub.log" | tail -n 8
	net_state
	touch "$dir/diag"
	wait_file "$dir/diag-done" 30
	rm -f "$dir/diag" "$dir/diag-done"
fi

# verbs that does not come back: node 2 drops RoCE and keeps IP; the link
# is lost, and with transport auto its connections go on over soft
# (it streams until 5 s after it went on over soft, 120 s at most)
"$B/rshare" run -- "$B/tests/echo-client" -S -c 2 -s 21 -t 120 -x "$T/roce.stop" -m 65536 10.77.0.2 7301 \
	>"$T/roce.out" 2>&1 &
roce_pid=$!
pids+=("$roce_pid")
sleep 3
stat_json >"$T/roce0.json"
r0=$(jq .counters.conns_resumed "$T/roce0.json")
touch "$dir/roce-block"
for _ in $(seq 600); do [[ -e $dir/roce-blocked || -e $dir/roce-block-failed ]] && break; sleep 0.1; done
if [[ -e $dir/roce-blocked ]]; then
	t0=$SECONDS
	soft=0
	stat_until 120 "$T/roce.json" "([.links[] | select(.transport == \"soft\" and .state == \"up\")] | length) >= 1 and
		.counters.conns_resumed >= $((r0 + 2))" && soft=1
	((soft)) && sleep 5
	touch "$T/roce.stop"
	n=$(jq .counters.conns_resumed "$T/roce.json" 2>/dev/null)
	up=$(jq '[.links[] | select(.transport == "soft" and .state == "up")] | length' "$T/roce.json" 2>/dev/null)
	if ((soft)); then
		ok "with RoCE dropped, the verbs link's 2 connections went on over a soft link within $((SECONDS - t0)) s"
	else
		nok "120 s after RoCE was dropped: ${up:-?} soft links up, $((${n:-0} - r0)) connections resumed (want 1 and 2)"
		grep -E 'warn|lost|go on|socket [0-9]+:' "$T/hub.log" | tail -n 20
		touch "$dir/diag"
		wait_file "$dir/diag-done" 30
		rm -f "$dir/diag" "$dir/diag-done"
	fi
	wait_for "$roce_pid" 150
	rc=$?
	if [[ $rc == 0 ]] && grep -q 'conns=2 verified=2 resets=0 errors=0' "$T/roce.out"; then
		ok "the stream moved from verbs to soft lost no byte and no connection: $(grep '^echo-client:' "$T/roce.out")"
	else
		nok "the stream moved to soft (exit $rc): $(tr '\n' ' ' <"$T/roce.out")"
	fi
	touch "$dir/roce-unblock"
	wait_file "$dir/roce-unblocked" 60
	# RoCE back: verbs is tried beside the soft link (first after 10 s,
	# then at doubling waits), and new connections take it
	t0=$SECONDS
	back=0
	while ((SECONDS - t0 < 120)); do
		timeout 60 "$B/rshare" run -- "$B/tests/echo-client" -c 2 -n 2 -m 65536 10.77.0.2 7301 >"$T/again.out" 2>&1
		stat_json >"$T/again.json" 2>/dev/null
		if grep -q 'verified=2 resets=0 errors=0' "$T/again.out" &&
			[[ $(jq '[.links[] | select(.transport == "verbs" and .state == "up" and .connections_total >= 2)] | length' "$T/again.json" 2>/dev/null) == 1 ]]; then
			back=1
			break
		fi
		sleep 2
	done
	if ((back)); then
		ok "with RoCE back, new connections took a verbs link again within $((SECONDS - t0)) s: $(jq -c '[.links[] | select(.state == "up") | .transport]' "$T/again.json")"
	else
		nok "120 s after RoCE came back, new connections still took no verbs link: $(jq -c '[.links[] | {transport, state, connections_total}]' "$T/again.json" 2>/dev/null) $(tr '\n' ' ' <"$T/again.out")"
		grep -v 'pool\|process' "$T/hub.log" | tail -n 8
	fi
else
	nok "node 2 could not drop RoCE: $(cat "$dir/roce-block-failed")"
fi

# the same-node echo went on
wait_for "$local_pid" 120
rc=$?
if [[ $rc == 0 ]] && grep -q 'resets=0 errors=0' "$T/local.out"; then
	ok "same-node connections went on through the cut: $(tr '\n' ' ' <"$T/local.out")"
else
	nok "same-node echo (exit $rc): $(tr '\n' ' ' <"$T/local.out")"
fi

fin

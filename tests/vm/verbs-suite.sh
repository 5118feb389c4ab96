#!/usr/bin/env bash
# verbs-suite.sh - rshare's verbs transport on real RDMA: run on a host
# with an RDMA device, or inside the Soft-RoCE guest (tests/vm/run.sh).
#
# Two nodes are two hubs of one network namespace, each bound to its own
# address of the RDMA device (RSHARE_HUB_NAME picks a process's hub), so
# that rdma_cm connects them like two machines; `rdma resource show qp`
# proves which QPs exist.  Prints TAP-like "ok"/"not ok" lines and a final
# "N passed, N failed" line; exits nonzero when a check failed.
#
#   VERBS_A / VERBS_B   the two addresses (default 10.77.0.1 / 10.77.0.2)
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=${RSHARE_BUILD:-$ROOT/build}
A_ADDR=${VERBS_A:-10.77.0.1}
B_ADDR=${VERBS_B:-10.77.0.2}
T=$(mktemp -d)
pass=0 fail=0
pids=()

cleanup() {
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	pkill -KILL -f "$B/tests/echo-server" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

ok() { echo "ok - $*"; pass=$((pass + 1)); }
nok() { echo "not ok - $*"; fail=$((fail + 1)); }
check() { local d=$1; shift; if "$@" >/dev/null; then ok "$d"; else nok "$d"; fi; }

declare -A hubpid
hub() { # NAME ADDR: start a verbs hub
	RSHARE_HUB_NAME=$1 RSHARE_LOG=info RSHARE_PLACED=1 "$B/rshared" --addr "$2" --transport verbs >"$T/$1.log" 2>&1 &
	pids+=($!)
	hubpid[$1]=$!
	for _ in $(seq 100); do
		RSHARE_HUB_NAME=$1 "$B/rshare" stat --json >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "hub $1 did not start:"; cat "$T/$1.log"; return 1
}
stat_of() { RSHARE_HUB_NAME=$1 timeout 10 "$B/rshare" stat --json; }
# hub_state NAME: what a hub is doing, for a stall: its state, where the
# kernel has it, the CPU it took in one second, its log's end
hub_state() {
	local p=${hubpid[$1]} t0 t1
	t0=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null)
	sleep 1
	t1=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null)
	echo "# $1 (pid $p): $(grep '^State' "/proc/$p/status" 2>/dev/null), wchan $(cat "/proc/$p/wchan" 2>/dev/null), $((${t1:-0} - ${t0:-0})) ticks of CPU in 1 s"
	sed "s/^/#   $1 kernel stack: /" "/proc/$p/stack" 2>/dev/null | head -n 8
	tail -n 15 "$T/$1.log" | sed "s/^/#   $1 log: /"
}
on() { local h=$1; shift; RSHARE_HUB_NAME=$h RSHARE_NO_AUTOSTART=1 timeout 300 "$B/rshare" run -- "$@"; }
rc_qps() { rdma resource show qp 2>/dev/null | grep -c 'type RC'; }

wait_line() { # FILE PATTERN COUNT SECS
	for _ in $(seq $(($4 * 10))); do
		[ "$(grep -c -- "$2" "$1" 2>/dev/null)" -ge "$3" ] && return 0
		sleep 0.1
	done
	return 1
}

echo "# devices: $(ls /sys/class/infiniband 2>/dev/null | tr '\n' ' ')"
hub hubA "$A_ADDR" || exit 1
hub hubB "$B_ADDR" || exit 1
qp0=$(rc_qps)

echo "# [${SECONDS} s] section 1"
# 1. pre-fork echo, 8 workers x 64 connections, every byte checked, one QP per side
RSHARE_HUB_NAME=hubA RSHARE_NO_AUTOSTART=1 timeout 1500 "$B/rshare" run -- \
	"$B/tests/echo-server" -w 8 7100 >"$T/srv.out" 2>"$T/srv.err" &
pids+=($!)
wait_line "$T/srv.out" '^ready' 1 30 || { nok "echo server ready"; cat "$T/srv.err"; }
for i in 1 2 3 4; do
	on hubB "$B/tests/echo-client" -c 16 -s $i -n 3 -m 131072 -w "$T/release" "$A_ADDR" 7100 \
		>"$T/cl$i.out" 2>"$T/cl$i.err" &
	pids+=($!)
	cpids[$i]=$!
done
for i in 1 2 3 4; do
	wait_line "$T/cl$i.out" '^done' 1 240 && continue
	nok "client $i verified its bytes: $(tail -n 5 "$T/cl$i.err")"
	stat_of hubB | jq -c '.sockets[] | select(.state != "listening")' | head -n 20 | sed 's/^/#   /'
done
stat_of hubA >"$T/a.json"
stat_of hubB >"$T/b.json"
qp1=$(rc_qps)
rdma resource show qp >"$T/qp.txt" 2>&1
check "4x16 clients verified every byte over verbs" \
	test "$(cat "$T"/cl*.out | grep -c '^done')" -eq 4
check "one verbs link each side, carrying all 64 connections" jq -se '
	.[0] as $a | .[1] as $b |
	($a.links | length) == 1 and ($b.links | length) == 1 and
	$a.links[0].transport == "verbs" and $b.links[0].transport == "verbs" and
	$b.links[0].connections_total >= 64 and
	([$b.sockets[] | select(.state == "established" and .link == $b.links[0].id)] | length) == 64' \
	"$T/a.json" "$T/b.json"
check "per socket, bytes sent equal bytes received at the peer" jq -se '
	.[0] as $a | .[1] as $b |
	[$b.sockets[] | select(.state == "established") | . as $c |
	 ($a.sockets[] | select(.sid == $c.peer_sid)) as $s |
	 ($c.bytes_tx == $s.bytes_rx and $c.bytes_rx == $s.bytes_tx)] | all and length == 64' \
	"$T/a.json" "$T/b.json"
check "placed tails (RSHARE_PLACED=1) written both ways while every byte was verified (placed_tails $(jq -s -c '[.[].counters.placed_tails]' "$T/a.json" "$T/b.json"))" \
	jq -se 'all(.[]; .counters.placed_tails > 0)' "$T/a.json" "$T/b.json"
check "rdma resource: exactly 2 RC QPs for 64 connections (one per hub), was $qp0 before" \
	test "$((qp1 - qp0))" -eq 2
check "the QP numbers in rshare stat are the RC QPs rdma lists" bash -c "
	for q in \$(jq -r '.links[0].qpn' '$T/a.json' '$T/b.json'); do grep -q \"lqpn \$q \" '$T/qp.txt' || exit 1; done"
echo "# rdma resource show qp:"; sed 's/^/#   /' "$T/qp.txt"
echo "# links:"; jq -c '.links[] | {transport, device, device_port, qpn, connections, bytes_tx, bytes_rx}' "$T/a.json" "$T/b.json" | sed 's/^/#   /'
touch "$T/release"
for i in 1 2 3 4; do wait "${cpids[$i]}" 2>/dev/null; done

echo "# [${SECONDS} s] section 2"
# 2. SIGKILL of a worker in the middle of transfers: its connections reset, the rest verified
for i in 1 2; do
	on hubB "$B/tests/echo-client" -r -t 10 -c 16 -s $((i + 10)) -m 32768 "$A_ADDR" 7100 \
		>"$T/k$i.out" 2>"$T/k$i.err" &
	kp[$i]=$!
	pids+=($!)
done
sleep 3
stat_of hubA >"$T/a2.json"
workers=$(sed -n 's/^worker //p' "$T/srv.out" | jq -sc .)
read -r victim held < <(jq -r --argjson w "$workers" '
	[$w[] as $p | {pid: $p, n: ([.sockets[] | select(.state == "established" and
	 (.holders | index($p)) != null)] | length)} | select(.n > 0)] | sort_by(.n) | first | "\(.pid) \(.n)"' "$T/a2.json")
kill -KILL "$victim"
for i in 1 2; do wait "${kp[$i]}"; done # echo-client -t bounds them
sum() { cat "$T"/k*.out | sed -n "s/.* $1=\([0-9]*\).*/\1/p" | awk '{s += $1} END {print s + 0}'; }
resets=$(sum resets)
verified=$(sum verified)
errors=$(sum errors)
check "SIGKILL of a worker ($victim, $held connections): exactly its connections reset ($resets), the rest verified ($verified), no errors ($errors)" \
	test "$resets" -eq "$held" -a "$verified" -eq $((32 - held)) -a "$errors" -eq 0
cat "$T"/k*.err | sed 's/^/#   /'
sleep 1
stat_of hubA >"$T/a3.json"
check "hub A holds nothing of the killed worker" jq -e --argjson p "$victim" '
	([.processes[] | select(.pid == $p)] | length == 0) and
	([.sockets[] | select((.holders | index($p)) != null)] | length == 0)' "$T/a3.json"

echo "# [${SECONDS} s] section 2b"
# 2b. Worker kills in a loop under load: every batch verifies or sees
# resets, the master respawns, and afterwards nothing is left behind (no
# socket, no ring bytes beyond the listener's pool, still one QP per hub).
KILLS=${VERBS_KILLS:-10}
RSHARE_HUB_NAME=hubA RSHARE_NO_AUTOSTART=1 timeout 600 "$B/rshare" run -- \
	"$B/tests/respawn-server" -v -a -w 4 7200 >"$T/rsrv.out" 2>"$T/rsrv.err" &
pids+=($!)
wait_line "$T/rsrv.out" '^ready$' 1 30
master=$(sed -n 's/^master //p' "$T/rsrv.out")
stat_of hubA >"$T/k0.json"
kills=0 kresets=0 kconns=0 kbytes=0 kbad=0
for ((i = 1; i <= KILLS; i++)); do
	lines0=$(wc -l <"$T/rsrv.out")
	on hubB "$B/tests/soak-client" -E -c 4 -T 1200 -m 4096 -s $((2000 + i)) "$A_ADDR" 7200 \
		>"$T/kc.out" 2>"$T/kc.err" &
	kc=$!
	sleep 0.6
	victim=$(pgrep -P "$master" | shuf -n1)
	[ -n "$victim" ] && kill -KILL "$victim" && kills=$((kills + 1))
	wait "$kc"
	if [[ $(cat "$T/kc.out") =~ conns=4\ opened=([0-9]+)\ resets=([0-9]+)\ bytes=([0-9]+)\ msgs=[0-9]+\ corrupt=0\ lost=0\ errors=0 ]]; then
		kconns=$((kconns + BASH_REMATCH[1])) kresets=$((kresets + BASH_REMATCH[2])) kbytes=$((kbytes + BASH_REMATCH[3]))
	else
		kbad=$((kbad + 1))
		sed 's/^/#   /' "$T/kc.out" "$T/kc.err" | head -n 5
		# which worker served what in this batch, and which one was killed
		echo "#   batch $i: killed worker ${victim:-none}; the server's accepts and ends:"
		tail -n +$((lines0 + 1)) "$T/rsrv.out" | head -n 20 | sed 's/^/#     /'
	fi
	for _ in $(seq 50); do [ "$(pgrep -P "$master" | wc -l)" -eq 4 ] && break; sleep 0.1; done
done
echo "# $kills worker kills: $kconns connections, $kresets reset, $kbytes bytes verified"
check "$kills worker kills over verbs: every batch verified or reset, none corrupt, lost or failed ($kbad bad)" \
	test "$kbad" -eq 0 -a "$kills" -eq "$KILLS"
kleft=1
for _ in $(seq 100); do
	stat_of hubA >"$T/k1.json"
	if jq -e --slurpfile k0 "$T/k0.json" '
		([.sockets[] | select(.state != "listening" and (.local | endswith(":7200")))] | length == 0) and
		([.processes[]] | length) == ([$k0[0].processes[]] | length)' "$T/k1.json" >/dev/null; then
		kleft=0
		break
	fi
	sleep 0.1
done
check "after the kills hub A holds no connection of them and no dead worker; still $qp1 RC QPs" \
	bash -c "[ $kleft -eq 0 ] && [ \$(rdma resource show qp 2>/dev/null | grep -c 'type RC') -eq $qp1 ]"

echo "# [${SECONDS} s] section 2c"
# 2c. A receiver that stops reading: the sender is held back by the rings
# (blocking writes stall), nothing is lost, every byte verified after.
on hubA "$B/tests/backpressure" recv -b 4096 -P 3000 -s 5 -n 4194304 7300 >"$T/bpr.out" 2>"$T/bpr.err" &
bpr=$!
pids+=($!)
wait_line "$T/bpr.out" '^ready$' 1 30
on hubB "$B/tests/backpressure" send -b 4096 -s 5 -n 4194304 "$A_ADDR" 7300 >"$T/bps.out" 2>"$T/bps.err" &
bps=$!
wait_line "$T/bpr.out" '^accepted$' 1 30
sleep 1
p1=$(tail -n 1 "$T/bps.out" | sed -n 's/.* sent=\([0-9]*\) .*/\1/p')
sleep 1
p2=$(tail -n 1 "$T/bps.out" | sed -n 's/.* sent=\([0-9]*\) .*/\1/p')
wait "$bps"; wait "$bpr"
echo "# back-pressure over verbs: the sender stood at $p1 then $p2 bytes while the receiver slept"
check "a receiver that sleeps holds the sender back over verbs ($p1 = $p2 < 4194304), then every byte verified" \
	bash -c "[ -n '$p1' ] && [ '$p1' = '$p2' ] && [ '$p2' -lt 4194304 ] && grep -q '^received 4194304 verified' '$T/bpr.out'"

echo "# [${SECONDS} s] section 2d"
# 2d. Event-driven: 32 pre-forked workers, each with its own epoll set
# holding the shared listener with EPOLLEXCLUSIVE and its connections
# edge-triggered, echo 4 x 32 connections over verbs; every byte verified,
# every connection accepted once.
RSHARE_HUB_NAME=hubA RSHARE_NO_AUTOSTART=1 timeout 600 "$B/rshare" run -- \
	"$B/tests/epoll-exclusive-workers" -w 32 7400 >"$T/ep.out" 2>"$T/ep.err" &
epm=$!
pids+=($!)
wait_line "$T/ep.out" '^ready$' 1 60
for i in 1 2 3 4; do
	on hubB "$B/tests/echo-client" -c 32 -s $((40 + i)) -n 4 -m 65536 "$A_ADDR" 7400 >"$T/epc$i.out" 2>"$T/epc$i.err" &
	epc[$i]=$!
done
eprc=""
for i in 1 2 3 4; do
	# a client still at it after 120 s is stuck: what the hubs hold of it
	# goes to the output before its timeout ends it
	# by the clock: under TCG a polling loop's 0.1 s steps take far longer
	dl=$((SECONDS + 120))
	while ((SECONDS < dl)) && ! grep -q '^echo-client:' "$T/epc$i.out"; do sleep 1; done
	grep -q '^echo-client:' "$T/epc$i.out" && continue
	echo "# epoll client $i: no summary after 120 s; the hubs' connections (lingering ones left out):"
	for hb in hubA hubB; do
		stat_of "$hb" | jq -c --arg h "$hb" '.sockets[] | select(.state != "listening" and .state != "linger") |
			{h: $h, sid, state, bytes_tx, bytes_rx, rx_ring, tx_ring, holders}' | head -n 40 | sed 's/^/#   /'
		stat_of "$hb" | jq -c '.counters' | sed 's/^/#   counters: /'
		hub_state "$hb"
	done
done
for i in 1 2 3 4; do wait "${epc[$i]}"; eprc+=" $?"; done
kill -TERM "$epm" 2>/dev/null
wait_line "$T/ep.out" '^total ' 1 30
ept=$(grep '^total ' "$T/ep.out")
epv=$(cat "$T"/epc*.out | grep -c 'conns=32 verified=32 resets=0 errors=0')
echo "# epoll workers over verbs: $ept"
if ((epv != 4)); then
	echo "# the clients' exit statuses:$eprc"
	grep -H . "$T"/epc*.out "$T"/epc*.err | tail -n 20 | sed 's/^/#   /'
	dmesg | tail -n 10 | sed 's/^/#   dmesg: /'
fi
check "32 epoll EXCLUSIVE workers over verbs: 128 connections verified ($epv of 4 clients), each accepted once" \
	bash -c "[ $epv -eq 4 ] && [[ '$ept' == 'total workers=32 reported=32 accepted=128 closed=128 errors=0 open=0 '* ]]"

echo "# [${SECONDS} s] section 2e"
# 2e. Programs that work on kernel TCP do the same over verbs: each runs
# once plainly (kernel TCP between the two addresses: the reference) and
# once with the server on hub A and the client on hub B.
same() { # DESC PORT_K PORT_R SERVER_ARGS -- CLIENT_ARGS (PORT stands for the port): outputs equal
	local d=$1 pk=$2 pr=$3 srv=() cli=() k r sp
	shift 3
	while [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	setsid "${srv[@]//PORT/$pk}" >"$T/s-$pk.out" 2>&1 &
	sp=$!; pids+=($sp)
	sleep 0.5
	k=$(timeout 120 "${cli[@]//PORT/$pk}" 2>&1)
	kill -KILL -- -"$sp" 2>/dev/null
	RSHARE_HUB_NAME=hubA RSHARE_NO_AUTOSTART=1 setsid timeout 300 "$B/rshare" run -- "${srv[@]//PORT/$pr}" \
		>"$T/s-$pr.out" 2>&1 &
	sp=$!; pids+=($sp)
	sleep 1
	r=$(on hubB "${cli[@]//PORT/$pr}" 2>&1)
	kill -KILL -- -"$sp" 2>/dev/null # the server and every worker it forked
	echo "# $d: kernel TCP '$(head -c 200 <<<"$k" | tr '\n' ' ')', verbs '$(head -c 200 <<<"$r" | tr '\n' ' ')'"
	[ "$k" = "$r" ] || diff <(echo "$k") <(echo "$r") | head -n 30 | sed 's/^/# kernel TCP (<), verbs (>): /'
	check "$d: as on kernel TCP" test -n "$k" -a "$k" = "$r"
}
same "server speaks first, 50 nonblocking clients" 7501 7502 \
	"$B/tests/server-speaks-first" -s -w 2 PORT -- "$B/tests/server-speaks-first" -c 50 "$A_ADDR" PORT
same "1 MiB written before each read, 2 connections x 2 rounds" 7503 7504 \
	"$B/tests/echo-server" -w 2 PORT -- "$B/tests/write-then-read-client" -c 2 -m 1048576 -n 2 "$A_ADDR" PORT
same "600 descriptors of one socket, two in one epoll set" 7505 7506 \
	"$B/tests/echo-server" -w 1 PORT -- "$B/tests/dup-many-descriptors" -n 600 "$A_ADDR" PORT
same "a blocking connect interrupted by a signal" 7507 7508 \
	"$B/tests/connect-interrupted" -s PORT -- "$B/tests/connect-interrupted" -c 4 "$A_ADDR" PORT
# the server's transcript is whole once no process has its file open (the
# server ends after its last connection; 10 s at most)
srv_done="for _ in \$(seq 100); do ls -l /proc/[0-9]*/fd/ 2>/dev/null | grep -qF '$T/s-PORT.out' || break; sleep 0.1; done"
port=7510
# (243 diverged once in a few runs: a 16 KiB write on an idle connection,
# whose send ring is small on verbs, went in two parts around the ring's
# growth, and the peer's reset to the first came before the call returned:
# it reported the reset, and the read after it EOF; the ring now grows
# before such a write's first byte, as kernel TCP takes it whole)
for seed in 1 2 3 4 6 243; do
	port=$((port + 2))
	same "differential program, seed $seed" $port $((port + 1)) \
		"$B/tests/diff-stream" -s $seed PORT -- \
		bash -c "{ '$B/tests/diff-stream' -c $seed '$A_ADDR' PORT; $srv_done; grep -v '^ready' '$T/s-PORT.out'; } | sort"
done
# with more of the socket calls (-X: peek, waitall, readv, sendmsg,
# edge-triggered epoll, SO_RCVTIMEO, what a reset leaves)
for seed in 1 5; do
	port=$((port + 2))
	same "differential program with more calls, seed $seed" $port $((port + 1)) \
		"$B/tests/diff-stream" -X -s $seed PORT -- \
		bash -c "{ '$B/tests/diff-stream' -X -c $seed '$A_ADDR' PORT; $srv_done; grep -v '^ready' '$T/s-PORT.out'; } | sort"
done

echo "# [${SECONDS} s] section 2f"
# 2f. Rings that follow the load over verbs (tests/ring-resize.c): a
# reader that stalls for 2 s, so that the blocked writer's send ring
# grows, then reads 64 MiB as fast as it can (its receive ring grows
# where the credit held it back: the new ring's address and key reach
# the peer in RING, and it writes there from the position of its
# RING_ACK), then 10 s idle, in which both rings go back to 4 KiB, their
# size on verbs when idle (a receive ring moves the same two-step way), and
# the hub's registered memory with them (printed), then 1 MiB more.
on hubA "$B/tests/ring-resize" server 7600 2 >"$T/rr-s.out" 2>"$T/rr-s.err" &
rrs=$!
pids+=($!)
wait_line "$T/rr-s.out" '^listening' 1 30
on hubB "$B/tests/ring-resize" client "$A_ADDR" 7600 64 10 >"$T/rr-c.out" 2>"$T/rr-c.err" &
rrc=$!
wait_line "$T/rr-c.out" '^client sent' 1 120
sleep 4 # of the 10 s idle: the rings went back after about 1 to 2 s
rr_rx=$(stat_of hubA | jq '[.sockets[] | select(.state == "established")][0].rx_ring // 0')
rr_tx=$(stat_of hubB | jq '[.sockets[] | select(.state == "established")][0].tx_ring // 0')
stat_of hubA >"$T/rr-a.json"
rr_reg=$(jq -r '"\(.counters.registered_bytes - .counters.registered_idle_bytes) \([.sockets[] | select(.state != "listening") | .rx_ring + .tx_ring] | add // 0)"' "$T/rr-a.json")
wait "$rrc"; wait "$rrs"
rr_a=$(stat_of hubA | jq -r '.counters | "\(.rx_rings_grown) \(.rx_rings_shrunk)"')
rr_b=$(stat_of hubB | jq -r '.counters | "\(.tx_rings_grown) \(.tx_rings_shrunk)"')
echo "# rings over verbs: receive grown/shrunk $rr_a, send grown/shrunk $rr_b; idle rx $rr_rx tx $rr_tx; $(cat "$T/rr-s.out" | tail -1)"
check "rings over verbs: the blocked writer's send ring grew and every byte arrived in order" \
	bash -c "grep -q 'bytes=68157440 verified=1' '$T/rr-s.out' && [ '${rr_b%% *}' -ge 1 ]"
check "rings over verbs: both went back to 4 KiB while the connection idled ($rr_rx, $rr_tx)" \
	test "$rr_rx" = 4096 -a "$rr_tx" = 4096
# registered bytes in use (less the free rings a pool keeps) against the
# sockets' rings: printed, not checked (a few KiB more are seen at times)
echo "# registered memory of hub A, in use / the sockets' rings: $rr_reg"
awk -v r="$rr_reg" 'BEGIN { n = split(r, a, " "); exit !(n == 2 && a[1] > 0 && a[1] <= a[2]) }' ||
	jq -c '(.counters | {registered_bytes, registered_idle_bytes}), (.sockets[] | {sid, state, pool, rx_ring, tx_ring, holders})' \
		"$T/rr-a.json" 2>/dev/null | head -n 12 | sed 's/^/#   hub A: /'

echo "# [${SECONDS} s] section 3"
# 3. SIGKILL of the peer hub (the clients' hub: rshared and its hub
# process) in the middle of transfers:
# the server's hub drops that link and resets every connection on it, its
# workers see the resets and let go; a new peer hub gets a new link.
on hubB "$B/tests/echo-client" -r -t 60 -c 8 -s 21 -m 32768 "$A_ADDR" 7100 >"$T/h.out" 2>"$T/h.err" &
hp=$!
pids+=($!)
sleep 4
on hubB "$B/tests/hub-death-client" "$A_ADDR" 7100 >"$T/hd.out" 2>"$T/hd.err" &
pids+=($!)
wait_line "$T/hd.out" '^blocked$' 1 30
sleep 0.5
pkill -KILL -f "rshared --addr $B_ADDR"
wait_line "$T/hd.out" '^recv=' 1 10
hd=$(grep '^recv=' "$T/hd.out")
hds=$(sed -n 's/^recv=.* secs=\([0-9.]*\)$/\1/p' "$T/hd.out")
# secs counts from 0.5 s before the kill; printed, not checked: the class
# is "returned" (within wait_line's 10 s), not "blocked on" (a guest that
# tears a killed hub's registered memory down slowly took 2 s once)
check "the hub killed: a recv blocked on it returns ECONNRESET ($hd)" \
	bash -c "[[ '$hd' == 'recv=-1 errno=ECONNRESET '* ]] && [[ -n '$hds' ]]"
check "the peer hub killed: the server's hub drops the link" wait_line "$T/hubA.log" 'dropped' 1 60
gone=0
for _ in $(seq 300); do
	stat_of hubA >"$T/a4.json"
	if jq -e '[.sockets[] | select(.state != "listening")] | length == 0' "$T/a4.json" >/dev/null; then
		gone=1
		break
	fi
	sleep 0.2
done
check "every connection of the dropped link reset and released on the server side" test "$gone" -eq 1
[ "$gone" -eq 1 ] || jq -c '.sockets[] | select(.state != "listening")' "$T/a4.json" | head -n 20 | sed 's/^/#   left: /'
# clients whose own hub was killed stay blocked: no hub is left to wake them
pkill -KILL -f "echo-client -r -t 60" 2>/dev/null
hub hubB "$B_ADDR" || true
timeout 300 env RSHARE_HUB_NAME=hubB RSHARE_NO_AUTOSTART=1 "$B/rshare" run -- \
	"$B/tests/echo-client" -c 4 -s 31 -n 4 -m 65536 "$A_ADDR" 7100 >"$T/n.out" 2>"$T/n.err"
check "after the peer hub restarted, new connections work over a new verbs link" bash -c "
	grep -q 'verified=4 resets=0 errors=0' '$T/n.out' &&
	RSHARE_HUB_NAME=hubA '$B/rshare' stat --json | jq -e '[.links[] | select(.state == \"up\" and .transport == \"verbs\")] | length == 1' >/dev/null"

echo "# [${SECONDS} s] section 4"
# 4. A hub on verbs handed over (`rshare hub restart`) and its hub process
# SIGKILLed (hub_pid: rshared's warden execs a new hub on the records),
# each on both sides, in the middle of 4 verified streams (20 s: the
# events take 12-16 s in the guest): the new hub
# opens the device again, registers every ring again and tells the peer
# the new keys in RESUME; no byte lost, no reset.
on hubA "$B/tests/echo-server" -w 2 7600 >"$T/s4.out" 2>&1 &
pids+=($!)
"$B/tests/echo-server" -w 2 7601 >"$T/s4k.out" 2>&1 &
pids+=($!)
sleep 1
pidA=$(stat_of hubA | jq .pid) pidB=$(stat_of hubB | jq .pid)
on hubB "$B/tests/echo-client" -S -c 4 -s 41 -t 20 -m 262144 "$A_ADDR" 7600 >"$T/s4c.out" 2>"$T/s4c.err" &
pids+=($!)
# the same streams on kernel TCP meanwhile, nothing done to them: the
# guest's own pauses, for scale
"$B/tests/echo-client" -S -c 4 -s 41 -t 20 -m 262144 "$A_ADDR" 7601 >"$T/s4kc.out" 2>"$T/s4kc.err" &
pids+=($!)
restart_hub() { # NAME: restart it (a refusal says try again)
	for _ in $(seq 20); do
		RSHARE_HUB_NAME=$1 timeout 20 "$B/rshare" hub restart >>"$T/restarts.out" 2>&1 && return 0
		sleep 0.2
	done
	return 1
}
kill_hub_proc() { # NAME: SIGKILL of its hub process, and wait for the next one
	local old new
	old=$(stat_of "$1" | jq .hub_pid)
	kill -KILL "$old"
	for _ in $(seq 100); do
		new=$(stat_of "$1" 2>/dev/null | jq .hub_pid 2>/dev/null)
		[[ -n $new && $new != "$old" ]] && return 0
		sleep 0.1
	done
	return 1
}
sleep 2
check "hub B restarted on verbs with connections over it" restart_hub hubB
sleep 2
check "hub A restarted on verbs with connections over it" restart_hub hubA
sleep 2
check "hub B's hub process killed: a new one answers" kill_hub_proc hubB
sleep 2
check "hub A's hub process killed: a new one answers" kill_hub_proc hubA
wait_line "$T/s4c.out" '^echo-client:' 1 60
s4=$(sed -n 's/^echo-client: \(conns=[0-9]* verified=[0-9]* resets=[0-9]* errors=[0-9]*\).*/\1/p' "$T/s4c.out")
wait_line "$T/s4kc.out" '^echo-client:' 1 60
stall() { sed -n 's/^echo-client: .* stall_ms=\([0-9]*\).*/\1/p' "$1"; }
echo "# restarts and kills on verbs, longest pause of a stream: $(stall "$T/s4c.out") ms (kernel TCP's streams at once, nothing done to them: $(stall "$T/s4kc.out") ms)"
check "4 streams over verbs through 2 restarts and 2 hub kills: every byte verified, no reset ($s4)" \
	test "$s4" = "conns=4 verified=4 resets=0 errors=0"
[ "$s4" = "conns=4 verified=4 resets=0 errors=0" ] || sed 's/^/#   client: /' "$T/s4c.err" | tail -n 5
stat_of hubA >"$T/a5.json"
stat_of hubB >"$T/b5.json"
check "the hubs kept their pids, restarted once and were succeeded once each, resumed the connections" \
	jq -es --argjson a "$pidA" --argjson b "$pidB" '
	.[0].pid == $a and .[1].pid == $b and all(.[]; .counters.restarts == 1 and .counters.successions == 1 and .counters.conns_resumed >= 4)' "$T/a5.json" "$T/b5.json"
[ "$fail" -eq 0 ] || jq -c '{pid, hub_pid, c: (.counters | {restarts, restarts_refused, restart_refused, successions, conns_resumed}), links: [.links[] | {state, transport}]}' "$T/a5.json" "$T/b5.json" | sed 's/^/#   /'

echo "# [${SECONDS} s] section 4b"
# 4b. A hub process killed while a receive ring changes size: the new hub
# registers both rings again and tells the peer both keys (REKEY), and the
# connections go on.  4 connections grow their rings with a round of
# 64 KiB echoes; hub A's hub process is stopped, so that hub B's offers to
# shrink the idle rings again (RING) stay unanswered; hub B's hub process
# is killed with them under way, hub A's let go; a second round of echoes
# is verified on every connection.
on hubA "$B/tests/echo-server" -w 2 7700 >"$T/s4b.srv" 2>&1 &
pids+=($!)
wait_line "$T/s4b.srv" '^ready' 1 30
on hubB "$B/tests/echo-rounds" -c 4 -s 42 -m 65536 -r 2 -g "$T/s4b.go" "$A_ADDR" 7700 >"$T/s4b.out" 2>"$T/s4b.err" &
pids+=($!)
offered=0
if wait_line "$T/s4b.out" '^round 0 ok' 1 60; then
	ha=$(stat_of hubA | jq .hub_pid)
	kill -STOP "$ha"
	for _ in $(seq 100); do # hub B offers within 2 s of the rings idling
		stat_of hubB >"$T/b4b.json"
		offered=$(jq '[.sockets[] | select(.flow.rx_offered == 1)] | length' "$T/b4b.json")
		[ "${offered:-0}" -gt 0 ] && break
		sleep 0.1
	done
	kill_hub_proc hubB
	kill -CONT "$ha"
fi
touch "$T/s4b.go.1"
wait_line "$T/s4b.out" '^done' 1 90
check "a hub process killed with $offered receive rings changing size: the new hub tells both rings' keys" \
	test "${offered:-0}" -gt 0 -a "$(grep -c 'ring was changing size as its hub ended.*both rings' "$T/hubB.log")" -ge "${offered:-1}"
check "... and every connection goes on: a second round of echoes verified on all 4" \
	bash -c "grep -q '^round 1 ok conns=4' '$T/s4b.out' && grep -q '^done' '$T/s4b.out'"
grep -q '^done' "$T/s4b.out" || { sed 's/^/#   client: /' "$T/s4b.err" | tail -n 5; grep 'changing size' "$T/hubB.log" | sed 's/^/#   hub B: /'; }

echo "# hub A log (tail):"; tail -n 15 "$T/hubA.log" | sed 's/^/#   /'
if ((fail)); then
	echo "# what the hubs warned of:"
	grep -h 'warn\|error' "$T/hubA.log" "$T/hubB.log" | tail -n 30 | sed 's/^/#   /'
fi
echo "# [${SECONDS} s] end"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

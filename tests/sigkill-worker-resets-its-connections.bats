#!/usr/bin/env bats
# SIGKILL of one of 4 pre-forked echo workers in the middle of long
# transfers: exactly the connections that worker held end (the clients
# see ECONNRESET where it left bytes unread, EOF where it had read them
# all, as the kernel closes a dead process's sockets; echo-client -r counts
# both), every other connection completes with every byte verified, and the server's hub forgets the dead process and its sockets.
# Across two nodes, and on one node (the same-node path).

load lib

setup() {
	rs_require echo-server echo-client
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# kill_a_worker CLIENT_NS ADDRESS: the clients in CLIENT_NS dial ADDRESS
kill_a_worker() {
	local cns=$1 dst=$2 port=7011 i pids=() workers victim held resets=0 verified=0 n r v
	rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" -w 4 $port
	rs_wait_ready server
	workers=$(sed -n 's/^worker //p' "$RS_TMP/server.out" | jq -sc .)
	for i in 1 2; do
		rs_bg client$i "$cns" --rshare "$RS_BIN/echo-client" -r -t 8 -c 16 -s $i -m 65536 \
			"$dst" $port
		pids+=("$RS_LASTPID")
	done
	# all 32 connections accepted and moving data
	deadline=$((SECONDS + 15))
	for i in $(seq 100); do
		((SECONDS < deadline)) || break
		rs_stat "$NS_A" >"$RS_TMP/statA.json"
		n=$(jq --argjson w "$workers" '[.sockets[] | select(.state == "established" and
			any(.holders[]; . as $h | $w | index($h) != null))] | length' "$RS_TMP/statA.json")
		[[ $n -ge 32 ]] && break
		sleep 0.1
	done
	[[ $n -ge 32 ]] || rs_fail "only $n connections accepted by workers"
	sleep 1

	# the worker holding the fewest (but some) connections, so others survive
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	read -r victim held < <(jq -r --argjson w "$workers" '
		[$w[] as $p | {pid: $p, n: ([.sockets[] | select(.state == "established" and
			(.holders | index($p)) != null)] | length)} | select(.n > 0)] |
		sort_by(.n) | first | "\(.pid) \(.n)"' "$RS_TMP/statA.json")
	echo "killing worker $victim holding $held connections (workers $workers)"
	[[ $held -ge 1 ]]
	kill -KILL "$victim"

	for i in 1 2; do
		rs_wait_pid "${pids[$i - 1]}" 90 ||
			rs_fail "client$i exit $?: $(cat "$RS_TMP/client$i.out" "$RS_TMP/client$i.err")"
		r=$(sed -n 's/.* resets=\([0-9]*\) errors=0 .*/\1/p' "$RS_TMP/client$i.out")
		v=$(sed -n 's/.* verified=\([0-9]*\) .*/\1/p' "$RS_TMP/client$i.out")
		resets=$((resets + r))
		verified=$((verified + v))
	done
	cat "$RS_TMP"/client*.out
	grep -h 'reset' "$RS_TMP"/client*.err || true
	[[ $resets -eq $held ]] || rs_fail "$resets connections reset, the killed worker held $held"
	[[ $verified -eq $((32 - held)) ]] || rs_fail "$verified connections verified, want $((32 - held))"

	# the hub forgets the dead worker
	deadline=$((SECONDS + 15))
	for i in $(seq 50); do
		((SECONDS < deadline)) || break
		rs_stat "$NS_A" >"$RS_TMP/statA2.json"
		jq -se --argjson p "$victim" '.[0] as $s | $s.processes != null and
			([$s.processes[] | select(.pid == $p)] | length == 0) and
			([$s.sockets[] | select((.holders | index($p)) != null)] | length == 0)' \
			"$RS_TMP/statA2.json" >/dev/null && break
		sleep 0.1
	done
	rs_jq_check "no trace of the killed worker" --slurpfile a "$RS_TMP/statA2.json" --argjson p "$victim" '
		$a[0] as $A |
		fail([$A.processes[] | select(.pid == $p)] | length == 0; "process \($p) still in stat"),
		($A.sockets[] | select((.holders | index($p)) != null) | "socket \(.sid) still held by \($p)")'
	# the surviving workers still serve
	run rs_exec "$cns" --rshare "$RS_BIN/echo-client" -c 4 -n 4 "$dst" $port
	echo "$output"
	[[ $status -eq 0 ]]
}

@test "SIGKILL of a worker resets only its connections; the rest complete" {
	kill_a_worker "$NS_B" $ADDR_A
}

@test "same node: SIGKILL of a worker resets only its connections; the rest complete" {
	kill_a_worker "$NS_A" 127.0.0.1
	rs_stat "$NS_A" >"$RS_TMP/statA3.json"
	rs_jq_check "the connections took the same-node path" --slurpfile a "$RS_TMP/statA3.json" '
		$a[0] as $A |
		fail($A.links|length == 0; "\($A.links|length) links, want none"),
		fail($A.counters.local_connects >= 36; "local_connects \($A.counters.local_connects), want >= 36")'
}

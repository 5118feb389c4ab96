#!/usr/bin/env bats
# Node A's hub runs under valgrind (memcheck; without a warden, as
# valgrind cannot run two processes on one address space) while 2 preloaded clients on
# node B make 4 echo connections each to a preloaded echo server on A, and
# one on A itself 4 same-node ones (messages up to 64 KiB, every byte
# checked); and a server that hands 2 connections to its child over a
# socketpair (tokens in flight: tests/pass-descriptors.c).  Once the server is gone
# too, SIGTERM stops the hub, and it must exit 0: valgrind found no memory
# errors and no definitely lost blocks (--error-exitcode=99 otherwise; the
# valgrind log is shown on failure).

load lib

setup() {
	command -v valgrind >/dev/null || skip "needs valgrind (tools/deps.sh installs it)"
	rs_require echo-server echo-client pass-descriptors
	rs_setup
	rs_two_nodes nohubs
	rs_hub_start "$NS_B"
}

teardown() {
	if [[ -s ${RS_TMP:-/nonexistent}/valgrind.log && ${BATS_TEST_COMPLETED:-} != 1 ]]; then
		echo "--- valgrind.log" >&2
		grep -v '^==[0-9]*== *$' "$RS_TMP/valgrind.log" | tail -n 80 >&2
	fi
	rs_teardown
}

# the number of processes A's hub knows, or nothing when it does not answer
procs_a() {
	rs_stat "$NS_A" 2>/dev/null | jq -e '.processes | length'
}

@test "hub under valgrind: echo over rshare, then SIGTERM: exit 0, no errors, no definite leaks" {
	local port=7401 i hub vgpid deadline pids=()
	RSHARE_LOG=info rs_bg hub-A "$NS_A" valgrind -q --error-exitcode=99 --leak-check=full \
		--errors-for-leak-kinds=definite --show-leak-kinds=definite --num-callers=30 \
		--log-file="$RS_TMP/valgrind.log" "$RSHARED" --no-warden
	hub=$RS_LASTPID
	deadline=$((SECONDS + 60))
	until rs_stat "$NS_A" 2>/dev/null | jq -se '.[0].node != null' >/dev/null 2>&1; do
		kill -0 "$hub" 2>/dev/null || rs_fail "hub under valgrind exited: $(cat "$RS_TMP/hub-A.err")"
		((SECONDS < deadline)) || rs_fail "hub under valgrind did not answer stat within 60 s"
		sleep 0.2
	done
	# the hub reports its own pid: valgrind runs it in the process it starts
	vgpid=$(rs_stat "$NS_A" | jq -r .pid)

	rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" -w 2 $port
	local server=$RS_LASTPID
	rs_wait_ready server 60
	for i in 1 2; do
		rs_bg client$i "$NS_B" --rshare "$RS_BIN/echo-client" -c 4 -s $i -n 6 -m 65536 $ADDR_A $port
		pids+=("$RS_LASTPID")
	done
	# and one on node A itself: the same-node path (pair segments)
	rs_bg client3 "$NS_A" --rshare "$RS_BIN/echo-client" -c 4 -s 3 -n 6 -m 65536 127.0.0.1 $port
	pids+=("$RS_LASTPID")
	for i in 1 2 3; do
		rs_wait_pid "${pids[$((i - 1))]}" 120 || rs_fail "client$i exit $?: $(cat "$RS_TMP/client$i.out" "$RS_TMP/client$i.err")"
		grep -q 'conns=4 verified=4 resets=0 errors=0' "$RS_TMP/client$i.out" ||
			rs_fail "client$i: $(cat "$RS_TMP/client$i.out")"
	done
	# sockets passed to another process: tokens made, taken and ended
	rs_bg giver "$NS_A" --rshare "$RS_BIN/pass-descriptors" serve child 7402 2
	rs_wait_ready giver 60
	out=$(RS_TIMEOUT=120 rs_exec "$NS_B" --rshare "$RS_BIN/pass-descriptors" client $ADDR_A 7402 2 2 2>&1) || true
	[[ $out == *"1: giver|after|taken ping 1|"* ]] || rs_fail "passed connections: '$out'"
	rs_wait_pid "$RS_LASTPID" 60 >/dev/null || true
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_jq_check "the connections ran over the valgrind hub" --slurpfile a "$RS_TMP/statA.json" '
		$a[0] as $A |
		fail($A.links|length == 1; "A has \($A.links|length) links"),
		fail(($A.links[0].connections_total // 0) >= 10; "A link connections_total \($A.links[0].connections_total)"),
		fail($A.counters.passes_taken >= 2; "passes_taken \($A.counters.passes_taken)"),
		fail(($A.links[0].bytes_rx // 0) > 0 and ($A.links[0].bytes_tx // 0) > 0; "A link moved no bytes"),
		fail($A.counters.fallback_connects == 0; "fallback_connects \($A.counters.fallback_connects)"),
		fail($A.counters.local_connects == 4; "local_connects \($A.counters.local_connects), want 4")'

	# the server goes; the hub drops its process and pool, then stops
	kill -TERM "$server"
	rs_wait_pid "$server" 20 >/dev/null || true
	rs_retry 30 eval '[[ $(procs_a) == 0 ]]' || rs_fail "A's hub still lists processes: $(rs_stat "$NS_A" | jq -c .processes)"
	kill -TERM "$vgpid"
	local rc=0
	rs_wait_pid "$hub" 120 || rc=$?
	grep -q 'hub stopping' "$RS_TMP/hub-A.err" || rs_fail "the hub did not stop cleanly (exit $rc)"
	[[ $rc -eq 0 ]] || rs_fail "hub under valgrind exit $rc (99: valgrind errors or definite leaks)"
	[[ ! -s $RS_TMP/valgrind.log ]] || rs_fail "valgrind reported: $(head -c 4000 "$RS_TMP/valgrind.log")"
}

#!/usr/bin/env bats
# Nonblocking calls and readiness across two nodes, with Linux kernel TCP
# as the reference: tests/nonblocking-and-readiness.c checks, one line per
# check, O_NONBLOCK/SOCK_NONBLOCK/SOCK_CLOEXEC/accept4 flags, EAGAIN,
# MSG_DONTWAIT/PEEK/WAITALL/NOSIGNAL, FIONREAD/FIONBIO, SO_ERROR,
# SO_LINGER {1,0}, TCP_NODELAY, nonblocking and refused connects, poll,
# ppoll, select and pselect over a socket and a pipe (empty, readable,
# writable, full, drained, half-closed, reset), epoll (create, ctl errors,
# level- and edge-triggered, one-shot, RDHUP, data, nesting, listeners,
# EPOLLEXCLUSIVE, pwait, pwait2), readiness across fork, idle waits that
# cost no CPU, dup/dup2/dup3/F_DUPFD(_CLOEXEC) and sendfile.  It runs once
# on kernel TCP, then with both sides under rshare, where the hubs' stat
# proves that every connection crossed the one link between the nodes, and
# then with both sides on one node, where every connection took the
# same-node path (shared memory, no link).
# waits: poll, select and epoll timeouts, and idle waits that cost no CPU (tests/run runs it beside the others)

load lib

setup() {
	rs_require nonblocking-and-readiness
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# run the checks, peer on A, checker on B (or $2 at address $3); $1: ""
# or --rshare.  Sets checks_status, conns and refused (from the summary line).
run_checks() {
	local port=7101 summary
	rs_bg peer "$NS_A" $1 "$RS_BIN/nonblocking-and-readiness" peer $port
	rs_wait_ready peer
	run rs_exec "${2:-$NS_B}" $1 "$RS_BIN/nonblocking-and-readiness" check "${3:-$ADDR_A}" $port
	echo "$output"
	checks_status=$status
	summary=$(grep '^summary:' <<<"$output") || rs_fail "no summary line (exit $status)"
	conns=$(sed -n 's/.* connections=\([0-9]*\).*/\1/p' <<<"$summary")
	refused=$(sed -n 's/.* refused=\([0-9]*\).*/\1/p' <<<"$summary")
	[[ $conns -gt 10 && $refused -ge 1 ]] || rs_fail "summary: $summary"
}

# the failed checks again, last, where bats shows them, and on the TAP
# stream before the test's own line; then the verdict
checks_passed() {
	if [[ $checks_status -ne 0 ]]; then
		grep '^not ok' <<<"$output" >&2 || true
		grep '^not ok' <<<"$output" | sed 's/^/# failed check: /' >&3 || true
		rs_fail "checks failed (exit $checks_status)"
	fi
}

@test "nonblocking calls and poll/select/epoll readiness on kernel TCP (the reference)" {
	run_checks ""
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "kernel TCP: no rshare link carried anything" \
		--slurpfile a "$RS_TMP/statA.json" --slurpfile b "$RS_TMP/statB.json" '
		$a[0] as $A | $b[0] as $B |
		fail($A.links|length == 0; "node A has \($A.links|length) links"),
		fail($B.links|length == 0; "node B has \($B.links|length) links")'
	checks_passed
}

@test "nonblocking calls and poll/select/epoll readiness under rshare match kernel TCP" {
	run_checks --rshare
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "every connection crossed the one link between the nodes" \
		--slurpfile a "$RS_TMP/statA.json" --slurpfile b "$RS_TMP/statB.json" \
		--argjson conns "$conns" --argjson refused "$refused" '
		$a[0] as $A | $b[0] as $B |
		fail($A.links|length == 1; "node A has \($A.links|length) links, want 1"),
		fail($B.links|length == 1; "node B has \($B.links|length) links, want 1"),
		($A.links[0] // {}) as $LA | ($B.links[0] // {}) as $LB |
		fail($LA.peer_node == $B.node and $LB.peer_node == $A.node;
		     "link peers \($LA.peer_node) \($LB.peer_node), nodes \($A.node) \($B.node)"),
		fail($LA.state == "up" and $LB.state == "up"; "link states \($LA.state) \($LB.state)"),
		fail($LB.connections_total == $conns;
		     "B link connections_total \($LB.connections_total), the checker made \($conns)"),
		fail($LA.connections_total == $conns;
		     "A link connections_total \($LA.connections_total), the checker made \($conns)"),
		fail($B.counters.fallback_connects == $refused;
		     "B fallback_connects \($B.counters.fallback_connects), want \($refused) (the refused connects)"),
		fail($A.counters.fallback_connects == 0; "A fallback_connects \($A.counters.fallback_connects)"),
		fail(($LB.bytes_tx // 0) >= 400000 and ($LA.bytes_rx // 0) >= 400000;
		     "B link bytes_tx \($LB.bytes_tx), A link bytes_rx \($LA.bytes_rx): want >= 400000 (sendfile alone)"),
		fail(($LA.bytes_tx // 0) > 0 and ($LB.bytes_rx // 0) > 0;
		     "A link bytes_tx \($LA.bytes_tx), B link bytes_rx \($LB.bytes_rx)")'
	checks_passed
}

@test "nonblocking calls and poll/select/epoll readiness on one node (same-node path) match kernel TCP" {
	run_checks --rshare "$NS_A" 127.0.0.1
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_jq_check "every connection took the same-node path" \
		--slurpfile a "$RS_TMP/statA.json" --argjson conns "$conns" --argjson refused "$refused" '
		$a[0] as $A |
		fail($A.links|length == 0; "node A has \($A.links|length) links, want none"),
		fail($A.counters.local_connects == $conns;
		     "local_connects \($A.counters.local_connects), the checker made \($conns)"),
		fail($A.counters.fallback_connects == $refused;
		     "fallback_connects \($A.counters.fallback_connects), want \($refused) (the refused connects)")'
	checks_passed
}

#!/usr/bin/env bats
# Sockets that move from process to process (tests/pass-descriptors.c):
# a server hands each accepted connection to another process over a unix
# socket (SCM_RIGHTS) and writes on its own copy after the hand-over; to a
# child, to a sibling, to an unrelated process (another pool, which joins
# the socket's); a listener handed to an unrelated process, which accepts
# on it; and connections given to new programs started by posix_spawn,
# system, popen and vfork+exec, whose starter closes its copy at once.  A
# process in a pool of its own takes connections from one more pool and a
# listener from another, and serves them itself, in forked children and in
# programs they exec, with its client on another node and on its own.
# Each runs once on kernel TCP and once with both ends preloaded, and the
# client's transcript must be the same; the rshare runs must have crossed
# the link (`rshare stat`), none falling back.  A receiver of another uid
# gets no access: its socket never connected.
# waits: each hand-over waits for its receiver and each client for its transcript, half its time on a CPU (tests/run runs it beside the others)

load lib

setup() {
	rs_require pass-descriptors
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

PD=

# took_link N: node B's hub carried at least N connections on its link
took_link() {
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare run took the link" --slurpfile b "$RS_TMP/statB.json" --argjson n "$1" '
		$b[0] as $B |
		fail(($B.links | length) == 1; "links: \($B.links | length), want 1"),
		fail(($B.links[0].connections_total // 0) >= $n; "the link carried \($B.links[0].connections_total) connections, want \($n)"),
		fail($B.counters.fallback_connects == 0; "fallback_connects \($B.counters.fallback_connects)")'
}

# passes_done MIN: node A's hub saw at least MIN tokens taken, and none is
# left in flight (each token's last copy closed)
passes_done() {
	local i
	for ((i = 0; i < 50; i++)); do
		rs_stat "$NS_A" >"$RS_TMP/statA.json"
		[[ $(jq '.counters.passes_in_flight' "$RS_TMP/statA.json") == 0 ]] && break
		sleep 0.1
	done
	rs_jq_check "the sockets went as tokens" --slurpfile a "$RS_TMP/statA.json" --argjson n "$1" '
		$a[0] as $A |
		fail($A.counters.passes_taken >= $n; "\($A.counters.passes_taken) tokens taken, want \($n)"),
		fail($A.counters.passes_in_flight == 0; "\($A.counters.passes_in_flight) tokens still in flight")'
}

# vs_kernel NAME PORT HOW N BEFORE [take]: the server (and an unrelated
# taker when asked) on node A, the client on B, on kernel TCP then on rshare
vs_kernel() {
	local name=$1 port=$2 how=$3 n=$4 before=$5 take=${6:-} pre p
	PD=$RS_BIN/pass-descriptors
	for pre in "" --rshare; do
		p=$port
		[[ -n $pre ]] && p=$((port + 1))
		if [[ -n $take ]]; then
			rs_bg "$name-take-$p" "$NS_A" $pre "$PD" take "$RS_TMP/u$p" "$n"
			rs_wait_ready "$name-take-$p"
		fi
		rs_bg "$name-srv-$p" "$NS_A" $pre "$PD" serve "$how" "$p" "$n" "$RS_TMP/u$p"
		rs_wait_ready "$name-srv-$p"
		out=$(RS_TIMEOUT=60 rs_exec "$NS_B" $pre "$PD" client $ADDR_A "$p" "$n" "$before" \
			2>"$RS_TMP/$name-cli-$p.err") || true
		if [[ -z $pre ]]; then RS_TCP=$out; else RS_RS=$out; fi
	done
	[[ -n $RS_TCP ]] || rs_fail "kernel TCP: no output ($(tail -n 3 "$RS_TMP/$name-cli-$port.err"))"
	[[ $RS_RS == "$RS_TCP" ]] || rs_fail "rshare: '$RS_RS', kernel TCP: '$RS_TCP'"
	took_link "$n"
}

@test "a connection handed to a child over a socketpair serves as on kernel TCP" {
	vs_kernel child 7701 child 4 2
	[[ $RS_TCP == *"3: giver|after|taken ping 3|"* ]] || rs_fail "kernel TCP: '$RS_TCP'"
	passes_done 4
}

@test "a connection handed to a sibling serves as on kernel TCP" {
	vs_kernel sibling 7703 sibling 4 2
	passes_done 4
}

@test "a connection handed to an unrelated process (another pool) serves as on kernel TCP" {
	vs_kernel unrelated 7705 unrelated 4 2 take
	passes_done 4
	# the taker joined the giver's pool
	grep -q 'joins pool' "$RS_TMP/hub-$NS_A.err" || rs_fail "the taker did not join the giver's pool"
}

@test "a listener handed to an unrelated process accepts there as on kernel TCP" {
	vs_kernel listener 7707 listener 4 1 take
	[[ $RS_TCP == *"3: taker|taken ping 3|"* ]] || rs_fail "kernel TCP: '$RS_TCP'"
	passes_done 1
}

@test "connections given to programs started by posix_spawn serve as on kernel TCP" {
	vs_kernel spawn 7709 spawn 3 1
}

@test "connections given to programs started by system serve as on kernel TCP" {
	vs_kernel system 7711 system 3 1
}

@test "connections given to programs started by popen serve as on kernel TCP" {
	vs_kernel popen 7713 popen 3 1
}

@test "connections given to programs started by vfork and exec serve as on kernel TCP" {
	vs_kernel vfork 7715 vfork 3 1
}

# many_pools NS PORT: a taker in a pool of its own on node A that takes
# connections from one giver and a listener from another (two more pools),
# and serves them itself, in forked children and in programs they exec;
# the client in NS (node B, or node A for the same-node path); on kernel
# TCP, then on rshare
many_pools() {
	local ns=$1 port=$2 pre p po out all taker
	PD=$RS_BIN/pass-descriptors
	for pre in "" --rshare; do
		p=$port
		[[ -n $pre ]] && p=$((port + 10))
		po=$((p + 2))
		rs_bg "many-take-$p" "$NS_A" $pre "$PD" take-many "$RS_TMP/u$p" 2 "$po"
		rs_wait_ready "many-take-$p"
		rs_bg "many-g1-$p" "$NS_A" $pre "$PD" serve unrelated "$p" 3 "$RS_TMP/u$p"
		rs_wait_ready "many-g1-$p"
		rs_bg "many-g2-$p" "$NS_A" $pre "$PD" serve listener $((p + 1)) 3 "$RS_TMP/u$p"
		rs_wait_ready "many-g2-$p"
		all=
		for q in "$p 3 2" "$((p + 1)) 3 1" "$po 1 1"; do
			out=$(RS_TIMEOUT=60 rs_exec "$ns" $pre "$PD" client $ADDR_A $q 2>>"$RS_TMP/many-cli-$p.err") || true
			all+="$out;"
			# the taker, still up, holds sockets in three pools
			[[ -n $pre && $q == "$((p + 1))"* ]] && rs_stat "$NS_A" >"$RS_TMP/statA-many.json"
		done
		if [[ -z $pre ]]; then RS_TCP=$all; else RS_RS=$all; fi
	done
	echo "kernel TCP: $RS_TCP"
	[[ $RS_TCP == *"2: giver|after|taken ping 2|;"*"2: taker|taken ping 2|;0: own|taken ping 0|;" ]] ||
		rs_fail "kernel TCP: '$RS_TCP'"
	[[ $RS_RS == "$RS_TCP" ]] || rs_fail "rshare: '$RS_RS', kernel TCP: '$RS_TCP'"
	passes_done 4
	# one pool of its own, two joined for sockets passed to it (only the
	# taker joins any here)
	taker=$(sed -n 's/.*process \([0-9]*\): joins pool.*/\1/p' "$RS_TMP/hub-$NS_A.err" | sort | uniq -c)
	[[ $taker =~ ^\ *2\ ([0-9]+)$ ]] || rs_fail "one process should join two more pools: $taker"
	taker=${BASH_REMATCH[1]}
	rs_jq_check "the taker was in three pools" --slurpfile a "$RS_TMP/statA-many.json" --argjson t "$taker" '
		([$a[0].processes[] | select(.pid == $t) | .pool] | unique | length) as $n |
		fail($n == 3; "the taker was in \($n) pools, want 3")'
}

@test "a process with its own sockets takes connections and a listener from two other pools, forks and execs with them, as on kernel TCP" {
	many_pools "$NS_B" 7721
	took_link 7
}

@test "the same within one node (connections of three pools on the same-node path)" {
	many_pools "$NS_A" 7741
	rs_jq_check "the rshare run took the same-node path" --slurpfile a "$RS_TMP/statA.json" '
		fail($a[0].counters.local_connects >= 7; "local_connects \($a[0].counters.local_connects), want 7")'
}

@test "a receiver of another uid gets no access to the socket" {
	local p=7717 ud
	PD=$RS_BIN/pass-descriptors
	command -v setpriv >/dev/null || skip "needs setpriv"
	# a place the other uid may make its unix socket in
	ud=$(mktemp -d /tmp/rshare-uid.XXXXXX)
	chmod 777 "$ud"
	rs_bg take "$NS_A" setpriv --reuid=65534 --regid=65534 --clear-groups \
		env LD_PRELOAD="$RS_BUILD/librshare.so" "$PD" take "$ud/u" 1
	rs_wait_ready take
	rs_bg srv "$NS_A" --rshare "$PD" serve unrelated $p 1 "$ud/u"
	rs_wait_ready srv
	out=$(RS_TIMEOUT=30 rs_exec "$NS_B" --rshare "$PD" client $ADDR_A $p 1 2 2>&1) || true
	echo "$out"
	# the giver closed: EOF, or a reset when the ping came after the close
	[[ $out == "0: giver|after|" || $out == *"reset by peer"* ]] || rs_fail "client: '$out'"
	rs_wait_file "$RS_TMP/take.err" 'Transport endpoint is not connected' 1 10
	rm -rf "$ud"
	! grep -q 'joins pool' "$RS_TMP/hub-$NS_A.err" || rs_fail "a process of another uid joined the pool"
}

#!/usr/bin/env bats
# The differential test: randomized socket programs (tests/diff-stream.c,
# one per seed: several processes and forked children, blocking and
# nonblocking sockets with poll, select and epoll, writes of 1 B to 4 MiB
# and writes before reads, server-speaks-first, half-close, close with
# unread data, SO_LINGER 0, SIGALRM during a blocking read) run once on
# kernel TCP and once on rshare, and must print the same transcript: the
# same bytes, in order, the same EOFs and the same errno values.  On
# rshare both across two nodes (a soft link) and within one node (the
# same-node path); the stat of the rshare run proves that its connections
# took rshare.  Across nodes once more with each side's connections in
# threads of one process (-T) instead of forked children, so that threads
# close, accept and wait at once.  And with more of the socket calls (-X:
# recv MSG_PEEK and MSG_WAITALL, readv, recvmsg, writev, sendmsg, send
# MSG_DONTWAIT, edge-triggered epoll drained to EAGAIN, SO_RCVTIMEO, a
# SIGALRM handler that leaves a blocking read with siglongjmp, the
# poll events of FIN and reset, SO_ERROR, the read and the write after a
# reset), across nodes and within one, and across nodes in threads too
# (-T -X: a thread's handler jumps out of its own read).  DIFF_SEEDS sets the seeds (default:
# 1 to 8, and 9 to 11 in the sanitizer pass, so that one run of the suite
# tries 11 programs; plus every seed kept in tests/diff/regressions; each
# seed once).
# waits: alarms, SO_RCVTIMEO and sleeps of the generated programs, a third of its time on a CPU (tests/run runs it beside the others)

load lib

setup() {
	rs_require diff-stream
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

SEEDS_DEFAULT="1 2 3 4 5 6 7 8"
[[ ${RSHARE_SAN_PASS:-0} != 1 ]] || SEEDS_DEFAULT="9 10 11"

seeds() {
	local s=${DIFF_SEEDS:-$SEEDS_DEFAULT}
	if [[ -z ${DIFF_SEEDS:-} && -f $BATS_TEST_DIRNAME/diff/regressions ]]; then
		s="$s $(sed 's/#.*//' "$BATS_TEST_DIRNAME/diff/regressions" | tr '\n' ' ')"
	fi
	# each once: a regression seed may be among the default ones
	tr -s ' ' '\n' <<<"$s" | awk 'NF && !seen[$1]++' | tr '\n' ' '
}

# run_seed NAME SEED SERVER_NS CLIENT_NS ADDR PORT [--rshare]: the sorted
# transcript of both sides in $RS_TMP/NAME.txt (DIFF_T: diff-stream's
# flags, -T in threads, -X more calls)
run_seed() {
	local name=$1 seed=$2 sns=$3 cns=$4 addr=$5 port=$6 pre=${7:-}
	rs_bg "$name-srv" "$sns" $pre "$RS_BIN/diff-stream" ${DIFF_T:-} -s "$seed" "$port"
	rs_wait_ready "$name-srv"
	RS_TIMEOUT=120 rs_exec "$cns" $pre "$RS_BIN/diff-stream" ${DIFF_T:-} -c "$seed" "$addr" "$port" \
		>"$RS_TMP/$name-cli.out" 2>"$RS_TMP/$name-cli.err" || true
	rs_wait_pid "$RS_LASTPID" 30 || true
	grep -hv '^ready$' "$RS_TMP/$name-srv.out" "$RS_TMP/$name-cli.out" | sort >"$RS_TMP/$name.txt"
}

# compare SEED KERNEL RSHARE: fail with the program and the difference
compare() {
	local seed=$1 a=$RS_TMP/$2.txt b=$RS_TMP/$3.txt
	if ! diff -u "$a" "$b" >"$RS_TMP/diff-$seed-$3"; then
		echo "seed $seed: the program" >&2
		"$RS_BIN/diff-stream" ${DIFF_T:-} -p "$seed" >&2
		echo "seed $seed: kernel TCP (-) against rshare (+)" >&2
		head -n 40 "$RS_TMP/diff-$seed-$3" >&2
		return 1
	fi
	[[ -s $a ]] || { echo "seed $seed: empty transcript" >&2; return 1; }
}

# all_seeds CLIENT_NS PORT: every seed on kernel TCP and under rshare, the
# server on node A; $failed the divergent seeds, $n their connections
all_seeds() {
	local seed port=$2
	failed=() n=0
	for seed in $(seeds); do
		port=$((port + 2))
		run_seed "k$seed" "$seed" "$NS_A" "$1" $ADDR_A $port
		run_seed "r$seed" "$seed" "$NS_A" "$1" $ADDR_A $((port + 1)) --rshare
		compare "$seed" "k$seed" "r$seed" || failed+=("$seed")
		n=$((n + $("$RS_BIN/diff-stream" -p "$seed" | grep -c ' connect ')))
	done
}

# took_link: node B's link carried the $n connections of the rshare runs,
# none fell back to kernel TCP
took_link() {
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare runs took the link" --slurpfile b "$RS_TMP/statB.json" --argjson n $n '
		$b[0] as $B |
		fail(($B.links[0].connections_total // 0) >= $n; "B link carried \($B.links[0].connections_total) connections, want \($n)"),
		fail($B.counters.fallback_connects == 0; "fallback_connects \($B.counters.fallback_connects)")'
}

# took_local: node A's same-node path carried the $n connections of the
# rshare runs
took_local() {
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_jq_check "the rshare runs took the same-node path" --slurpfile a "$RS_TMP/statA.json" --argjson n $n '
		$a[0] as $A |
		fail($A.counters.local_connects >= $n; "local_connects \($A.counters.local_connects), want \($n)")'
}

verdict() {
	echo "# seeds $(seeds | wc -w), connections $n, divergent: ${failed[*]:-none}" >&3
	((${#failed[@]} == 0)) || rs_fail "divergent seeds: ${failed[*]}"
}

@test "differential: generated programs do on rshare across nodes what they do on kernel TCP" {
	local failed n
	all_seeds "$NS_B" 7300
	took_link
	verdict
}

@test "differential: generated programs do on rshare within one node what they do on kernel TCP" {
	local failed n
	all_seeds "$NS_A" 7500
	took_local
	verdict
}

@test "differential: generated programs in threads do on rshare across nodes what they do on kernel TCP" {
	local failed n DIFF_T=-T
	all_seeds "$NS_B" 7700
	took_link
	verdict
}

@test "differential: generated programs with more socket calls do on rshare across nodes what they do on kernel TCP" {
	local failed n DIFF_T=-X
	[[ ${RSHARE_SAN_PASS:-0} != 1 ]] || skip "the main pass runs it"
	all_seeds "$NS_B" 7900
	took_link
	verdict
}

@test "differential: generated programs with more socket calls do on rshare within one node what they do on kernel TCP" {
	local failed n DIFF_T=-X
	[[ ${RSHARE_SAN_PASS:-0} != 1 ]] || skip "the main pass runs it"
	all_seeds "$NS_A" 8100
	took_local
	verdict
}

@test "differential: generated programs in threads with more socket calls do on rshare across nodes what they do on kernel TCP" {
	local failed n DIFF_T="-T -X"
	[[ ${RSHARE_SAN_PASS:-0} != 1 ]] || skip "the main pass runs it"
	all_seeds "$NS_B" 8100
	took_link
	verdict
}

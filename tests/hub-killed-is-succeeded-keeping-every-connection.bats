#!/usr/bin/env bats
# SIGKILL of a node's hub process (`hub_pid` in `rshare stat`) leaves the
# node's connections as a daemon's death leaves kernel TCP's: they go on.
# rshared's main process (the warden, its pid `pid`) shares the dead hub's
# memory and descriptors; it drops the hub's links as lost and starts a
# new hub process on the same records (core/hub/warden.c).  Streams on one
# node and across nodes, every byte verified, through two kills of both
# hubs; streams through a hub killed the moment a read of its soft link
# returns (gdb), the bytes it read not yet counted; a connection whose
# last bytes and FIN the peer's kernel took while its hub was stopped, and
# which ended on our side, that hub then killed; a connection reset
# (SO_LINGER 0) right after its last bytes while its own hub was stopped,
# that hub then killed: the bytes, then the reset, reach the peer once the
# link is back; idle connections and a blocked recv; the differential
# tester's
# generated programs with a hub killed during each, their transcripts
# those of kernel TCP.  Killing rshared itself (the warden) still ends the
# node's connections: tests/hub-killed-blocked-calls-return.bats.  (Soft
# links; a hub on verbs killed: tests/vm/verbs-suite.sh, section 4.)
# waits: hubs killed and succeeded, alarms of the generated programs, half of both cores on average (tests/run runs it beside the others)

load lib
load handover

setup() {
	rs_require echo-server echo-client diff-stream
	export RSHARE_TRANSPORT=soft # the links these tests cut are soft ones, on any host
	rs_setup
	rs_two_nodes nohubs
	rs_hub_start "$NS_A"
	rs_hub_start "$NS_B"
	[[ $(rs_stat "$NS_A" | jq '.pid != .hub_pid') == true ]] || skip "rshared runs without a warden in this build"
}

teardown() {
	rs_teardown
}

# kill_hub NS: SIGKILL of NS's hub process, and wait for the next one to answer
kill_hub() {
	local old
	old=$(rs_stat "$1" | jq .hub_pid)
	kill -KILL "$old" || rs_fail "no hub process $old in $1"
	rs_retry 10 new_hub "$1" "$old" || rs_fail "no new hub in $1 after $old was killed"
}

# new_hub NS OLD: NS's hub process answers, and it is not OLD
new_hub() {
	local p
	p=$(rs_stat "$1" 2>/dev/null | jq .hub_pid) && [[ $p =~ ^[0-9]+$ && $p != "$2" ]]
}

kill_both() {
	kill_hub "$NS_A"
	kill_hub "$NS_B"
}

@test "streams on one node and across nodes go on through two SIGKILLs of both hubs, every byte verified, as on kernel TCP" {
	local pa pb
	pa=$(rs_stat "$NS_A" | jq .pid)
	pb=$(rs_stat "$NS_B" | jq .pid)
	streams_through "hubs killed" 7771 kill_both
	rs_jq_check "both hubs were succeeded twice under the same rshared, and the streams resumed" \
		--slurpfile a "$RS_TMP/statA.json" --slurpfile b "$RS_TMP/statB.json" --argjson pa "$pa" --argjson pb "$pb" '
		$a[0] as $A | $b[0] as $B |
		fail($A.pid == $pa and $B.pid == $pb; "pids \($A.pid) \($B.pid), were \($pa) \($pb)"),
		fail($A.counters.successions == 2 and $B.counters.successions == 2;
		     "successions A \($A.counters.successions) B \($B.counters.successions)"),
		fail($A.counters.conns_resumed >= 4 and $B.counters.conns_resumed >= 4;
		     "conns_resumed A \($A.counters.conns_resumed) B \($B.counters.conns_resumed)"),
		fail($A.counters.local_connects >= 4; "local_connects A \($A.counters.local_connects)"),
		fail($A.counters.fallback_connects == 0 and $B.counters.fallback_connects == 0;
		     "fallback_connects A \($A.counters.fallback_connects) B \($B.counters.fallback_connects)")'
	grep -q "died of signal 9 (Killed): a new one takes over its records" "$RS_TMP/hub-$NS_A.err" ||
		rs_fail "A's hub did not log the succession"
}

# kill_after_read [BREAK]: A's hub killed (gdb) the moment a recv of its
# soft link returns (or the call BREAK names): SIGKILL ends a process on
# its way out of a system call, so the bytes that recv took from the
# kernel are in the hub's buffer, not yet counted; its successor must
# find them (once)
kill_after_read() {
	local p
	[[ -e $RS_TMP/killed ]] && return 0
	touch "$RS_TMP/killed"
	p=$(rs_stat "$NS_A" | jq .hub_pid)
	timeout 60 gdb -q -p "$p" -batch -ex "set confirm off" -ex "break ${1:-recv}" -ex continue -ex finish -ex kill \
		>"$RS_TMP/gdb.log" 2>&1 || rs_fail "gdb: $(tail -n 5 "$RS_TMP/gdb.log")"
	rs_retry 10 new_hub "$NS_A" "$p" || rs_fail "no new hub in A after $p was killed"
}

# read_taken: the bytes the read gdb stopped in returned were found by the
# successor (a read that took none says nothing)
read_taken() {
	local n
	n=$(sed -n 's/^Value returned is .* = \([0-9-]*\)$/\1/p' "$RS_TMP/gdb.log" | head -n 1)
	echo "# the read returned ${n:-?} bytes; $(grep -ho 'link [0-9]*: [0-9]* bytes read by a hub that died.*' "$RS_TMP/hub-$NS_A.err")" >&3
	if ((${n:-0} > 0)); then
		grep -q ": $n bytes read by a hub that died before it counted them" "$RS_TMP/hub-$NS_A.err" ||
			rs_fail "the successor did not take the $n bytes"
	fi
}

@test "a hub killed as a read of its soft link returns goes on with the bytes it read and had not counted, every byte verified, as on kernel TCP" {
	command -v gdb >/dev/null || skip "no gdb"
	streams_through "a hub killed as a read returned" 7775 kill_after_read
	read_taken
}

# The large writes of the streams (256 KiB messages, in writes of 64 KiB)
# are read straight into their rings, in a recvmsg of MSG_DONTWAIT alone
# (the hub's other recvmsg, of its processes' requests, asks for
# MSG_CMSG_CLOEXEC too): the bytes are in a ring, not in the buffer
@test "a hub killed as a read of its soft link straight into a ring returns goes on with those bytes, every byte verified, as on kernel TCP" {
	command -v gdb >/dev/null || skip "no gdb"
	streams_through "a hub killed as a read into a ring returned" 7783 kill_after_read "recvmsg if \$rdx == 0x40"
	read_taken
	grep -q "bytes read by a hub that died before it counted them" "$RS_TMP/hub-$NS_A.err" ||
		rs_fail "the read into a ring took no bytes: $(tail -n 5 "$RS_TMP/gdb.log")"
}

# last_bytes NAME PORT [--rshare [CMD ARGS...]]: a client on B sends a
# line and shuts its side down; the server on A reads to EOF, then, once
# CMD ran (the file NAME.go), sends its last bytes and closes (with
# LAST_CLOSE=linger0, under SO_LINGER 0: a reset); the client's
# transcript: what it read, and how its reads ended
last_bytes() {
	local name=$1 port=$2 pre=
	shift 2
	[[ ${1:-} != --rshare ]] || { pre=--rshare; shift; }
	rs_bg "$name-srv" "$NS_A" $pre python3 -c '
import os, socket, struct, sys, time
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", int(sys.argv[1]))); l.listen(1); print("ready", flush=True)
c, _ = l.accept()
while c.recv(4096): pass
print("eof", flush=True)
for _ in range(600):
    if os.path.exists(sys.argv[2]): break
    time.sleep(0.05)
c.sendall(b"last bytes\n")
if sys.argv[3] == "linger0":
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
c.close(); print("closed", flush=True)' "$port" "$RS_TMP/$name.go" "${LAST_CLOSE:-fin}"
	rs_wait_ready "$name-srv"
	rs_bg "$name-cli" "$NS_B" $pre python3 -c '
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
c.sendall(b"hello\n"); c.shutdown(socket.SHUT_WR)
got = b""
try:
    while True:
        b = c.recv(4096)
        if not b: print("got %r then EOF" % got); break
        got += b
except OSError as e: print("got %r then %s" % (got, e.strerror))' $ADDR_A "$port"
	rs_wait_file "$RS_TMP/$name-srv.out" '^eof$' 1 30 || rs_fail "$name: the server did not see EOF"
	(($# == 0)) || "$@"
	touch "$RS_TMP/$name.go"
	rs_wait_pid "$RS_LASTPID" 60 || true
	cat "$RS_TMP/$name-cli.out"
}

# as_on_kernel WANT K R ERR: kernel TCP's transcript K is WANT, and
# rshare's R is K (ERR: the rshare client's errors, shown when not)
as_on_kernel() {
	echo "kernel TCP: $2"
	echo "rshare: $3"
	[[ $2 == "$1" ]] || rs_fail "kernel TCP: $2"
	[[ $3 == "$2" ]] || rs_fail "rshare: $3 ($(cat "$4"))"
}

# stopped_then_killed: B's hub process stopped while A's server sends its
# last bytes and FIN (B's kernel takes and acknowledges them, so A's side
# ends), then killed: its successor finds them in the kernel, and asks A
# for the connection again (RESUME), which A no longer holds
stopped_then_killed() {
	local p
	p=$(rs_stat "$NS_B" | jq .hub_pid)
	kill -STOP "$p"
	touch "$RS_TMP/rshare-last.go"
	rs_wait_file "$RS_TMP/rshare-last-srv.out" '^closed$' 1 30 || rs_fail "A's server did not close"
	sleep 1 # A's FIN acknowledged by B's kernel: A frees the connection
	kill -KILL "$p"
	rs_retry 10 new_hub "$NS_B" "$p" || rs_fail "no new hub in B after $p was killed"
}

@test "a connection that ended as the peer's hub died: its reader gets the last bytes and EOF, as on kernel TCP" {
	local k r
	k=$(last_bytes kernel-last 7776)
	r=$(last_bytes rshare-last 7777 --rshare stopped_then_killed)
	as_on_kernel "got b'last bytes\\n' then EOF" "$k" "$r" "$RS_TMP/rshare-last-cli.err"
	rs_stat "$NS_B" | jq -e '.counters.successions == 1' >/dev/null || rs_fail "B: $(rs_stat "$NS_B" | jq -c .counters)"
}

# closed_in_the_outage: A's hub process stopped while A's server sends
# its last bytes and closes, then killed: its successor has no link to B
# when it takes the close (the bytes not sent yet), and sends them, then
# the close, over the new one
closed_in_the_outage() {
	local p
	p=$(rs_stat "$NS_A" | jq .hub_pid)
	kill -STOP "$p"
	touch "$RS_TMP/rshare-reset.go"
	sleep 1 # the server wrote to its ring, and asked for the close
	kill -KILL "$p"
	rs_retry 10 new_hub "$NS_A" "$p" || rs_fail "no new hub in A after $p was killed"
}

@test "bytes sent, then a reset (SO_LINGER 0), as the hub died: the peer's reader gets the bytes, then ECONNRESET, as on kernel TCP" {
	local k r
	k=$(LAST_CLOSE=linger0 last_bytes kernel-reset 7778)
	r=$(LAST_CLOSE=linger0 last_bytes rshare-reset 7779 --rshare closed_in_the_outage)
	as_on_kernel "got b'last bytes\\n' then Connection reset by peer" "$k" "$r" "$RS_TMP/rshare-reset-cli.err"
	rs_stat "$NS_A" | jq -e '.counters.successions == 1' >/dev/null || rs_fail "A: $(rs_stat "$NS_A" | jq -c .counters)"
}

@test "idle connections and a blocked recv go on through a SIGKILL of both hubs, as on kernel TCP" {
	local k r
	k=$(held kernel-held 7773)
	r=$(held rshare-held 7774 --rshare kill_both)
	as_on_kernel "$HELD_KERNEL" "$k" "$r" "$RS_TMP/rshare-held.err"
	rs_stat "$NS_B" | jq -e '.counters.successions == 1 and .counters.conns_resumed >= 4' >/dev/null ||
		rs_fail "B: $(rs_stat "$NS_B" | jq -c .counters)"
}

# one_seed NAME SEED CLIENT_NS PORT [--rshare [KILL_NS]]: diff-stream's
# SEED, the server on A; with KILL_NS, that node's hub is killed once it
# holds an established connection; the sorted transcript in
# $RS_TMP/NAME.txt (DIFF_T: diff-stream's flags)
one_seed() {
	local name=$1 seed=$2 cns=$3 port=$4 pre=${5:-} kns=${6:-} cp hp
	[[ -z $kns ]] || hp=$(rs_stat "$kns" | jq .hub_pid)
	rs_bg "$name-srv" "$NS_A" $pre "$RS_BIN/diff-stream" ${DIFF_T:-} -s "$seed" "$port"
	rs_wait_ready "$name-srv"
	rs_bg "$name-cli" "$cns" $pre "$RS_BIN/diff-stream" ${DIFF_T:-} -c "$seed" $ADDR_A "$port"
	cp=$RS_LASTPID
	if [[ -n $kns ]]; then
		# at its first established connection (or, for a program that
		# ends first, after it)
		while kill -0 "$cp" 2>/dev/null &&
			[[ $(rs_stat "$kns" | jq '[.sockets[] | select(.state == "established")] | length') -eq 0 ]]; do
			sleep 0.02
		done
		kill -0 "$cp" 2>/dev/null && under=$((under + 1))
		kill -KILL "$hp"
		# the warden gives up on a hub killed three times in a row
		# within a second of taking over (a crash loop): not that
		sleep 1.1
	fi
	rs_wait_pid "$cp" 120 || true
	rs_wait_pid "$(cat "$RS_TMP/$name-srv.pid")" 30 || true
	grep -hv '^ready$' "$RS_TMP/$name-srv.out" "$RS_TMP/$name-cli.out" | sort >"$RS_TMP/$name.txt"
}

# killed_seeds CLIENT_NS PORT NS...: seeds 1 to 6 (KILL_SEEDS) on kernel
# TCP and on rshare, the hub of the next NS (in turn) killed in each rshare
# run; the divergent seeds in $failed, the kills while the program ran in
# $under, the kills of each NS's hub in $kills_0, $kills_1
killed_seeds() {
	local cns=$1 port=$2 seed i=0 kns
	shift 2
	local nss=("$@")
	failed=() under=0 kills_0=0 kills_1=0
	for seed in ${KILL_SEEDS:-1 2 3 4 5 6}; do
		port=$((port + 2))
		((i % ${#nss[@]} == 0)) && kills_0=$((kills_0 + 1)) || kills_1=$((kills_1 + 1))
		kns=${nss[i++ % ${#nss[@]}]}
		one_seed "k$seed" "$seed" "$cns" "$port"
		one_seed "r$seed" "$seed" "$cns" $((port + 1)) --rshare "$kns"
		if ! diff -u "$RS_TMP/k$seed.txt" "$RS_TMP/r$seed.txt" >"$RS_TMP/diff-$seed"; then
			# the difference first (the program follows from the seed)
			echo "seed $seed (the hub of $kns killed): kernel TCP (-) against rshare (+)" >&2
			grep -E '^[-+][^-+]' "$RS_TMP/diff-$seed" | head -n 20 >&2
			echo "rshare's stderr: $(cat "$RS_TMP/r$seed-srv.err" "$RS_TMP/r$seed-cli.err" 2>/dev/null | head -c 600)" >&2
			echo "the program of seed $seed:" >&2
			"$RS_BIN/diff-stream" ${DIFF_T:-} -p "$seed" >&2
			failed+=("$seed")
		fi
		[[ -s $RS_TMP/k$seed.txt ]] || failed+=("$seed-empty")
	done
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	echo "# seeds ${KILL_SEEDS:-1 to 6}, a hub killed in each ($under while the program ran); A: $(jq -c '.counters | {successions, conns_resumed, local_connects}' "$RS_TMP/statA.json"), B: $(jq -c '.counters | {successions, conns_resumed}' "$RS_TMP/statB.json"); divergent: ${failed[*]:-none}" >&3
}

@test "differential: generated programs do on rshare across nodes, their hubs killed in the middle, what they do on kernel TCP" {
	local failed under kills_0 kills_1
	killed_seeds "$NS_B" 7800 "$NS_A" "$NS_B"
	rs_jq_check "every kill was succeeded, connections resumed, none fell back to kernel TCP" \
		--slurpfile a "$RS_TMP/statA.json" --slurpfile b "$RS_TMP/statB.json" \
		--argjson ka "$kills_0" --argjson kb "$kills_1" '
		$a[0] as $A | $b[0] as $B |
		fail($A.counters.successions == $ka and $B.counters.successions == $kb;
		     "successions A \($A.counters.successions) B \($B.counters.successions)"),
		fail($A.counters.conns_resumed + $B.counters.conns_resumed >= 3;
		     "conns_resumed A \($A.counters.conns_resumed) B \($B.counters.conns_resumed)"),
		fail($B.counters.fallback_connects == 0; "fallback_connects \($B.counters.fallback_connects)")'
	((${#failed[@]} == 0)) || rs_fail "divergent seeds: ${failed[*]}"
}

@test "differential: generated programs do on rshare within one node, its hub killed in the middle, what they do on kernel TCP" {
	local failed under kills_0 kills_1
	killed_seeds "$NS_A" 7900 "$NS_A"
	rs_jq_check "every kill was succeeded, the runs took the same-node path" --slurpfile a "$RS_TMP/statA.json" \
		--argjson ka "$kills_0" '
		$a[0] as $A |
		fail($A.counters.successions == $ka; "successions A \($A.counters.successions), want \($ka)"),
		fail($A.counters.local_connects >= 6; "local_connects A \($A.counters.local_connects)"),
		fail($A.counters.fallback_connects == 0; "fallback_connects \($A.counters.fallback_connects)")'
	((${#failed[@]} == 0)) || rs_fail "divergent seeds: ${failed[*]}"
}

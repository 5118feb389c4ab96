#!/usr/bin/env bats
# `rshare hub restart` hands a node to a new hub without a reset, as a
# daemon's restart leaves kernel TCP's connections alone: the new hub runs
# in the same process (the pid stays), takes the records of the old one,
# and the connections go on, every byte verified: those on the node (their
# rings are in shared memory, no link) and those across nodes (their link
# is dropped and made again, and each side resumes from what the other
# placed, as after an outage).  The same clients on kernel TCP print the
# same summaries.  A newer rshared put in the hub's place (renamed over
# its program, as a package upgrade does) takes over the same way; one
# whose records differ is refused, and the hub goes on as it was.

load lib

setup() {
	rs_require echo-server echo-client
	rs_setup
	rs_two_nodes nohubs
}

teardown() {
	rs_teardown
}

summary() {
	sed -n 's/^echo-client: \(conns=[0-9]* verified=[0-9]* resets=[0-9]* errors=[0-9]*\).*/\1/p' "$RS_TMP/$1.out"
}

stall_of() {
	sed -n 's/^echo-client: .* stall_ms=\([0-9]*\).*/\1/p' "$RS_TMP/$1.out"
}

# restart NS: `rshare hub restart` there, which must say that it did
restart() {
	local out
	out=$(ip netns exec "$1" "$RSHARE" hub restart 2>&1) || rs_fail "rshare hub restart in $1: $out"
	[[ $out == "hub restarted: "* ]] || rs_fail "rshare hub restart in $1 said: $out"
}

# streams NAME PORT [--rshare]: an echo server on A, 4 streams from A and
# 4 from B for 7 s
streams() {
	local name=$1 port=$2 pre=
	shift 2
	if [[ ${1:-} == --rshare ]]; then
		pre=--rshare
		shift
	fi
	rs_bg "$name-srv" "$NS_A" $pre "$RS_BIN/echo-server" -w 2 "$port"
	rs_wait_ready "$name-srv"
	rs_bg "$name-a" "$NS_A" $pre "$RS_BIN/echo-client" -S -c 4 -s 21 -t 7 -m 262144 $ADDR_A "$port"
	rs_bg "$name-b" "$NS_B" $pre "$RS_BIN/echo-client" -S -c 4 -s 22 -t 7 -m 262144 $ADDR_A "$port"
}

@test "streams on one node and across nodes go on through two restarts of both hubs, every byte verified, as on kernel TCP" {
	local pa pb ok="conns=4 verified=4 resets=0 errors=0"
	rs_hub_start "$NS_A"
	rs_hub_start "$NS_B"
	pa=$(rs_stat "$NS_A" | jq .pid)
	pb=$(rs_stat "$NS_B" | jq .pid)
	# both at once: kernel TCP's streams see no restart
	streams kernel 7761
	streams rshare 7762 --rshare
	sleep 2
	restart "$NS_A"
	restart "$NS_B"
	sleep 2
	restart "$NS_A"
	restart "$NS_B"
	for n in kernel-a kernel-b rshare-a rshare-b; do
		rs_wait_file "$RS_TMP/$n.out" '^echo-client:' 1 60
	done
	echo "kernel TCP: $(summary kernel-a); $(summary kernel-b)"
	echo "rshare: $(summary rshare-a); $(summary rshare-b)"
	echo "# hub restarts, longest pause: same node $(stall_of rshare-a) ms (kernel TCP $(stall_of kernel-a) ms), across nodes $(stall_of rshare-b) ms (kernel TCP $(stall_of kernel-b) ms)" >&3
	[[ $(summary kernel-a) == "$ok" && $(summary kernel-b) == "$ok" ]] || rs_fail "kernel TCP: $(summary kernel-a); $(summary kernel-b)"
	[[ $(summary rshare-a) == "$ok" ]] || rs_fail "rshare, same node: $(summary rshare-a) $(cat "$RS_TMP/rshare-a.err")"
	[[ $(summary rshare-b) == "$ok" ]] || rs_fail "rshare, across nodes: $(summary rshare-b) $(cat "$RS_TMP/rshare-b.err")"
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "both hubs restarted twice in their own process, and the streams resumed" \
		--slurpfile a "$RS_TMP/statA.json" --slurpfile b "$RS_TMP/statB.json" --argjson pa "$pa" --argjson pb "$pb" '
		$a[0] as $A | $b[0] as $B |
		fail($A.pid == $pa and $B.pid == $pb; "pids \($A.pid) \($B.pid), were \($pa) \($pb)"),
		fail($A.counters.restarts == 2 and $B.counters.restarts == 2;
		     "restarts A \($A.counters.restarts) B \($B.counters.restarts)"),
		fail($A.counters.conns_resumed >= 4 and $B.counters.conns_resumed >= 4;
		     "conns_resumed A \($A.counters.conns_resumed) B \($B.counters.conns_resumed)"),
		fail($A.counters.local_connects >= 4; "local_connects A \($A.counters.local_connects)"),
		fail($A.counters.fallback_connects == 0 and $B.counters.fallback_connects == 0;
		     "fallback_connects A \($A.counters.fallback_connects) B \($B.counters.fallback_connects)")'
}

# held NAME PORT [--rshare] [RESTARTS...]: a program on B holds 3
# connections to A's echo server, each echoed once, and one more blocked
# in recv; the hubs named restart; then each is echoed once more
held() {
	local name=$1 port=$2 pre=
	shift 2
	if [[ ${1:-} == --rshare ]]; then
		pre=--rshare
		shift
	fi
	rs_bg "$name-srv" "$NS_A" $pre "$RS_BIN/echo-server" -w 2 "$port"
	rs_wait_ready "$name-srv"
	rs_bg "$name" "$NS_B" $pre python3 -u -c '
import os, socket, sys, threading, time
host, port, release = sys.argv[1], int(sys.argv[2]), sys.argv[3]
conns = [socket.create_connection((host, port)) for i in range(4)]
def echo(c, word):
    c.settimeout(60)
    c.sendall(word + b"\n")
    got = b""
    while not got.endswith(b"\n"):
        b = c.recv(100)
        if not b:
            return "EOF"
        got += b
    return got.decode().strip()
for i, c in enumerate(conns):
    print(echo(c, b"before %d" % i))
got = []
t = threading.Thread(target=lambda: got.append(conns[3].recv(100)))
t.start()
print("held")
while not os.path.exists(release):
    time.sleep(0.1)
for i, c in enumerate(conns[:3]):
    print(echo(c, b"after %d" % i))
conns[2].sendall(b"")
conns[3].sendall(b"wake\n")
t.join(30)
print("blocked recv got %r" % got)
print("end")' $ADDR_A "$port" "$RS_TMP/$name.release"
	rs_wait_file "$RS_TMP/$name.out" '^held$' 1 30
	for ns in "$@"; do restart "$ns"; done
	sleep 1
	touch "$RS_TMP/$name.release"
	rs_wait_file "$RS_TMP/$name.out" '^end$' 1 90
	tr '\n' '|' <"$RS_TMP/$name.out"
}

@test "idle connections and a blocked recv go on through restarts of both hubs, as on kernel TCP" {
	local k r
	rs_hub_start "$NS_A"
	rs_hub_start "$NS_B"
	k=$(held kernel-held 7763)
	r=$(held rshare-held 7764 --rshare "$NS_A" "$NS_B")
	echo "kernel TCP: $k"
	echo "rshare: $r"
	[[ $k == "before 0|before 1|before 2|before 3|held|after 0|after 1|after 2|blocked recv got [b'wake\n']|end|" ]] ||
		rs_fail "kernel TCP: $k"
	[[ $r == "$k" ]] || rs_fail "rshare: $r ($(cat "$RS_TMP/rshare-held.err"))"
	rs_stat "$NS_B" | jq -e '.counters.restarts == 1 and .counters.conns_resumed >= 4' >/dev/null ||
		rs_fail "B: $(rs_stat "$NS_B" | jq -c .counters)"
}

@test "a newer rshared renamed over the hub's program takes over with every connection; one whose records differ is refused and the hub goes on" {
	local bin=$RS_TMP/sbin pid out ok="conns=4 verified=4 resets=0 errors=0"
	mkdir -p "$bin"
	cp "$RSHARED" "$bin/rshared"
	RSHARED=$bin/rshared rs_hub_start "$NS_A"
	rs_hub_start "$NS_B"
	pid=$(rs_stat "$NS_A" | jq .pid)
	rs_bg up-srv "$NS_A" --rshare "$RS_BIN/echo-server" -w 2 7765
	rs_wait_ready up-srv
	rs_bg up-a "$NS_A" --rshare "$RS_BIN/echo-client" -S -c 4 -s 23 -t 6 -m 262144 $ADDR_A 7765
	rs_bg up-b "$NS_B" --rshare "$RS_BIN/echo-client" -S -c 4 -s 24 -t 6 -m 262144 $ADDR_A 7765
	sleep 2
	# records laid out otherwise: refused, and said why
	printf '#!/bin/sh\necho 0000000000000001\n' >"$bin/rshared.new"
	chmod +x "$bin/rshared.new"
	mv "$bin/rshared.new" "$bin/rshared"
	out=$(ip netns exec "$NS_A" "$RSHARE" hub restart 2>&1) && rs_fail "a hub with other records took over: $out"
	echo "refused: $out"
	[[ $out == *"keeps its records otherwise"* ]] || rs_fail "the refusal says: $out"
	sleep 1
	# the same records: a new program takes over
	cp "$RSHARED" "$bin/rshared.new"
	mv "$bin/rshared.new" "$bin/rshared"
	restart "$NS_A"
	rs_wait_file "$RS_TMP/up-a.out" '^echo-client:' 1 60
	rs_wait_file "$RS_TMP/up-b.out" '^echo-client:' 1 60
	[[ $(summary up-a) == "$ok" && $(summary up-b) == "$ok" ]] ||
		rs_fail "after the upgrade: $(summary up-a); $(summary up-b)"
	rs_stat "$NS_A" | jq -e --argjson p "$pid" '.pid == $p and .counters.restarts == 1 and
		.counters.restarts_refused == 1 and .counters.restart_refused == ""' >/dev/null ||
		rs_fail "A: $(rs_stat "$NS_A" | jq -c '[.pid, .counters]')"
	grep -q "restart refused: the new rshared keeps its records otherwise" "$RS_TMP/hub-$NS_A.err" ||
		rs_fail "the hub did not log the refusal"
}

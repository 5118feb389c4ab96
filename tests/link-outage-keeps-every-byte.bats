#!/usr/bin/env bats
# A 3 s outage of the wire between two nodes, in the middle of transfers,
# costs no connection: the same echo clients run through the same cut at
# once on kernel TCP (the reference) and on rshare (a soft link), and both
# verify every byte with no reset.  On rshare the hubs' stat proves that
# the connections ran over the one link and that it was never dropped; the
# link's transport retransmits what the cut lost (rshare.conf(5):
# link_timeout, 10 s by default).  With link_timeout 1 the same cut
# outlasts the link: it is lost, and its connections wait for a new one
# and go on over it (rshare-protocol(7), LINKS LOST), streams and idle
# connections alike, as on kernel TCP.
# waits: two 3 s cuts of the wire (tests/run runs it beside the others)

load lib
load handover # summary, stall_of

setup() {
	rs_require echo-server echo-client
	rs_setup
	rs_two_nodes nohubs
}

teardown() {
	rs_teardown
}

# start_run NAME PORT [--rshare]: echo clients from B to A's server for 10 s
start_run() {
	local name=$1 port=$2 pre=${3:-}
	rs_bg "$name-srv" "$NS_A" $pre "$RS_BIN/echo-server" -w 2 "$port"
	rs_wait_ready "$name-srv"
	rs_bg "$name" "$NS_B" $pre "$RS_BIN/echo-client" -S -c 4 -s 11 -t 10 -m 262144 $ADDR_A "$port"
}

# cut_runs KNAME KPORT RNAME RPORT: start_run on kernel TCP (KNAME, KPORT)
# and on rshare (RNAME, RPORT) at once, node B's interface down for 3 s
# after 3 s of them; their summaries in $K and $R
cut_runs() {
	start_run "$1" "$2"
	start_run "$3" "$4" --rshare
	sleep 3
	ip -n "$NS_B" link set "vb$RS_SUF" down
	sleep 3
	ip -n "$NS_B" link set "vb$RS_SUF" up
	rs_wait_file "$RS_TMP/$1.out" '^echo-client:' 1 90
	rs_wait_file "$RS_TMP/$3.out" '^echo-client:' 1 90
	K=$(summary "$1")
	R=$(summary "$3")
}

# resumed_on_both N: the hubs' stat says that a link was lost, that N
# connections went on on each side over a soft link, and none fell back
resumed_on_both() {
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the link was lost and the $1 connections resumed on both sides" --argjson n "$1" \
		--slurpfile a "$RS_TMP/statA.json" --slurpfile b "$RS_TMP/statB.json" '
		$a[0] as $A | $b[0] as $B |
		fail($A.counters.links_lost + $B.counters.links_lost >= 1;
		     "links_lost A \($A.counters.links_lost) B \($B.counters.links_lost)"),
		fail($A.counters.conns_resumed >= $n and $B.counters.conns_resumed >= $n;
		     "conns_resumed A \($A.counters.conns_resumed) B \($B.counters.conns_resumed)"),
		fail($A.counters.fallback_connects == 0 and $B.counters.fallback_connects == 0;
		     "fallback_connects A \($A.counters.fallback_connects) B \($B.counters.fallback_connects)"),
		fail([$B.links[] | select(.state == "up" and .transport == "soft")] | length >= 1;
		     "B has no soft link up")'
}

@test "a 3 s outage of the wire during transfers loses no connection and no byte, as on kernel TCP" {
	local k r
	rs_hub_start "$NS_A"
	rs_hub_start "$NS_B"
	cut_runs kernel 7711 rshare 7712
	k=$K r=$R
	echo "kernel TCP: $k; rshare: $r"
	# the pause the cut caused (the longest time a connection went without
	# an echoed byte), printed, never asserted on
	echo "# 3 s cut, longest pause: kernel TCP $(stall_of kernel) ms, rshare $(stall_of rshare) ms" >&3
	[[ $k == "conns=4 verified=4 resets=0 errors=0" ]] || rs_fail "kernel TCP: $k ($(cat "$RS_TMP/kernel.err"))"
	[[ $r == "$k" ]] || rs_fail "rshare: $r, kernel TCP: $k ($(cat "$RS_TMP/rshare.err"))"
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the connections ran over one soft link, never dropped" \
		--slurpfile a "$RS_TMP/statA.json" --slurpfile b "$RS_TMP/statB.json" '
		$a[0] as $A | $b[0] as $B |
		one_link($A; $B),
		fail(($B.links[0].connections_total // 0) >= 4; "B link connections_total \($B.links[0].connections_total)"),
		fail(($B.links[0].transport // "") == "soft"; "B link transport \($B.links[0].transport)"),
		fail($A.counters.links_dropped == 0 and $B.counters.links_dropped == 0;
		     "links_dropped A \($A.counters.links_dropped) B \($B.counters.links_dropped)"),
		fail($A.counters.fallback_connects == 0 and $B.counters.fallback_connects == 0;
		     "fallback_connects A \($A.counters.fallback_connects) B \($B.counters.fallback_connects)")'
}

@test "with link_timeout 1, the same outage loses the link and the streams go on over a new one, every byte verified, as on kernel TCP" {
	local k r
	rs_hub_start "$NS_A" env RSHARE_LINK_TIMEOUT=1
	rs_hub_start "$NS_B" env RSHARE_LINK_TIMEOUT=1
	cut_runs kernel-lost 7716 short 7713
	k=$K r=$R
	echo "kernel TCP: $k; rshare with link_timeout 1: $r"
	echo "# 3 s cut, link_timeout 1 s, longest pause: kernel TCP $(stall_of kernel-lost) ms, rshare $(stall_of short) ms" >&3
	[[ $k == "conns=4 verified=4 resets=0 errors=0" ]] || rs_fail "kernel TCP: $k"
	[[ $r == "$k" ]] || rs_fail "rshare: $r, kernel TCP: $k ($(cat "$RS_TMP/short.err"))"
	resumed_on_both 4
}

# idle_run NAME PORT [--rshare]: a program on B holds 3 connections to A's
# echo server, each echoed once; B's interface goes down for 3 s; then each
# connection is echoed once more.  Its transcript.
idle_run() {
	local name=$1 port=$2 pre=${3:-}
	rs_bg "$name-srv" "$NS_A" $pre "$RS_BIN/echo-server" -w 2 "$port"
	rs_wait_ready "$name-srv"
	rs_bg "$name" "$NS_B" $pre python3 -u -c '
import os, socket, sys, time
host, port, release = sys.argv[1], int(sys.argv[2]), sys.argv[3]
conns = [socket.create_connection((host, port)) for i in range(3)]
def echo(word):
    for i, c in enumerate(conns):
        c.settimeout(60)
        c.sendall(b"%s %d\n" % (word, i))
        got = b""
        try:
            while not got.endswith(b"\n"):
                b = c.recv(100)
                if not b:
                    break
                got += b
        except OSError as e:
            got = repr(e).encode()
        print(got.decode().strip())
echo(b"before")
print("held")
while not os.path.exists(release):
    time.sleep(0.1)
echo(b"after")
print("end")' $ADDR_A "$port" "$RS_TMP/$name.release"
	rs_wait_file "$RS_TMP/$name.out" '^held$' 1 30
	ip -n "$NS_B" link set "vb$RS_SUF" down
	sleep 3
	ip -n "$NS_B" link set "vb$RS_SUF" up
	touch "$RS_TMP/$name.release"
	rs_wait_file "$RS_TMP/$name.out" '^end$' 1 90
	tr '\n' '|' <"$RS_TMP/$name.out"
}

@test "with link_timeout 1, idle connections wait out the lost link and go on over a new one, as on kernel TCP" {
	local k r
	rs_hub_start "$NS_A" env RSHARE_LINK_TIMEOUT=1
	rs_hub_start "$NS_B" env RSHARE_LINK_TIMEOUT=1
	k=$(idle_run kernel-idle 7714)
	r=$(idle_run rshare-idle 7715 --rshare)
	echo "kernel TCP: $k"
	echo "rshare: $r"
	[[ $k == "before 0|before 1|before 2|held|after 0|after 1|after 2|end|" ]] || rs_fail "kernel TCP: $k"
	[[ $r == "$k" ]] || rs_fail "rshare: $r, kernel TCP: $k ($(cat "$RS_TMP/rshare-idle.err"))"
	resumed_on_both 3
}

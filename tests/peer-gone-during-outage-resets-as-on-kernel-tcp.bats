#!/usr/bin/env bats
# A peer that goes away during an outage is learnt of once the wire is
# back, as on kernel TCP: the clients on B stream to A's echo server, B's
# interface goes down for 3 s, and meanwhile A's server is killed (and, in
# the second test, A's hub too).  On kernel TCP, B's retransmissions after
# the cut meet A's RST: every connection is reset.  On rshare (link_timeout
# 1, so that the cut loses the link and the connections wait for a new
# one), the new link's RESUME meets a hub that no longer knows the sockets
# (RESET), or the node refuses the new link (no hub): every connection is
# reset too, at once, not after link_outage.
# waits: two cuts of the wire, and link timeouts (tests/run runs it beside the others)

load lib

setup() {
	rs_require echo-server echo-client
	rs_setup
	rs_two_nodes nohubs
}

teardown() {
	rs_teardown
}

# gone_run NAME PORT [--rshare] [--hub]: the clients' summary, and the
# seconds from the wire's return to their end
gone_run() {
	local name=$1 port=$2 pre= hub=0 t0
	[[ ${3:-} == --rshare ]] && pre=--rshare
	[[ ${4:-} == --hub ]] && hub=1
	rs_bg "$name-srv" "$NS_A" $pre "$RS_BIN/echo-server" -w 2 "$port"
	rs_wait_ready "$name-srv"
	rs_bg "$name" "$NS_B" $pre "$RS_BIN/echo-client" -r -c 4 -s 13 -t 60 -m 65536 $ADDR_A "$port"
	sleep 2
	ip -n "$NS_B" link set "vb$RS_SUF" down
	pkill -KILL -s "$(cat "$RS_TMP/$name-srv.pid")"
	((hub)) && pkill -KILL -s "$(cat "$RS_TMP/hub-$NS_A.pid")"
	sleep 3
	ip -n "$NS_B" link set "vb$RS_SUF" up
	t0=$SECONDS
	rs_wait_file "$RS_TMP/$name.out" '^echo-client:' 1 90
	sed -n 's/^echo-client: \(conns=[0-9]* verified=[0-9]* resets=[0-9]* errors=[0-9]*\).*/\1/p' "$RS_TMP/$name.out"
	echo "# $name: the clients ended $((SECONDS - t0)) s after the wire came back" >&3
}

@test "a server killed during an outage resets its connections once the wire is back, as on kernel TCP" {
	local k r
	rs_hub_start "$NS_A" env RSHARE_LINK_TIMEOUT=1
	rs_hub_start "$NS_B" env RSHARE_LINK_TIMEOUT=1
	k=$(gone_run kernel 7731)
	r=$(gone_run rshare 7732 --rshare)
	echo "kernel TCP: $k; rshare: $r"
	[[ $k == "conns=4 verified=0 resets=4 errors=0" ]] || rs_fail "kernel TCP: $k"
	[[ $r == "$k" ]] || rs_fail "rshare: $r, kernel TCP: $k ($(cat "$RS_TMP/rshare.err"))"
	rs_stat "$NS_B" | jq -e '.counters.links_lost >= 1 and .counters.conns_waiting == 0' >/dev/null ||
		rs_fail "B's counters: $(rs_stat "$NS_B" | jq -c .counters)"
}

@test "a node whose hub died during an outage refuses the new link, and the connections are reset at once" {
	local r
	rs_hub_start "$NS_A" env RSHARE_LINK_TIMEOUT=1
	rs_hub_start "$NS_B" env RSHARE_LINK_TIMEOUT=1
	r=$(gone_run rshare-hub 7733 --rshare --hub)
	echo "rshare, A's hub killed: $r"
	[[ $r == "conns=4 verified=0 resets=4 errors=0" ]] || rs_fail "rshare: $r ($(cat "$RS_TMP/rshare-hub.err"))"
	grep -q 'has no hub any more: [1-9]' "$RS_TMP/hub-$NS_B.err" || rs_fail "B did not log the refusal"
	rs_stat "$NS_B" | jq -e '.counters.links_lost >= 1 and .counters.conns_waiting == 0' >/dev/null ||
		rs_fail "B's counters: $(rs_stat "$NS_B" | jq -c .counters)"
}

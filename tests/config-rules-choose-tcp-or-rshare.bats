#!/usr/bin/env bats
# `use` rules of rshare.conf(5): a port the rules give to tcp carries its
# traffic on kernel TCP (ss sees it, the hubs never hear of it), another
# port on the same nodes goes over rshare (stat shows it on the link).
# Rules also choose by program name and by listen/connect.

load lib

setup() {
	rs_require echo-server echo-client
	rs_setup
	rs_two_nodes
	export RSHARE_CONF=$RS_TMP/rshare.conf
}

teardown() {
	rs_teardown
}

tcp_conns() { # tcp_conns NS FILTER
	ip netns exec "$1" ss -tnH state established "$2" | grep -c . || true
}

@test "rules: one port on kernel TCP, another on rshare" {
	local tport=7601 rport=7602
	cat >"$RSHARE_CONF" <<-CONF
	# replication-like traffic stays on TCP, both ends
	use tcp both * *:$tport
	use rshare both * *
	CONF
	rs_bg st "$NS_A" --rshare "$RS_BIN/echo-server" $tport
	rs_bg sr "$NS_A" --rshare "$RS_BIN/echo-server" $rport
	rs_wait_ready st
	rs_wait_ready sr
	rs_bg ct "$NS_B" --rshare "$RS_BIN/echo-client" -c 2 -n 8 -w "$RS_TMP/hold" $ADDR_A $tport
	rs_bg cr "$NS_B" --rshare "$RS_BIN/echo-client" -c 3 -n 8 -w "$RS_TMP/hold" $ADDR_A $rport
	rs_wait_file "$RS_TMP/ct.out" '^done$'
	rs_wait_file "$RS_TMP/cr.out" '^done$'
	grep -q 'verified=2 resets=0 errors=0' "$RS_TMP/ct.out"
	grep -q 'verified=3 resets=0 errors=0' "$RS_TMP/cr.out"
	[[ ! -s $RS_TMP/ct.err && ! -s $RS_TMP/cr.err ]]

	# kernel TCP carries the tcp port, not the rshare one
	[[ $(tcp_conns "$NS_A" "( sport = :$tport )") -eq 2 ]]
	[[ $(tcp_conns "$NS_B" "( dport = :$tport )") -eq 2 ]]
	[[ $(tcp_conns "$NS_A" "( sport = :$rport )") -eq 0 ]]
	[[ $(tcp_conns "$NS_B" "( dport = :$rport )") -eq 0 ]]

	rs_stat "$NS_A" >"$RS_TMP/a.json"
	rs_stat "$NS_B" >"$RS_TMP/b.json"
	rs_jq_check "tcp port unseen by the hubs, rshare port on the link" \
		--slurpfile a "$RS_TMP/a.json" --slurpfile b "$RS_TMP/b.json" \
		--argjson t $tport --argjson r $rport '
		$a[0] as $A | $b[0] as $B |
		fail([$A.sockets[], $B.sockets[] | select((.local|port_of) == $t or (.peer|port_of) == $t)] | length == 0;
		     "sockets of the tcp port at a hub"),
		fail($B.counters.fallback_connects == 0; "fallback connects \($B.counters.fallback_connects)"),
		fail([$A.sockets[] | select(.state == "listening" and (.local|port_of) == $r)] | length == 1;
		     "no rshare listener on \($r)"),
		fail([$A.sockets[] | select(.state == "established" and (.local|port_of) == $r and .link != 0)] | length == 3;
		     "A: not 3 established on \($r) over a link"),
		fail([$B.sockets[] | select(.state == "established" and (.peer|port_of) == $r and .link != 0)] | length == 3;
		     "B: not 3 established to \($r) over a link"),
		fail(($B.links | length) == 1 and $B.links[0].connections == 3; "B link: \($B.links)")'
	# the text view agrees
	run ip netns exec "$NS_B" "$RSHARE" stat state established dport :$rport
	[[ $(tail -n +2 <<<"$output" | grep -c .) -eq 3 ]]
	run ip netns exec "$NS_B" "$RSHARE" stat port $tport
	[[ $(tail -n +2 <<<"$output" | grep -c .) -eq 0 ]]
	touch "$RS_TMP/hold"
}

@test "rules: by program and by address prefix, listen and connect apart" {
	local port=7611
	# the server listens on rshare; clients named echo-cl* connect over TCP
	# to 10.199.0.0/24, except that first match wins for a /32 above it
	cat >"$RSHARE_CONF" <<-CONF
	use rshare listen echo-server *
	use rshare connect echo-cl?ent $ADDR_A/32:$port
	use tcp connect echo-cl* 10.199.0.0/24
	CONF
	rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" $port
	rs_wait_ready server
	rs_exec "$NS_B" --rshare "$RS_BIN/echo-client" -c 2 -n 4 -w "$RS_TMP/h1" $ADDR_A $port >"$RS_TMP/c1.out" &
	rs_retry 20 bash -c "ip netns exec $NS_B $RSHARE stat --json | jq -e '[.sockets[] | select(.state == \"established\")] | length == 2' >/dev/null"
	touch "$RS_TMP/h1"
	wait $!

	# now the /32 rule is gone: the same client goes over kernel TCP
	sed -i '2d' "$RSHARE_CONF"
	rs_exec "$NS_B" --rshare "$RS_BIN/echo-client" -c 2 -n 4 -w "$RS_TMP/h2" $ADDR_A $port >"$RS_TMP/c2.out" &
	rs_retry 20 bash -c "[[ \$(ip netns exec $NS_B ss -tnH state established '( dport = :$port )' | grep -c .) -eq 2 ]]"
	rs_stat "$NS_B" | jq -e '[.sockets[] | select(.state == "established" or .state == "fallback")] | length == 0' >/dev/null
	touch "$RS_TMP/h2"
	wait $!
	grep -q 'verified=2 resets=0 errors=0' "$RS_TMP/c2.out"

	# a listen rule does not apply to connect: with only "use tcp listen * *"
	# the client still connects over rshare to the rshare listener
	echo "use tcp listen * *" >"$RSHARE_CONF"
	rs_exec "$NS_B" --rshare "$RS_BIN/echo-client" -c 1 -n 4 -w "$RS_TMP/h3" $ADDR_A $port >"$RS_TMP/c3.out" &
	rs_retry 20 bash -c "ip netns exec $NS_B $RSHARE stat --json | jq -e '[.sockets[] | select(.state == \"established\" and .link != 0)] | length == 1' >/dev/null"
	touch "$RS_TMP/h3"
	wait $!
}

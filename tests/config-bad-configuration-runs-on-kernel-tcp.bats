#!/usr/bin/env bats
# A bad configuration (unknown key, bad value, bad rule line, bad RSHARE_*
# variable, a missing RSHARE_CONF file) gets ONE line on stderr naming the
# file, the line and the problem, and the program runs without rshare: its
# traffic is kernel TCP (ss shows it), the hub has no socket of it.  Both
# through `rshare run` and with the library preloaded directly.

load lib

setup() {
	rs_require echo-server echo-client
	rs_setup
	rs_two_nodes
	export RSHARE_CONF=$RS_TMP/rshare.conf
	unset RSHARE_PORT RSHARE_LOG RSHARE_HUB RSHARE_TRANSPORT RSHARE_RCVBUF RSHARE_SNDBUF
}

teardown() {
	rs_teardown
}

no_sockets() { # no_sockets NS: the hub of NS holds no socket
	rs_stat "$1" | jq -e '(.sockets | length) == 0' >/dev/null ||
		rs_fail "$1: $(rs_stat "$1" | jq -c .sockets)"
}

tcp_conns() { # tcp_conns NS FILTER: established kernel TCP connections
	ip netns exec "$1" ss -tnH state established "$2" | grep -c . || true
}

@test "bad configuration: rshare run says it once and runs the program on kernel TCP" {
	local port=7501
	printf '# rshare\n\nport 18515\ntrasport soft\n' >"$RSHARE_CONF"
	rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" $port
	rs_wait_ready server
	rs_bg client "$NS_B" --rshare "$RS_BIN/echo-client" -c 2 -n 4 -w "$RS_TMP/hold" $ADDR_A $port
	rs_wait_file "$RS_TMP/client.out" '^done$'
	grep -q 'verified=2 resets=0 errors=0' "$RS_TMP/client.out"
	for f in server client; do
		cat "$RS_TMP/$f.err"
		[[ $(cat "$RS_TMP/$f.err") == "rshare: $RSHARE_CONF:4: unknown key 'trasport'" ]]
	done
	# no LD_PRELOAD: nothing reached a hub
	no_sockets "$NS_A"
	no_sockets "$NS_B"
	[[ $(tcp_conns "$NS_A" "( sport = :$port )") -eq 2 ]]
	[[ $(tcp_conns "$NS_B" "( dport = :$port )") -eq 2 ]]
	touch "$RS_TMP/hold"
}

@test "bad configuration: the library alone says it once and uses kernel TCP" {
	local port=7502 i=0 conf want
	rs_bg server "$NS_A" "$RS_BIN/echo-server" $port
	rs_wait_ready server
	# config text | the message after "rshare: "
	while IFS='|' read -r conf want; do
		i=$((i + 1))
		printf "$conf" >"$RSHARE_CONF"
		want=${want//@/$RSHARE_CONF}
		# 3 connections, one message
		ip netns exec "$NS_B" env LD_PRELOAD="$RS_BUILD/librshare.so" timeout 30 \
			"$RS_BIN/echo-client" -c 3 -n 2 -w "$RS_TMP/hold$i" $ADDR_A $port \
			>"$RS_TMP/out$i" 2>"$RS_TMP/err$i" &
		rs_retry 20 bash -c "[[ \$(ip netns exec $NS_B ss -tnH state established '( dport = :$port )' | grep -c .) -eq 3 ]]"
		no_sockets "$NS_B"
		touch "$RS_TMP/hold$i"
		wait $!
		grep -q 'verified=3 resets=0 errors=0' "$RS_TMP/out$i"
		cat "$RS_TMP/err$i"
		[[ $(cat "$RS_TMP/err$i") == "rshare: $want" ]]
	done <<'CASES'
port 18515\nrcvbuf 9G\n|@:2: rcvbuf: '9G' is not a size from 4K to 4M
log chatty\n|@:1: log: 'chatty' is not error, warn, info or debug
# rules\nuse tcp listen * *:80\nuse rshare conect * *\n|@:3: use: 'conect' is not listen, connect or both
use tcp both *\n|@:1: use: want 'use rshare|tcp listen|connect|both PROGRAM ADDRESS[/PREFIX][:PORT[-PORT]]'
use tcp both * 10.1.0.0/40\n|@:1: use: bad address '10.1.0.0/40' (want *, ADDRESS[/PREFIX], each with an optional :PORT or :PORT-PORT)
port\n|@:1: missing value for 'port'
CASES
}

@test "bad RSHARE_* variable or missing RSHARE_CONF: one line, kernel TCP" {
	local port=7503
	: >"$RSHARE_CONF"
	rs_bg server "$NS_A" "$RS_BIN/echo-server" $port
	rs_wait_ready server
	run ip netns exec "$NS_B" env RSHARE_RCVBUF=lots LD_PRELOAD="$RS_BUILD/librshare.so" \
		timeout 30 "$RS_BIN/echo-client" -c 1 -n 2 $ADDR_A $port
	echo "$output"
	[[ $status -eq 0 ]]
	[[ ${lines[0]} == "rshare: RSHARE_RCVBUF: 'lots' is not a size from 4K to 4M" ]]
	[[ $(grep -c '^rshare:' <<<"$output") -eq 1 ]]
	run ip netns exec "$NS_B" env RSHARE_CONF=/nonexistent/rshare.conf timeout 30 "$RSHARE" run -- \
		"$RS_BIN/echo-client" -c 1 -n 2 $ADDR_A $port
	echo "$output"
	[[ $status -eq 0 ]]
	[[ ${lines[0]} == "rshare: /nonexistent/rshare.conf: no such file" ]]
	[[ $(grep -c '^rshare:' <<<"$output") -eq 1 ]]
	no_sockets "$NS_B"
	[[ $(rs_stat "$NS_B" | jq '.counters.fallback_connects') -eq 0 ]]
}

@test "good configuration: the library prints nothing and uses rshare" {
	local port=7504
	printf '# fine\ntransport soft\nlog debug\nrcvbuf 64K\nuse rshare both * *\n' >"$RSHARE_CONF"
	rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" $port
	rs_wait_ready server
	rs_exec "$NS_B" env LD_PRELOAD="$RS_BUILD/librshare.so" "$RS_BIN/echo-client" -c 2 -n 4 \
		-w "$RS_TMP/hold" $ADDR_A $port >"$RS_TMP/client.out" 2>"$RS_TMP/client.err" &
	rs_wait_file "$RS_TMP/client.out" '^done$'
	rs_stat "$NS_B" | jq -e '[.sockets[] | select(.state == "established" and .link != 0)] | length == 2' >/dev/null
	touch "$RS_TMP/hold"
	wait $!
	[[ ! -s $RS_TMP/client.err ]]
	[[ ! -s $RS_TMP/server.err ]]
}

#!/usr/bin/env bats
# `rshare run`: LD_PRELOAD and the RSHARE_* variables its options set,
# ring sizes from --rcvbuf/--sndbuf, RSHARE_RCVBUF/_SNDBUF and the
# configuration (options over environment over file) as the hub sees them,
# the hub started when none runs, and the command's exit status.

load lib

setup() {
	rs_require echo-server echo-client
	rs_setup
	export RSHARE_CONF=$RS_TMP/rshare.conf
	: >"$RSHARE_CONF"
	unset RSHARE_PORT RSHARE_LOG RSHARE_HUB RSHARE_TRANSPORT RSHARE_RCVBUF RSHARE_SNDBUF
}

teardown() {
	rs_teardown
}

@test "run: options become RSHARE_* variables, LD_PRELOAD keeps what was there" {
	rs_netns "$NS_A"
	run ip netns exec "$NS_A" env LD_PRELOAD=libc.so.6 "$RSHARE" run --transport soft --rcvbuf 64K \
		--sndbuf=1M --log debug --port 18701 -- env
	echo "$output"
	[[ $status -eq 0 ]]
	grep -qx 'RSHARE_TRANSPORT=soft' <<<"$output"
	grep -qx 'RSHARE_RCVBUF=64K' <<<"$output"
	grep -qx 'RSHARE_SNDBUF=1M' <<<"$output"
	grep -qx 'RSHARE_LOG=debug' <<<"$output"
	grep -qx 'RSHARE_PORT=18701' <<<"$output"
	grep -qx "LD_PRELOAD=$(readlink -f "$RS_BUILD/librshare.so"):libc.so.6" <<<"$output"
	# the hub it started uses that port
	run ip netns exec "$NS_A" "$RSHARE" hub status
	[[ $status -eq 0 && $output == *" port 18701" ]]
	# the configuration's values are exported where no variable is set
	printf 'transport soft\nlog info\nrcvbuf 32K\n' >"$RSHARE_CONF"
	run ip netns exec "$NS_A" env RSHARE_LOG=error "$RSHARE" run -- env
	grep -qx 'RSHARE_TRANSPORT=soft' <<<"$output"
	grep -qx 'RSHARE_LOG=error' <<<"$output"
	grep -qx 'RSHARE_RCVBUF=32768' <<<"$output"
}

@test "run: starts the hub when none runs, not with RSHARE_NO_AUTOSTART" {
	rs_netns "$NS_A"
	run ip netns exec "$NS_A" env RSHARE_NO_AUTOSTART=1 "$RSHARE" run -- true
	[[ $status -eq 0 ]]
	run ip netns exec "$NS_A" "$RSHARE" hub status
	[[ $status -eq 1 ]]
	run ip netns exec "$NS_A" "$RSHARE" run -- sh -c 'exit 3'
	[[ $status -eq 3 ]]
	run ip netns exec "$NS_A" "$RSHARE" hub status
	echo "$output"
	[[ $status -eq 0 ]]
	pid=$(sed -n 's/^hub: pid \([0-9]*\) .*/\1/p' <<<"$output")
	[[ $(readlink /proc/$pid/exe) == "$(readlink -f "$RSHARED")" ]]
	# the hub is no child of the command: a shell that waits for all its children returns
	run ip netns exec "$NS_A" timeout 10 "$RSHARE" run -- sh -c 'wait; echo waited'
	[[ $status -eq 0 && $output == waited ]]
}

# rings PORT LABEL: "rx tx" of the listener on PORT and of each established
# socket on it, one line each, from the hub of node A
rings_a() {
	rs_stat "$NS_A" | jq -r --argjson port "$1" "$RS_JQ_DEFS"'
		.sockets[] | select((.local|port_of) == $port) | "\(.state) \(.rx_ring) \(.tx_ring)"' | sort -u
}

@test "run: ring sizes from options, environment and configuration" {
	rs_two_nodes
	local port=7301
	# option
	rs_bg s1 "$NS_A" "$RSHARE" run --rcvbuf 64K --sndbuf 16K -- "$RS_BIN/echo-server" $port
	rs_wait_ready s1
	rs_exec "$NS_B" "$RSHARE" run --rcvbuf 8K -- "$RS_BIN/echo-client" -c 2 -n 4 -w "$RS_TMP/hold1" $ADDR_A $port \
		>"$RS_TMP/c1.out" &
	c1=$!
	rs_wait_file "$RS_TMP/c1.out" '^done$'
	run rings_a $port
	echo "$output"
	[[ $output == "established 65536 16384"*"listening 65536 16384" ]]
	# the client set only its receive ring: its send ring started at 128K
	# and may have grown (when its reader stalled), a power of two up to
	# tcp_wmem's maximum (4 MiB)
	run bash -c "ip netns exec $NS_B $RSHARE stat --json | jq -r '.sockets[] | \"\(.rx_ring) \(.tx_ring)\"' | sort -u"
	echo "$output"
	[[ -n $output ]]
	while read -r line; do
		[[ $line =~ ^8192\ (131072|262144|524288|1048576|2097152|4194304)$ ]] || false
	done <<<"$output"
	touch "$RS_TMP/hold1"
	rs_wait_pid $c1 30
	kill -TERM "$(cat "$RS_TMP/s1.pid")"
	rs_retry 10 bash -c "! ip netns exec $NS_A ss -tlnH '( sport = :$port )' | grep -q ."

	# environment over configuration; the library alone (no rshare run) honours both
	printf 'rcvbuf 32K\nsndbuf 32K\n' >"$RSHARE_CONF"
	RSHARE_SNDBUF=8K rs_bg s2 "$NS_A" env LD_PRELOAD="$RS_BUILD/librshare.so" "$RS_BIN/echo-server" $port
	rs_wait_ready s2
	rs_exec "$NS_B" "$RSHARE" run -- "$RS_BIN/echo-client" -c 1 -n 4 -w "$RS_TMP/hold2" $ADDR_A $port \
		>"$RS_TMP/c2.out" &
	c2=$!
	rs_wait_file "$RS_TMP/c2.out" '^done$'
	run rings_a $port
	echo "$output"
	[[ $output == "established 32768 8192"*"listening 32768 8192" ]]
	# option over environment
	RSHARE_RCVBUF=4M ip netns exec "$NS_B" "$RSHARE" run --rcvbuf 4K -- "$RS_BIN/echo-client" -c 1 -n 2 \
		-w "$RS_TMP/hold3" $ADDR_A $port >"$RS_TMP/c3.out" &
	c3=$!
	rs_retry 20 bash -c "ip netns exec $NS_B $RSHARE stat --json | jq -e '[.sockets[] | select(.rx_ring == 4096)] | length == 1' >/dev/null"
	touch "$RS_TMP/hold2" "$RS_TMP/hold3"
	rs_wait_pid $c2 30
	rs_wait_pid $c3 30
}

#!/usr/bin/env bats
# `rshare stat`: a line per socket like ss, filters by state, port and pid,
# -l links, -p pools and processes, -a all, --json (filtered too), -w
# refreshing once a second, and "no hub" (exit 1) where none runs.
# waits: `rshare stat -w` refreshing once a second (tests/run runs it beside the others)

load lib

setup() {
	rs_require echo-server echo-client
	rs_setup
	export RSHARE_CONF=/dev/null
}

teardown() {
	rs_teardown
}

st() { # st NS ARGS...: rshare stat in NS
	local ns=$1
	shift
	ip netns exec "$ns" timeout -k 2 10 "$RSHARE" stat "$@"
}

# count of lines after the header
rows() {
	tail -n +2 <<<"$1" | grep -c . || true
}

@test "stat: sockets, filters, -l, -p, -a, --json, -w" {
	local port=7401 conns=3 hpid
	rs_two_nodes
	rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" -w 2 $port
	rs_wait_ready server
	rs_bg client "$NS_B" --rshare "$RS_BIN/echo-client" -c $conns -n 4 -w "$RS_TMP/hold" $ADDR_A $port
	rs_wait_file "$RS_TMP/client.out" '^done$'

	run st "$NS_B"
	echo "$output"
	[[ $status -eq 0 ]]
	[[ ${lines[0]} == State*"Local Address:Port"*"Peer Address:Port"*Process ]]
	[[ $(rows "$output") -eq $conns ]]
	[[ $(grep -c "^established .* $ADDR_A:$port .*pids=([0-9]*)" <<<"$output") -eq $conns ]]

	# server side: the listener and the accepted connections
	run st "$NS_A"
	echo "$output"
	[[ $(rows "$output") -eq $((conns + 1)) ]]
	run st "$NS_A" state listening
	[[ $(rows "$output") -eq 1 && ${lines[1]} == "listening    0.0.0.0:$port "* ]]
	run st "$NS_A" state established
	[[ $(rows "$output") -eq $conns ]]
	run st "$NS_A" state established state listening
	[[ $(rows "$output") -eq $((conns + 1)) ]]
	run st "$NS_A" state fallback
	[[ $(rows "$output") -eq 0 ]]
	run st "$NS_A" sport :$port
	[[ $(rows "$output") -eq $((conns + 1)) ]]
	run st "$NS_A" state established sport = :$port
	[[ $(rows "$output") -eq $conns ]]
	run st "$NS_A" dport :$port
	[[ $(rows "$output") -eq 0 ]]
	run st "$NS_B" dport :$port
	[[ $(rows "$output") -eq $conns ]]
	run st "$NS_B" sport :$port
	[[ $(rows "$output") -eq 0 ]]
	run st "$NS_B" port $port
	[[ $(rows "$output") -eq $conns ]]
	run st "$NS_B" port 1
	[[ $(rows "$output") -eq 0 ]]

	# pid: a process of the client holds all its sockets
	hpid=$(st "$NS_B" --json | jq '.sockets[0].holders[0]')
	run st "$NS_B" pid "$hpid"
	[[ $(rows "$output") -eq $conns ]]
	run st "$NS_B" pid 999999
	[[ $(rows "$output") -eq 0 ]]

	# --json, filtered or not
	st "$NS_B" --json | jq -e --argjson n $conns '(.sockets | length) == $n and (.links | length) == 1' >/dev/null
	st "$NS_A" --json state listening | jq -e --argjson p $port \
		'(.sockets | length) == 1 and .sockets[0].state == "listening" and (.links | length) == 1 and .node != null' >/dev/null
	st "$NS_B" --json pid 999999 | jq -e '(.sockets | length) == 0 and (.processes | length) == 0 and (.pools | length) == 1' >/dev/null
	st "$NS_B" --json pid "$hpid" | jq -e --argjson pid "$hpid" '[.processes[].pid] == [$pid]' >/dev/null

	# -l: one link per peer node
	run st "$NS_B" -l
	echo "$output"
	[[ ${lines[0]} == Id*Peer-Node*Peer*Xport*State*Conns* ]]
	[[ $(rows "$output") -eq 1 ]]
	[[ ${lines[1]} =~ ^1\ +[0-9a-f]{16}\ +$ADDR_A:[0-9]+\ +soft\ +up\ +out\ +$conns\  ]]
	# -p: pools, then processes
	run st "$NS_B" -p
	echo "$output"
	[[ ${lines[0]} == Pool*Processes*Sockets*Ring-Bytes ]]
	grep -q "^Pid  *Pool  *Sockets" <<<"$output"
	grep -q "^$hpid  *1  *[0-9,]*$" <<<"$output"
	# -a: links, pools, processes and sockets
	run st "$NS_B" -a
	for h in Id Pool Pid State; do grep -q "^$h " <<<"$output"; done

	# -w: a report a second until stopped
	run ip netns exec "$NS_B" timeout 2.5 "$RSHARE" stat -w state established
	echo "$output"
	[[ $status -eq 124 ]]
	[[ $(grep -c '^State ' <<<"$output") -ge 2 ]]
	[[ $(grep -c '^established ' <<<"$output") -ge $((2 * conns)) ]]
	run ip netns exec "$NS_B" timeout 2.5 "$RSHARE" stat -w --json
	[[ $status -eq 124 && $(jq -s length <<<"$output") -ge 2 ]]

	touch "$RS_TMP/hold"
}

@test "stat: no hub is exit 1" {
	rs_netns "$NS_A"
	run st "$NS_A"
	[[ $status -eq 1 && $output == "rshare: no hub runs in this network namespace" ]]
	run st "$NS_A" --json
	[[ $status -eq 1 ]]
	run ip netns exec "$NS_A" timeout 5 "$RSHARE" stat -w
	[[ $status -eq 1 ]]
}

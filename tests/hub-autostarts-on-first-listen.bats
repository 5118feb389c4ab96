#!/usr/bin/env bats
# With no hub in a fresh network namespace, a preloaded program's listen()
# starts one: afterwards `rshare stat` answers there and shows the
# listener.

load lib

setup() {
	rs_require echo-server
	rs_setup
	rs_netns "$NS_A"
}

teardown() {
	rs_teardown
}

@test "the first preloaded listen() starts a hub" {
	local port=7012 hub
	# no hub yet
	if ip netns exec "$NS_A" timeout 5 "$RSHARE" stat --json >/dev/null 2>&1; then
		rs_fail "a hub answers before anything started one"
	fi
	rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" $port
	rs_wait_ready server
	deadline=$((SECONDS + 15))
	for i in $(seq 50); do
		((SECONDS < deadline)) || break
		rs_stat "$NS_A" >"$RS_TMP/stat.json" 2>/dev/null && jq -se '.[0].node != null' "$RS_TMP/stat.json" >/dev/null && break
		sleep 0.1
	done
	cat "$RS_TMP/stat.json"
	rs_jq_check "a hub answers and knows the listener" --slurpfile s "$RS_TMP/stat.json" --argjson port $port '
		$s[0] as $S |
		fail($S.pid > 0; "no hub pid"),
		fail([$S.sockets[] | select(.state == "listening" and (.local|port_of) == $port)] | length == 1;
		     "no listening socket on port \($port)")'
	hub=$(jq .pid "$RS_TMP/stat.json")
	# it is a real process of this namespace, and not the server itself
	ip netns pids "$NS_A" | grep -qx "$hub"
	[[ $hub != "$(cat "$RS_TMP/server.pid")" ]]
	# and a preloaded client reaches the server through it
	run rs_exec "$NS_A" --rshare "$RS_BIN/echo-client" -c 2 -n 4 127.0.0.1 $port
	echo "$output"
	[[ $status -eq 0 ]]
	kill -TERM "$hub"
	for i in $(seq 50); do kill -0 "$hub" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$hub" 2>/dev/null; then
		rs_fail "hub $hub did not end on SIGTERM"
	fi
}

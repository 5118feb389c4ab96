#!/usr/bin/env bats
# `rshare hub start|stop|status` in a fresh network namespace: start runs a
# daemonized hub (once), status reports it (exit 0) or "no hub" (exit 1),
# stop ends it; --port/--log and their configuration and environment
# counterparts reach the hub; a hub that cannot start says why.

load lib

setup() {
	rs_require echo-server
	rs_setup
	rs_netns "$NS_A"
	export RSHARE_CONF=$RS_TMP/rshare.conf
	: >"$RSHARE_CONF"
	unset RSHARE_PORT RSHARE_LOG RSHARE_HUB RSHARE_HUB_LOG
}

teardown() {
	rs_teardown
}

hub() {
	ip netns exec "$NS_A" timeout -k 2 20 "$RSHARE" hub "$@"
}

@test "hub start, status, start again, stop, status" {
	run hub status
	[[ $status -eq 1 && $output == "no hub" ]]
	run hub stop
	[[ $status -eq 1 && $output == "rshare: no hub runs in this network namespace" ]]

	run hub start --port 18633
	echo "$output"
	[[ $status -eq 0 ]]
	[[ $output =~ ^hub:\ pid\ ([0-9]+)\ node\ [0-9a-f]{16}\ port\ 18633$ ]]
	pid=${BASH_REMATCH[1]}
	# a daemon of this namespace, in its own session, running the built rshared
	ip netns pids "$NS_A" | grep -qx "$pid"
	[[ $(ps -o sid= -p "$pid" | tr -d " ") != "$(ps -o sid= -p $$ | tr -d " ")" ]]
	[[ $(readlink /proc/$pid/exe) == "$(readlink -f "$RSHARED")" ]]
	# it links on that port
	ip netns exec "$NS_A" ss -tlnH "( sport = :18633 )" | grep -q LISTEN

	run hub status
	[[ $status -eq 0 && $output == "hub: pid $pid node "*" port 18633" ]]
	# start again: the same hub, no second one
	run hub start
	[[ $status -eq 0 && $output == "hub: pid $pid "* ]]
	# (one rshared: a hub process is a child of its rshared)
	[[ $(pgrep -x rshared | while read -r p; do
		[[ $(cat "/proc/$(awk '{print $4}' "/proc/$p/stat")/comm") == rshared ]] || ip netns identify "$p"
	done | grep -cx "$NS_A") -eq 1 ]]

	run hub stop
	echo "$output"
	[[ $status -eq 0 ]]
	! kill -0 "$pid" 2>/dev/null
	run hub status
	[[ $status -eq 1 && $output == "no hub" ]]
}

@test "hub start: port from the configuration, the environment, the option" {
	echo "port 18641" >"$RSHARE_CONF"
	run hub start
	[[ $status -eq 0 && $output == *" port 18641" ]]
	hub stop
	RSHARE_PORT=18642 run hub start
	[[ $status -eq 0 && $output == *" port 18642" ]]
	hub stop
	RSHARE_PORT=18642 run hub start --port=18643
	[[ $status -eq 0 && $output == *" port 18643" ]]
	hub stop
}

@test "hub start --log: the level reaches the hub, its log goes to RSHARE_HUB_LOG" {
	RSHARE_HUB_LOG=$RS_TMP/hub.log run hub start --log info
	[[ $status -eq 0 ]]
	hub stop
	cat "$RS_TMP/hub.log"
	grep -q 'rshared\[[0-9]*\]: info: hub up' "$RS_TMP/hub.log"
	# warn (the default) says nothing of that
	echo "log warn" >"$RSHARE_CONF"
	RSHARE_HUB_LOG=$RS_TMP/hub2.log run hub start
	[[ $status -eq 0 ]]
	hub stop
	! grep -q 'hub up' "$RS_TMP/hub2.log"
}

@test "hub start: a hub that cannot start says why, exit 1" {
	# the link port is taken by a plain server
	rs_bg server "$NS_A" "$RS_BIN/echo-server" 18651
	rs_wait_ready server
	run hub start --port 18651
	echo "$output"
	[[ $status -eq 1 ]]
	[[ $output == *"cannot listen for peer hubs on port 18651"* ]]
	[[ $output == *"rshare: the hub ("*") did not start" ]]
	run hub status
	[[ $status -eq 1 ]]
	# a hub binary that does not exist
	RSHARE_HUB=/nonexistent/rshared run hub start
	echo "$output"
	[[ $status -eq 1 ]]
	[[ $output == *"cannot run the hub /nonexistent/rshared"* ]]
	# the configuration's hub, when nothing overrides it
	echo "hub /nonexistent/hub2" >"$RSHARE_CONF"
	run hub start
	[[ $status -eq 1 && $output == *"/nonexistent/hub2"* ]]
}

@test "hub start: a bad configuration is an error" {
	printf 'port 1\nlog loud\n' >"$RSHARE_CONF"
	run hub start
	echo "$output"
	[[ $status -eq 1 ]]
	[[ $output == "rshare: $RSHARE_CONF:2: log: 'loud' is not error, warn, info or debug" ]]
	run hub status
	[[ $status -eq 1 ]]
}

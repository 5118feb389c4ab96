#!/usr/bin/env bats
# HAProxy's silent-drop drains what the client sent before it lets the
# connection go, with recv(fd, NULL, INT_MAX, MSG_DONTWAIT | MSG_NOSIGNAL |
# MSG_TRUNC): the kernel counts and drops the bytes without touching the
# buffer.  Three clients send 3 MB each to a frontend that drops them, then
# a stream goes through another frontend of the same haproxy to an echo
# server, every byte verified, and haproxy is still the process it was.
# First on kernel TCP (the reference), then everything preloaded: the
# clients' connections cross the link (the hubs' stat), haproxy's to the
# echo server stay on the node.  Before, rshare copied into the NULL
# buffer and haproxy died of SIGSEGV at the first drop.

load lib
load apps

setup() {
	rs_require echo-server echo-client
	app_require haproxy curl
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# drop_then_relay PORT [--rshare]: the drops, then the stream's line;
# fails when haproxy is gone
drop_then_relay() {
	local port=$1 pre=${2:-} d pid
	d=$(app_dir "hap-$port")
	cat >"$d/haproxy.cfg" <<-EOF
		global
			nbthread 1
		defaults
			mode tcp
			timeout connect 5s
			timeout client 30s
			timeout server 30s
		frontend drop
			bind $ADDR_A:$port
			tcp-request inspect-delay 5s
			tcp-request content silent-drop if { req.len gt 0 }
			default_backend be
		frontend relay
			bind $ADDR_A:$((port + 1))
			default_backend be
		backend be
			server s1 127.0.0.1:$((port + 100))
	EOF
	rs_bg "echo-$port" "$NS_A" $pre "$RS_BIN/echo-server" -w 1 $((port + 100))
	rs_wait_ready "echo-$port"
	rs_bg "hap-$port" "$NS_A" $pre haproxy -db -f "$d/haproxy.cfg"
	pid=$RS_LASTPID
	app_wait_listen "$NS_A" "$port" "$pid"
	app_wait_listen "$NS_A" $((port + 1)) "$pid"
	head -c 3000000 /dev/zero >"$d/body.bin"
	for _ in 1 2 3; do
		RS_TIMEOUT=30 rs_exec "$NS_B" $pre curl -sS -m 3 -o /dev/null -H "Expect:" \
			--data-binary @"$d/body.bin" "http://$ADDR_A:$port/" 2>>"$d/curl.err" || true
		! app_gone "$pid" || rs_fail "haproxy died as it dropped a connection"
	done
	RS_TIMEOUT=60 rs_exec "$NS_B" $pre "$RS_BIN/echo-client" -c 2 -n 4 -m 65536 $ADDR_A $((port + 1)) 2>&1 |
		grep '^echo-client:'
	! app_gone "$pid" || rs_fail "haproxy is gone"
}

@test "haproxy drains the connections it drops (recv MSG_TRUNC) and goes on, as on kernel TCP" {
	local k r
	k=$(drop_then_relay 7991)
	[[ $k == *"verified=2 resets=0 errors=0"* ]] || rs_fail "kernel TCP: '$k'"
	app_snap before
	r=$(drop_then_relay 7993 --rshare)
	app_snap after
	echo "# kernel TCP: $k" >&3
	echo "# rshare: $r" >&3
	[[ $r == *"verified=2 resets=0 errors=0"* ]] || rs_fail "rshare: '$r'"
	app_check_rshare "the clients' connections went over the link" before after 5 250000 250000
}

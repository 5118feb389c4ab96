#!/usr/bin/env bats
# HAProxy relaying TCP with splice(2) (option splice-auto, splice-request,
# splice-response: the bytes go from one connection into a pipe and from
# the pipe to the other) hands a 20 MB download over whole: curl on node B
# through haproxy on node A to python's http.server beside it.  First on
# kernel TCP (the reference: the file's checksum), then everything
# preloaded, where both of haproxy's connections are rshare's (the client's
# over the link, the server's on one node) and its splice calls go through
# preload/splice.c; the hubs' stat shows the bytes on the link.

load lib
load apps

setup() {
	rs_require
	app_require haproxy curl python3
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# relay PORT [--rshare]: the md5 of what curl got through haproxy
relay() {
	local port=$1 pre=${2:-} d
	d=$(app_dir "hap-$port")
	cat >"$d/haproxy.cfg" <<-EOF
		global
			nbthread 1
		defaults
			mode tcp
			option splice-auto
			option splice-request
			option splice-response
			timeout connect 5s
			timeout client 30s
			timeout server 30s
		frontend fe
			bind $ADDR_A:$port
			default_backend be
		backend be
			server s1 127.0.0.1:$((port + 100))
	EOF
	(cd "$RS_TMP" && rs_bg "web-$port" "$NS_A" $pre python3 -m http.server $((port + 100)) --bind 127.0.0.1)
	rs_bg "hap-$port" "$NS_A" $pre haproxy -f "$d/haproxy.cfg"
	app_wait_listen "$NS_A" $((port + 100))
	app_wait_listen "$NS_A" "$port"
	RS_TIMEOUT=120 rs_exec "$NS_B" $pre curl -sS "http://$ADDR_A:$port/big.bin" 2>"$d/curl.err" | md5sum | cut -c1-32
}

@test "haproxy relaying with splice hands a 20 MB download over whole, as on kernel TCP" {
	local want k r
	head -c 20000000 /dev/urandom >"$RS_TMP/big.bin"
	want=$(md5sum <"$RS_TMP/big.bin" | cut -c1-32)
	k=$(relay 7971)
	app_snap before
	r=$(relay 7972 --rshare)
	app_snap after
	echo "file $want, kernel TCP $k, rshare $r"
	[[ $k == "$want" ]] || rs_fail "kernel TCP's download differs"
	[[ $r == "$want" ]] || rs_fail "rshare's download differs ($(cat "$RS_TMP/hap-7972/curl.err"))"
	app_check_rshare "curl's connection through haproxy went over the link" before after 1 50 20000000
	rs_stat "$NS_A" | jq -e '.counters.local_connects >= 1' >/dev/null ||
		rs_fail "haproxy's connection to its server was not rshare's"
}

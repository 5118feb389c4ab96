#!/usr/bin/env bats
# HAProxy's seamless reload: a new haproxy takes the listening sockets of
# the running one through its stats socket (-x, SCM_RIGHTS) and tells it
# to finish (-sf).  On node A, haproxy answers every request itself; ab on
# node B makes 6,000 requests, one connection each, while haproxy is
# reloaded three times.  First on kernel TCP, then with both sides
# preloaded: every request is made, each new haproxy took the rshare
# listener (the hub's log: it joined the pool for
# the socket passed to it), and the hubs' stat shows every connection on
# the one link.  Neither fails a request: none is refused, reset or left
# waiting for haproxy's client timeout (30 s, then 408).  (haproxy's two
# threads release a socket in one while the other accepts and polls the
# next connection, which may get the same slot: the pattern of
# tests/threads-accept-close-and-poll-connections-as-on-kernel-tcp.bats.)

load lib
load apps

setup() {
	rs_require
	app_require haproxy ab:apache2-utils
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# run PORT [--rshare]: haproxy, ab under three reloads; $out: ab's counts
run_reloads() {
	local port=$1 pre=${2:-} d cfg abpid i
	d=$(app_dir "hap-$port")
	cfg=$d/haproxy.cfg
	cat >"$cfg" <<-EOF
		global
			stats socket $d/stats.sock mode 600 level admin expose-fd listeners
			pidfile $d/haproxy.pid
		defaults
			mode http
			timeout connect 5s
			timeout client 30s
			timeout server 30s
		frontend fe
			bind $ADDR_A:$port
			http-request return status 200 content-type text/plain string "ok"
	EOF
	RS_TIMEOUT=10 rs_exec "$NS_A" $pre haproxy -D -f "$cfg" 2>"$d/start.err" || rs_fail "haproxy: $(cat "$d/start.err")"
	app_wait_listen "$NS_A" "$port"
	# -s 60: past haproxy's client timeout, which then answers 408
	rs_bg "ab-$port" "$NS_B" $pre ab -q -s 60 -n 6000 -c 4 "http://$ADDR_A:$port/"
	abpid=$RS_LASTPID
	for i in 1 2 3; do
		sleep 1
		RS_TIMEOUT=10 rs_exec "$NS_A" $pre haproxy -D -f "$cfg" -x "$d/stats.sock" -sf "$(cat "$d/haproxy.pid")" \
			2>>"$d/reload.err" || rs_fail "reload $i: $(cat "$d/reload.err")"
	done
	rs_wait_pid "$abpid" 120 >/dev/null
	out=$(ab_counts "$RS_TMP/ab-$port.out")
	# refused, reset or cut short: none of those, whatever else
	errs=$(grep -o '(Connect: [0-9]*, Receive: [0-9]*, Length: [0-9]*, Exceptions: [0-9]*)' "$RS_TMP/ab-$port.out" |
		sed 's/Length: [0-9]*, //')
	grep '^Requests per second' "$RS_TMP/ab-$port.out" | awk '{print $4}' >"$RS_TMP/rate-$port"
}

@test "HAProxy reloaded three times under load (-x, -sf): every request made over rshare, each new haproxy on the rshare listener" {
	local tcp
	run_reloads 7811
	tcp=$out
	[[ $tcp == "complete=6000 failed=0 non2xx=0" ]] || rs_fail "kernel TCP: $tcp"
	app_snap before
	run_reloads 7812 --rshare
	app_snap after
	[[ $out == "$tcp" ]] || rs_fail "rshare: '$out' ${errs:-}, kernel TCP: '$tcp'"
	n=$(grep -c 'joins pool .* for a socket passed to it' "$RS_TMP/hub-$NS_A.err")
	((n >= 3)) || rs_fail "only $n new haproxy processes took the rshare listener, want 3"
	app_check_rshare "haproxy under reloads over rshare" before after 6000 1 1
	echo "# haproxy under 3 reloads: rshare $(cat "$RS_TMP/rate-7812") req/s, kernel TCP $(cat "$RS_TMP/rate-7811") req/s" >&3
}

#!/usr/bin/env bats
# nginx (a master and 4 epoll workers, sendfile on) on node A, wrk and curl
# on node B.  One server block keeps connections alive, the other closes
# each after one response.  curl fetches a small index and a 1 MiB random
# file (sha256 compared); wrk loads each server block for 2 s.  First all on
# kernel TCP (the baseline), then server and clients preloaded: the
# requests succeed and the hubs' stat shows every connection and at least
# the bytes moved on the one link between the nodes.  With only the server
# or only the clients preloaded the same requests succeed on kernel TCP and
# no link carries a connection.  Under wrk for 3 s, `rshare hub restart` of
# both nodes' hubs, three times, fails no request with keepalive on (the
# connections resume); with it off, connects under way are made again and
# the socket errors left are printed.  The
# request rates are printed, never asserted.

load lib
load apps

PORT_KA=8080 # keepalive on
PORT_CL=8081 # keepalive off: one request per connection
BLOB_SIZE=1048576

setup() {
	rs_require
	app_require nginx wrk curl
	rs_setup
	rs_two_nodes
	WWW=$(app_dir www)
	head -c $BLOB_SIZE /dev/urandom >"$WWW/blob.bin"
	BLOB_SUM=$(sha256sum <"$WWW/blob.bin" | cut -d' ' -f1)
	echo "<html><body>nginx over rshare $RS_SUF</body></html>" >"$WWW/index.html"
	INDEX_SIZE=$(stat -c %s "$WWW/index.html")
	chmod 644 "$WWW"/*
	nginx_conf
	# wrk's own counts, exact, on one line
	cat >"$RS_TMP/summary.lua" <<-'EOF'
		done = function(s, latency, requests)
			local e = s.errors
			io.write(string.format("wrk-summary requests=%d bytes=%d errors=%d status=%d\n",
				s.requests, s.bytes, e.connect + e.read + e.write + e.timeout, e.status))
		end
	EOF
	NGINX_PID=
}

teardown() {
	app_stop "$NGINX_PID"
	rs_teardown
}

nginx_conf() {
	local d
	d=$(app_dir nginx)
	mkdir -p "$d/tmp"
	NGINX_CONF=$d/nginx.conf
	cat >"$NGINX_CONF" <<-EOF
		daemon off;
		master_process on;
		worker_processes 4;
		user root root;
		pid $d/nginx.pid;
		error_log $d/error.log info;
		events {
			use epoll;
			worker_connections 1024;
		}
		http {
			access_log off;
			sendfile on;
			tcp_nopush on;
			client_body_temp_path $d/tmp/body;
			proxy_temp_path $d/tmp/proxy;
			fastcgi_temp_path $d/tmp/fastcgi;
			uwsgi_temp_path $d/tmp/uwsgi;
			scgi_temp_path $d/tmp/scgi;
			types {
				text/html html;
				application/octet-stream bin;
			}
			root $WWW;
			server {
				listen $ADDR_A:$PORT_KA;
				keepalive_timeout 60s;
				keepalive_requests 1000000;
			}
			server {
				listen $ADDR_A:$PORT_CL;
				keepalive_timeout 0;
			}
		}
	EOF
}

# nginx_start [--rshare]: the server on node A, both ports listening
nginx_start() {
	rs_bg nginx "$NS_A" "$@" nginx -p "$RS_TMP/nginx" -c "$NGINX_CONF" -e stderr
	NGINX_PID=$RS_LASTPID
	app_wait_listen "$NS_A" $PORT_KA "$NGINX_PID"
	app_wait_listen "$NS_A" $PORT_CL "$NGINX_PID"
	# all 4 workers are up
	local i
	for ((i = 0; i < 100; i++)); do
		(($(pgrep -c -f 'nginx: worker process' -P "$(cat "$RS_TMP/nginx/nginx.pid" 2>/dev/null || echo 1)") == 4)) && return 0
		app_gone "$NGINX_PID" && break
		sleep 0.1
	done
	rs_fail "nginx did not start 4 workers: $(cat "$RS_TMP/nginx.err")"
}

nginx_stop() {
	app_stop "$NGINX_PID" || rs_fail "nginx did not stop"
	NGINX_PID=
}

# fetch NAME [--rshare]: curl on node B gets index.html and blob.bin from
# both server blocks; each answer must be the file, byte for byte
fetch() {
	local name=$1 port f got
	shift
	for port in $PORT_KA $PORT_CL; do
		for f in index.html blob.bin; do
			app_run "$name-$port-$f" "$NS_B" "$@" curl -sS --fail --max-time 10 \
				-o "$RS_TMP/got-$name-$port-$f" "http://$ADDR_A:$port/$f"
			got=$(sha256sum <"$RS_TMP/got-$name-$port-$f" | cut -d' ' -f1)
			[[ $got == "$(sha256sum <"$WWW/$f" | cut -d' ' -f1)" ]] ||
				rs_fail "$name: $f from port $port differs: $(stat -c %s "$RS_TMP/got-$name-$port-$f") bytes, sha256 $got"
		done
	done
}

# bench NAME SECS PORT [--rshare]: wrk on node B for SECS; sets REQS,
# BYTES (read by wrk) and RATE (requests per second); every request
# must have succeeded
bench() {
	local name=$1 secs=$2 port=$3 s
	shift 3
	app_run "$name" "$NS_B" "$@" wrk -t 2 -c 16 -d "${secs}s" -s "$RS_TMP/summary.lua" \
		"http://$ADDR_A:$port/index.html"
	s=$(grep '^wrk-summary ' "$RS_TMP/$name.out") || rs_fail "$name: no summary: $(cat "$RS_TMP/$name.out" "$RS_TMP/$name.err")"
	[[ $s =~ requests=([0-9]+)\ bytes=([0-9]+)\ errors=([0-9]+)\ status=([0-9]+) ]]
	REQS=${BASH_REMATCH[1]} BYTES=${BASH_REMATCH[2]} ERRS=${BASH_REMATCH[3]}
	# (SOCKET_ERRORS_OK: socket errors are counted in ERRS, not failed on)
	(((BASH_REMATCH[3] == 0 || ${SOCKET_ERRORS_OK:-0}) && BASH_REMATCH[4] == 0 && REQS > 0)) ||
		rs_fail "$name: wrk saw errors: $(cat "$RS_TMP/$name.out")"
	RATE=$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$RS_TMP/$name.out")
}

@test "nginx: 4 epoll workers with sendfile serve wrk and curl over one rshare link, keepalive on and off" {
	local k_ka k_cl r_ka r_cl
	# kernel TCP: the baseline, and the harness checked
	nginx_start
	fetch kernel
	bench kernel-ka 2 $PORT_KA
	k_ka=$RATE
	bench kernel-close 2 $PORT_CL
	k_cl=$RATE
	nginx_stop

	# rshare: server and clients preloaded
	nginx_start --rshare
	app_snap before
	fetch rshare --rshare
	app_snap fetched
	app_check_rshare "curl's 4 fetches went over the link" before fetched \
		4 $((4 * 30)) $((2 * (BLOB_SIZE + INDEX_SIZE)))
	bench rshare-ka 2 $PORT_KA --rshare
	r_ka=$RATE
	app_snap ka
	app_check_rshare "wrk with keepalive went over the link" fetched ka \
		16 $((REQS * 30)) "$BYTES"
	app_rates "nginx keepalive on (wrk -t2 -c16)" "$r_ka" "$k_ka"
	bench rshare-close 2 $PORT_CL --rshare
	r_cl=$RATE
	app_snap close
	# each request had its own connection
	app_check_rshare "wrk without keepalive went over the link, a connection per request" ka close \
		"$REQS" $((REQS * 30)) "$BYTES"
	app_rates "nginx keepalive off (wrk -t2 -c16, a connection per request)" "$r_cl" "$k_cl"
}

@test "nginx: with only the server preloaded, plain curl and wrk reach its kernel listener" {
	nginx_start --rshare
	app_snap s0
	fetch server
	bench server-ka 1 $PORT_KA
	bench server-close 1 $PORT_CL
	app_snap s1
	app_check_fallback "plain curl and wrk to a preloaded nginx" s0 s1 server 0 $PORT_KA
}

@test "nginx: with only the clients preloaded, curl and wrk fall back to kernel TCP" {
	nginx_start
	app_snap c0
	fetch client --rshare
	bench client-ka 1 $PORT_KA --rshare
	bench client-close 1 $PORT_CL --rshare
	app_snap c1
	app_check_fallback "preloaded curl and wrk to a plain nginx" c0 c1 client $((4 + 16 + REQS)) $PORT_KA
}

# restarts SECS NS...: `rshare hub restart` in each namespace, every SECS
# seconds, three rounds; each must say that it restarted
restarts() {
	local secs=$1 out i ns
	shift
	for i in 1 2 3; do
		sleep "$secs"
		for ns in "$@"; do
			out=$(ip netns exec "$ns" "$RSHARE" hub restart 2>&1) || echo "$ns: $out" >>"$RS_TMP/restart-failed"
		done
	done
}

@test "nginx: both hubs restarted three times under wrk: no request fails with keepalive on, and no HTTP error with it off" {
	nginx_start --rshare
	restarts 0.7 "$NS_A" "$NS_B" &
	bench restart-ka 3 $PORT_KA --rshare
	wait $!
	echo "# hub restarts under wrk, keepalive on: $REQS requests ($RATE/s), none failed" >&3
	# a connection per request: a connect in the restart's window may
	# still fail (a known gap, printed, not asserted on)
	restarts 0.7 "$NS_A" "$NS_B" &
	SOCKET_ERRORS_OK=1 bench restart-close 3 $PORT_CL --rshare
	wait $!
	echo "# hub restarts under wrk, keepalive off: $REQS requests ($RATE/s), $ERRS socket errors" >&3
	[[ ! -e $RS_TMP/restart-failed ]] || rs_fail "restarts: $(cat "$RS_TMP/restart-failed")"
	rs_stat "$NS_A" | jq -e '.counters.restarts == 6' >/dev/null || rs_fail "A: $(rs_stat "$NS_A" | jq -c .counters)"
	rs_stat "$NS_B" | jq -e '.counters.restarts == 6 and .counters.fallback_connects == 0' >/dev/null ||
		rs_fail "B: $(rs_stat "$NS_B" | jq -c .counters)"
}

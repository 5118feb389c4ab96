#!/usr/bin/env bats
# Apache httpd with the prefork MPM (a parent and its pre-forked children,
# each serving one connection at a time) on node A, ab on node B, for 2 s
# with keepalive and 2 s with a connection per request.  First all on
# kernel TCP (the baseline), then server and client preloaded: every
# request succeeds and the hubs' stat shows every connection and at least
# the bytes moved on the one link between the nodes.  With only the server
# or only the client preloaded the requests succeed on kernel TCP and no
# link carries a connection.  The request rates are printed, never asserted.

load lib
load apps

PORT=8082

setup() {
	rs_require
	app_require apache2 ab:apache2-utils
	[[ -e /usr/lib/apache2/modules/mod_mpm_prefork.so ]] ||
		skip "Apache's prefork module is not installed (Debian package apache2)"
	id www-data >/dev/null 2>&1 || skip "no user www-data for Apache's children"
	rs_setup
	rs_two_nodes
	WWW=$(app_dir www)
	echo "<html><body>apache over rshare $RS_SUF</body></html>" >"$WWW/index.html"
	chmod 644 "$WWW/index.html"
	apache_conf
	APACHE_PID=
}

teardown() {
	app_stop "$APACHE_PID"
	rs_teardown
}

apache_conf() {
	local d m=/usr/lib/apache2/modules
	d=$(app_dir apache)
	APACHE_CONF=$d/httpd.conf
	cat >"$APACHE_CONF" <<-EOF
		ServerRoot $d
		ServerName rshare-test
		LoadModule mpm_prefork_module $m/mod_mpm_prefork.so
		LoadModule authz_core_module $m/mod_authz_core.so
		LoadModule mime_module $m/mod_mime.so
		LoadModule dir_module $m/mod_dir.so
		# the children drop root (Debian's Apache refuses to serve as root)
		User www-data
		Group www-data
		PidFile $d/httpd.pid
		ErrorLog $d/error.log
		LogLevel info
		Mutex file:$d default
		Listen $ADDR_A:$PORT
		StartServers 4
		MinSpareServers 4
		MaxSpareServers 8
		MaxRequestWorkers 32
		KeepAlive On
		MaxKeepAliveRequests 0
		KeepAliveTimeout 5
		TypesConfig /etc/mime.types
		DocumentRoot $WWW
		<Directory $WWW>
			Require all granted
		</Directory>
		DirectoryIndex index.html
	EOF
}

# apache_start [--rshare]: the parent and its pre-forked children
apache_start() {
	rs_bg apache "$NS_A" "$@" apache2 -DFOREGROUND -f "$APACHE_CONF"
	APACHE_PID=$RS_LASTPID
	app_wait_listen "$NS_A" $PORT "$APACHE_PID"
	app_wait_log "$RS_TMP/apache/error.log" 'resuming normal operations' "$APACHE_PID"
}

apache_stop() {
	app_stop "$APACHE_PID" || rs_fail "apache did not stop"
	APACHE_PID=
	# the next parent binds the port once the old children are gone
	local i
	for ((i = 0; i < 50; i++)); do
		[[ -z $(ip netns exec "$NS_A" ss -tlnH "( sport = :$PORT )") ]] && return 0
		sleep 0.1
	done
	rs_fail "port $PORT still listens after apache stopped"
}

# bench NAME SECS [-k] [--rshare]: ab on node B for SECS (-k: keepalive);
# sets REQS, BYTES (ab's "Total transferred") and RATE; every request must
# have succeeded
bench() {
	local name=$1 secs=$2 ka=() failed non2xx
	shift 2
	if [[ ${1:-} == -k ]]; then
		ka=(-k)
		shift
	fi
	app_run "$name" "$NS_B" "$@" ab -q "${ka[@]}" -c 8 -t "$secs" -n 1000000 \
		"http://$ADDR_A:$PORT/index.html"
	REQS=$(sed -n 's/^Complete requests: *\([0-9]*\).*/\1/p' "$RS_TMP/$name.out")
	BYTES=$(sed -n 's/^Total transferred: *\([0-9]*\) bytes.*/\1/p' "$RS_TMP/$name.out")
	RATE=$(sed -n 's/^Requests per second: *\([0-9.]*\).*/\1/p' "$RS_TMP/$name.out")
	failed=$(sed -n 's/^Failed requests: *\([0-9]*\).*/\1/p' "$RS_TMP/$name.out")
	non2xx=$(sed -n 's/^Non-2xx responses: *\([0-9]*\).*/\1/p' "$RS_TMP/$name.out")
	[[ -n $REQS && -n $BYTES && -n $RATE ]] && ((REQS > 0 && failed == 0 && ${non2xx:-0} == 0)) ||
		rs_fail "$name: ab failed: $(cat "$RS_TMP/$name.out" "$RS_TMP/$name.err")"
}

@test "apache prefork: ab with and without keepalive over one rshare link" {
	local k_ka k_cl r_ka r_cl
	# kernel TCP: the baseline, and the harness checked
	apache_start
	bench kernel-ka 2 -k
	k_ka=$RATE
	bench kernel-close 2
	k_cl=$RATE
	apache_stop

	# rshare: server and client preloaded
	apache_start --rshare
	app_snap before
	bench rshare-ka 2 -k --rshare
	r_ka=$RATE
	app_snap ka
	# ab's 8 connections; a request line is more than 30 bytes
	app_check_rshare "ab with keepalive went over the link" before ka \
		8 $((REQS * 30)) "$BYTES"
	app_rates "apache prefork keepalive (ab -k -c8)" "$r_ka" "$k_ka"
	bench rshare-close 2 --rshare
	r_cl=$RATE
	app_snap close
	app_check_rshare "ab without keepalive went over the link, a connection per request" ka close \
		"$REQS" $((REQS * 30)) "$BYTES"
	app_rates "apache prefork a connection per request (ab -c8)" "$r_cl" "$k_cl"
}

@test "apache prefork: with only the server preloaded, plain ab reaches its kernel listener" {
	apache_start --rshare
	app_snap s0
	bench server-ka 1 -k
	bench server-close 1
	app_snap s1
	app_check_fallback "plain ab to a preloaded apache" s0 s1 server 0 $PORT
}

@test "apache prefork: with only the client preloaded, ab falls back to kernel TCP" {
	apache_start
	app_snap c0
	bench client-ka 1 -k --rshare
	bench client-close 1 --rshare
	app_snap c1
	app_check_fallback "preloaded ab to a plain apache" c0 c1 client $((8 + REQS)) $PORT
}

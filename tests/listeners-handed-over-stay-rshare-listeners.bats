#!/usr/bin/env bats
# Listeners that a program gets from another one stay rshare listeners:
# - systemd's socket activation: systemd-socket-activate (not preloaded, as
#   systemd is not) makes the listener and, at the first connection,
#   execs gunicorn (4 pre-fork workers) with LISTEN_FDS; the preloaded
#   gunicorn serves on it, every connection after that first one over
#   rshare;
# - nginx's binary upgrade: under load, the master is told to exec a new
#   master (USR2), which takes the listeners over through exec (the NGINX
#   variable) and starts its workers, then the old master leaves (QUIT).
# ab on node B makes its requests, one connection each, on kernel TCP and
# then with both sides preloaded: none fails either way, and the hubs'
# stat shows the connections on the one link and the listener still an
# rshare one at the end.

load lib
load apps

setup() {
	rs_require
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# listening_on NS PORT: the listeners of the hub of NS on PORT
listening_on() {
	rs_stat "$1" | jq --argjson p "$2" '[.sockets[] | select(.state == "listening" and (.local | endswith(":\($p)")))] | length'
}

run_gunicorn() {
	local port=$1 pre=${2:-} d env=() i
	d=$(app_dir "gu-$port")
	cat >"$d/app.py" <<-'PY'
		import os
		def app(environ, start_response):
		    start_response('200 OK', [('Content-Type', 'text/plain')])
		    return [b'ok from %10d\n' % os.getpid()]  # one length: ab counts a longer answer as failed
	PY
	[[ -n $pre ]] && env=(-E "LD_PRELOAD=$RS_BUILD/librshare.so")
	rs_bg "gu-$port" "$NS_A" systemd-socket-activate -l "$ADDR_A:$port" "${env[@]}" \
		gunicorn -w 4 --chdir "$d" app:app
	app_wait_listen "$NS_A" "$port"
	# systemd-socket-activate starts gunicorn at the first connection,
	# which the kernel listener takes alone (kernel TCP, as under systemd):
	# a first request, then wait for the rshare listener
	RS_TIMEOUT=30 rs_exec "$NS_B" $pre curl -s -o /dev/null "http://$ADDR_A:$port/"
	for ((i = 0; i < 100; i++)); do
		[[ -z $pre || $(listening_on "$NS_A" "$port") == 1 ]] && break
		sleep 0.1
	done
	app_snap "before-$port"
	RS_TIMEOUT=120 rs_exec "$NS_B" $pre ab -q -n 2000 -c 4 "http://$ADDR_A:$port/" >"$RS_TMP/ab-$port.out" 2>&1
	out=$(ab_counts "$RS_TMP/ab-$port.out")
}

@test "systemd socket activation: gunicorn's workers serve on the listener over rshare" {
	local tcp
	app_require systemd-socket-activate:systemd gunicorn ab:apache2-utils
	run_gunicorn 7831
	tcp=$out
	[[ $tcp == "complete=2000 failed=0 non2xx=0" ]] || rs_fail "kernel TCP: $tcp"
	run_gunicorn 7832 --rshare
	app_snap after
	[[ $out == "$tcp" ]] || rs_fail "rshare: '$out', kernel TCP: '$tcp' $(tail -n 5 "$RS_TMP/gu-7832.err")"
	app_check_rshare "gunicorn over rshare" before-7832 after 2000 1 1
	[[ $(listening_on "$NS_A" 7832) == 1 ]] || rs_fail "no rshare listener on 7832"
}

run_upgrade() {
	local port=$1 pre=${2:-} d abpid old i
	d=$(app_dir "ngx-$port")
	mkdir -p "$d/tmp" "$d/www"
	echo "upgrade $port" >"$d/www/index.html"
	chmod -R a+rX "$d"
	cat >"$d/nginx.conf" <<-EOF
		master_process on;
		worker_processes 2;
		user root root;
		pid $d/nginx.pid;
		error_log $d/error.log info;
		events { use epoll; worker_connections 1024; }
		http {
			access_log off;
			client_body_temp_path $d/tmp/body;
			proxy_temp_path $d/tmp/proxy;
			fastcgi_temp_path $d/tmp/fastcgi;
			uwsgi_temp_path $d/tmp/uwsgi;
			scgi_temp_path $d/tmp/scgi;
			root $d/www;
			server { listen $ADDR_A:$port; keepalive_timeout 0; }
		}
	EOF
	# a daemon master: the new one outlives the old one's exit
	# by its full path: the upgrade execs the same path again
	RS_TIMEOUT=10 rs_exec "$NS_A" $pre "$(command -v nginx)" -c "$d/nginx.conf" || rs_fail "nginx did not start"
	app_wait_listen "$NS_A" "$port"
	rs_bg "ab-$port" "$NS_B" $pre ab -q -n 6000 -c 4 "http://$ADDR_A:$port/"
	abpid=$RS_LASTPID
	sleep 1
	old=$(cat "$d/nginx.pid")
	kill -USR2 "$old"
	for ((i = 0; i < 100; i++)); do
		[[ -s $d/nginx.pid.oldbin && -s $d/nginx.pid ]] && [[ $(cat "$d/nginx.pid") != "$old" ]] && break
		sleep 0.1
	done
	[[ $(cat "$d/nginx.pid") != "$old" ]] || rs_fail "no new master after USR2 $(tail -n 5 "$d/error.log")"
	sleep 1
	kill -QUIT "$old"
	rs_wait_pid "$abpid" 120 >/dev/null
	out=$(ab_counts "$RS_TMP/ab-$port.out")
	NEW_MASTER=$(cat "$d/nginx.pid")
}

@test "nginx's binary upgrade under load: the new master takes the listener over by exec, over rshare" {
	local tcp
	app_require nginx ab:apache2-utils
	run_upgrade 7833
	tcp=$out
	[[ $tcp == "complete=6000 failed=0 non2xx=0" ]] || rs_fail "kernel TCP: $tcp"
	app_snap before
	run_upgrade 7834 --rshare
	app_snap after
	[[ $out == "$tcp" ]] || rs_fail "rshare: '$out', kernel TCP: '$tcp'"
	app_check_rshare "nginx upgrade over rshare" before after 6000 1 1
	[[ $(listening_on "$NS_A" 7834) == 1 ]] || rs_fail "no rshare listener on 7834 after the upgrade"
	rs_stat "$NS_A" | jq -e --argjson p "$NEW_MASTER" '[.sockets[] | select(.state == "listening") | .holders[]] | index($p) != null' >/dev/null ||
		rs_fail "the new master $NEW_MASTER does not hold the listener"
}

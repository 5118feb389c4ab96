#!/usr/bin/env bats
# Node.js cluster: an HTTP server of 4 workers on node A, under both of
# cluster's scheduling policies.  With the default (round robin), the
# primary accepts each connection and hands it to a worker over its IPC
# channel (SCM_RIGHTS); with "none", the primary hands the listening
# socket to every worker, which accepts on it.  ab on node B runs 2,000
# requests against each, first on kernel TCP, then with both sides
# preloaded: every request is answered, by every worker, and the hubs'
# stat shows the connections on the one link, none fallen back.

load lib
load apps

setup() {
	rs_require
	app_require node:nodejs ab:apache2-utils
	rs_setup
	rs_two_nodes
	JS=$RS_TMP/cluster.js
	cat >"$JS" <<-'JS'
		const cluster = require('cluster'), http = require('http');
		const port = +process.argv[2], n = 4;
		if (cluster.isPrimary) {
			let up = 0;
			for (let i = 0; i < n; i++) cluster.fork();
			cluster.on('listening', () => { if (++up === n) console.log('ready'); });
		} else {
			http.createServer((q, r) => r.end('hello from worker ' + cluster.worker.id + '\n')).listen(port);
		}
	JS
}

teardown() {
	rs_teardown
}

# run POLICY PORT [--rshare]: the cluster, then ab and 8 curls; $out has
# ab's counts, $who the workers that answered
run_cluster() {
	local policy=$1 port=$2 pre=${3:-}
	NODE_CLUSTER_SCHED_POLICY=$policy rs_bg "node-$port" "$NS_A" $pre node "$JS" "$port"
	rs_wait_ready "node-$port" 30
	out=$(RS_TIMEOUT=120 rs_exec "$NS_B" $pre ab -q -n 2000 -c 8 "http://$ADDR_A:$port/" 2>&1 |
		awk '/^Complete requests/ {c=$3} /^Failed requests/ {f=$3} /^Requests per second/ {r=$4}
			END {printf "complete=%s failed=%s\n", c, f; print r > "/dev/stderr"}' 2>"$RS_TMP/rate-$port")
	who=$(for i in 1 2 3 4 5 6 7 8; do
		RS_TIMEOUT=10 rs_exec "$NS_B" $pre curl -s "http://$ADDR_A:$port/"; done | sort -u | wc -l)
}

check_cluster() {
	local policy=$1 port=$2 tcp
	run_cluster "$policy" "$port"
	tcp=$out
	[[ $tcp == "complete=2000 failed=0" ]] || rs_fail "kernel TCP: $tcp"
	app_snap before
	run_cluster "$policy" $((port + 1)) --rshare
	app_snap after
	[[ $out == "$tcp" ]] || rs_fail "rshare: '$out', kernel TCP: '$tcp' $(tail -n 5 "$RS_TMP/node-$((port + 1)).err")"
	((who >= 2)) || rs_fail "only $who worker(s) answered over rshare"
	app_check_rshare "cluster ($policy) over rshare" before after 2000 1 1
	echo "# node cluster ($policy): rshare $(cat "$RS_TMP/rate-$((port + 1))") req/s, kernel TCP $(cat "$RS_TMP/rate-$port") req/s" >&3
}

@test "Node.js cluster, round robin: connections the primary hands to workers serve over rshare" {
	check_cluster rr 7801
}

@test "Node.js cluster, none: the listener handed to the workers accepts over rshare" {
	check_cluster none 7803
}

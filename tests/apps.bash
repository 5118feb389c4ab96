# apps.bash - shared helpers of the tests that run real servers and
# benchmarks from Debian (nginx, Apache, PostgreSQL, memcached, Redis) on
# two nodes; load it after lib:
#
#   load lib
#   load apps
#
#   app_require CMD[:PACKAGE]...   skip unless each CMD is installed
#   app_dir NAME [OWNER]           $RS_TMP/NAME, made; the servers' users may reach it
#   app_wait_listen NS PORT [PID] [SECS]
#                                  until something listens on PORT in NS
#   app_wait_log FILE PATTERN PID [SECS]
#                                  until the server's log says it is ready
#   app_snap NAME                  rs_stat of both nodes into $RS_TMP/NAME.{A,B}.json
#   app_check_rshare DESC BEFORE AFTER CONNS TX RX
#                                  between the snapshots, the traffic went over
#                                  the one link of the two nodes
#   app_check_fallback DESC BEFORE AFTER client|server CONNS PORT
#                                  between the snapshots, no connection went on a link
#   app_rates NAME RSHARE KERNEL [UNIT]
#                                  prints "# NAME: rshare R req/s, kernel TCP K req/s"
#   app_stop PID [SECS]            SIGTERM (or $APP_STOP_SIG) and wait for the exit
#   ab_counts FILE                 ab's counts on one line: complete=C failed=F non2xx=N
#
# Each test runs the benchmark three ways and a few checks each way:
#   kernel TCP  nothing preloaded: the baseline, and proof that the harness
#               (configuration, client, checks of the answers) is right;
#   rshare      server and client preloaded: the hubs' stat must show the
#               connections and at least the bytes moved on the one link;
#   fallback    only one side preloaded: the requests succeed on kernel TCP
#               and no link carries a connection for them.
# Speeds are printed as TAP comments and never asserted.

# programs a benchmark or a request may take at most, in seconds
APP_TIMEOUT=${APP_TIMEOUT:-30}

# app_require CMD[:PACKAGE]...: skip unless every CMD is in PATH
app_require() {
	local c cmd pkg
	for c in "$@"; do
		cmd=${c%%:*}
		pkg=${c#*:}
		[[ $pkg == "$c" ]] && pkg=$cmd
		command -v "$cmd" >/dev/null 2>&1 ||
			skip "$cmd not installed (Debian package $pkg; tools/deps.sh installs it)"
	done
}

# app_dir NAME [OWNER]: make $RS_TMP/NAME (owned by OWNER when given) and
# let other users pass through the directories above it, since servers
# that drop root (Apache's workers, PostgreSQL) must reach their files.
app_dir() {
	local d=$RS_TMP/$1 p
	mkdir -p "$d"
	p=$RS_TMP
	while [[ -n $p && $p != / ]]; do
		case $(stat -c %A "$p") in
		?????????[xt]) ;;
		*) chmod o+x "$p" ;;
		esac
		p=$(dirname "$p")
	done
	if [[ -n ${2:-} ]]; then
		chown "$2:" "$d"
		chmod 700 "$d"
	else
		chmod 755 "$d"
	fi
	echo "$d"
}

# app_gone PID: true, with what became of it on stderr, when the
# background server PID (rs_bg's) has exited
app_gone() {
	local rc=0
	kill -0 "$1" 2>/dev/null && return 1
	wait "$1" 2>/dev/null || rc=$?
	if ((rc > 128)); then
		echo "server (pid $1) exited with status $rc: killed by SIG$(kill -l $((rc - 128)) 2>/dev/null)" >&2
	else
		echo "server (pid $1) exited with status $rc" >&2
	fi
	return 0
}

# app_wait_listen NS PORT [PID] [SECS]: a kernel listener on PORT in NS;
# fails at once when the server PID is gone
app_wait_listen() {
	local ns=$1 port=$2 pid=${3:-} secs=${4:-20} i
	for ((i = 0; i < secs * 10; i++)); do
		[[ -n $(ip netns exec "$ns" ss -tlnH "( sport = :$port )" 2>/dev/null) ]] && return 0
		[[ -n $pid ]] && app_gone "$pid" && break
		sleep 0.1
	done
	rs_fail "nothing listens on port $port in $ns"
}

# app_wait_log FILE PATTERN PID [SECS]: FILE has a line matching PATTERN
# (extended regex); fails at once when the server PID is gone
app_wait_log() {
	local file=$1 pat=$2 pid=$3 secs=${4:-20} i
	for ((i = 0; i < secs * 10; i++)); do
		grep -qE -- "$pat" "$file" 2>/dev/null && return 0
		app_gone "$pid" && break
		sleep 0.1
	done
	tail -n 20 "$file" >&2 2>/dev/null
	rs_fail "$file: no line matches '$pat'"
}

# app_snap NAME: both hubs' stat, as $RS_TMP/NAME.A.json and NAME.B.json
app_snap() {
	rs_stat "$NS_A" >"$RS_TMP/$1.A.json" || rs_fail "rshare stat on node A failed"
	rs_stat "$NS_B" >"$RS_TMP/$1.B.json" || rs_fail "rshare stat on node B failed"
}

# jq definitions for the two checks: the link of a node's snapshot with a
# given id as it was before (zeros when it did not exist yet)
APP_JQ_DEFS='
def before($N; $id): ([$N.links[]? | select(.id == $id)][0] //
	{connections_total: 0, bytes_tx: 0, bytes_rx: 0});
'

# app_check_rshare DESC BEFORE AFTER CONNS TX RX
# Between the snapshots BEFORE and AFTER (app_snap names): each node has
# exactly one link, to the other node, up; that link carried at least CONNS
# more connections on both nodes, and at least TX more bytes from node B
# (the clients) to node A (the server) and RX more from A to B; no
# connection fell back to kernel TCP and no link was dropped.
app_check_rshare() {
	local desc=$1 b=$2 a=$3
	rs_jq_check "$desc" \
		--slurpfile a0 "$RS_TMP/$b.A.json" --slurpfile b0 "$RS_TMP/$b.B.json" \
		--slurpfile a1 "$RS_TMP/$a.A.json" --slurpfile b1 "$RS_TMP/$a.B.json" \
		--argjson conns "$4" --argjson tx "$5" --argjson rx "$6" "$APP_JQ_DEFS"'
		$a0[0] as $A0 | $b0[0] as $B0 | $a1[0] as $A | $b1[0] as $B |
		one_link($A; $B),
		($A.links[0] // {}) as $LA | ($B.links[0] // {}) as $LB |
		before($A0; $LA.id) as $PA | before($B0; $LB.id) as $PB |
		($LA.connections_total - $PA.connections_total) as $ca |
		($LB.connections_total - $PB.connections_total) as $cb |
		fail($cb >= $conns; "node B link carried \($cb) new connections, the benchmark made at least \($conns)"),
		fail($ca >= $conns; "node A link carried \($ca) new connections, the benchmark made at least \($conns)"),
		fail($LB.bytes_tx - $PB.bytes_tx >= $tx;
		     "node B link sent \($LB.bytes_tx - $PB.bytes_tx) bytes, the clients sent at least \($tx)"),
		fail($LA.bytes_rx - $PA.bytes_rx >= $tx;
		     "node A link received \($LA.bytes_rx - $PA.bytes_rx) bytes, the clients sent at least \($tx)"),
		fail($LB.bytes_rx - $PB.bytes_rx >= $rx;
		     "node B link received \($LB.bytes_rx - $PB.bytes_rx) bytes, the clients received at least \($rx)"),
		fail($LA.bytes_tx - $PA.bytes_tx >= $rx;
		     "node A link sent \($LA.bytes_tx - $PA.bytes_tx) bytes, the clients received at least \($rx)"),
		fail($B.counters.fallback_connects == $B0.counters.fallback_connects;
		     "\($B.counters.fallback_connects - $B0.counters.fallback_connects) connections of node B fell back to kernel TCP"),
		fail($A.counters.links_dropped == $A0.counters.links_dropped and
		     $B.counters.links_dropped == $B0.counters.links_dropped;
		     "links dropped: A \($A.counters.links_dropped - $A0.counters.links_dropped), B \($B.counters.links_dropped - $B0.counters.links_dropped)")'
}

# app_check_fallback DESC BEFORE AFTER SIDE CONNS PORT
# SIDE is the side that was preloaded. Between the snapshots no link of
# either node carried a new connection and no socket is on a link.  With
# SIDE client, node B's hub counted at least CONNS connections that fell
# back to kernel TCP (so the client did go through rshare and was turned
# away); with SIDE server, node A's hub has the server's rshare listener on
# PORT (so the server was preloaded) and node B's hub saw nothing.
app_check_fallback() {
	local desc=$1 b=$2 a=$3
	rs_jq_check "$desc" \
		--slurpfile a0 "$RS_TMP/$b.A.json" --slurpfile b0 "$RS_TMP/$b.B.json" \
		--slurpfile a1 "$RS_TMP/$a.A.json" --slurpfile b1 "$RS_TMP/$a.B.json" \
		--arg side "$4" --argjson conns "$5" --argjson port "$6" "$APP_JQ_DEFS"'
		$a0[0] as $A0 | $b0[0] as $B0 | $a1[0] as $A | $b1[0] as $B |
		(([$A0, $A], [$B0, $B]) as [$N0, $N] |
			($N.links[] | . as $L | before($N0; $L.id) as $P |
				fail($L.connections_total == $P.connections_total;
				     "link \($L.id) of node \($N.node) carried \($L.connections_total - $P.connections_total) connections")),
			($N.sockets[] | select(.link != 0) |
				"socket \(.sid) (\(.state) \(.local) -> \(.peer)) of node \($N.node) is on link \(.link)")),
		if $side == "client" then
			($B.counters.fallback_connects - $B0.counters.fallback_connects) as $f |
			fail($f >= $conns; "node B counted \($f) fallback connects, the preloaded client made at least \($conns)")
		else
			fail([$A.sockets[] | select(.state == "listening" and (.local|port_of) == $port)] | length >= 1;
			     "node A has no rshare listener on port \($port): is the server preloaded?"),
			fail($B.links|length == 0; "node B has \($B.links|length) links, its client was not preloaded"),
			fail($B.sockets|length == 0; "node B has \($B.sockets|length) rshare sockets, its client was not preloaded")
		end'
}

# app_rates NAME RSHARE KERNEL [UNIT]: one TAP comment line with both rates
app_rates() {
	local u=${4:-req/s}
	printf '# %s: rshare %s %s, kernel TCP %s %s\n' "$1" "${2:-n/a}" "$u" "${3:-n/a}" "$u" >&3
}

# app_stop PID [SECS]: signal $APP_STOP_SIG (TERM) and wait until it is gone
app_stop() {
	local pid=$1 secs=${2:-10} i
	[[ -n $pid ]] || return 0
	kill -"${APP_STOP_SIG:-TERM}" "$pid" 2>/dev/null || return 0
	for ((i = 0; i < secs * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

# app_run NAME NS [--rshare] PROG ARGS: foreground, bounded by APP_TIMEOUT,
# output in $RS_TMP/NAME.out and NAME.err; its exit status.  On failure the
# end of both is shown (bats prints it with the failure).
app_run() {
	local name=$1 rc=0
	shift
	RS_TIMEOUT=$APP_TIMEOUT rs_exec "$@" >"$RS_TMP/$name.out" 2>"$RS_TMP/$name.err" </dev/null || rc=$?
	if ((rc != 0)); then
		echo "--- $name exited $rc$( ((rc == 124)) && echo " (killed after ${APP_TIMEOUT}s)")" >&2
		tail -n 15 "$RS_TMP/$name.out" "$RS_TMP/$name.err" >&2
	fi
	return $rc
}

# ab_counts FILE: ab's counts on one line
ab_counts() {
	awk '/^Complete requests/ {c=$3} /^Failed requests/ {f=$3} /^Non-2xx/ {n=$3}
		END {printf "complete=%s failed=%s non2xx=%s\n", c, f, n + 0}' "$1"
}

# lib.bash - shared helpers of the Bats tests.
#
# Every test gets its own network namespaces (unique names), its own hubs
# and a temp dir; everything it starts runs inside those namespaces under
# `timeout`, so teardown can end all of it by the namespaces' pid lists and
# then delete the namespaces (which deletes the veth pair).
#
#   rs_two_nodes            rsA-*/rsB-* joined by a veth, 10.199.0.1/.2, hubs up
#   rs_netns NAME           one more bare namespace (lo up), no hub
#   rs_hub_start NS         build/rshared in NS, waits until stat answers
#   rs_bg NAME NS [--rshare] PROG ARGS   background, output in $RS_TMP/NAME.{out,err}
#   rs_exec NS [--rshare] PROG ARGS      foreground, bounded by $RS_TIMEOUT
#   rs_stat NS              `rshare stat --json` of the hub of NS
#   rs_wait_file FILE PATTERN [COUNT] [SECS]
#   rs_wait_pid PID [SECS]  its exit status (124 when it outlived SECS)
#   rs_jq_check DESC JQ-ARGS... a jq program printing one line per failure

RS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RS_BUILD=${RSHARE_BUILD:-$RS_ROOT/build}
RS_BIN=$RS_BUILD/tests
RSHARE=$RS_BUILD/rshare
RSHARED=$RS_BUILD/rshared
RS_TIMEOUT=${RS_TIMEOUT:-60}
RS_PORT=${RSHARE_PORT:-18515}
ADDR_A=10.199.0.1
ADDR_B=10.199.0.2
RS_NSS=()

rs_fail() {
	echo "FAIL: $*" >&2
	return 1
}

# Skip unless we can make namespaces and the rshare binaries exist.
rs_require() {
	[[ $EUID -eq 0 ]] || skip "needs root for network namespaces"
	command -v ip >/dev/null && command -v jq >/dev/null && command -v ss >/dev/null ||
		skip "needs ip, ss and jq"
	local f
	for f in "$RSHARE" "$RSHARED" "$RS_BUILD/librshare.so"; do
		[[ -e $f ]] || skip "$f not built"
	done
	for f in "$@"; do
		[[ -x $RS_BIN/$f ]] || skip "$RS_BIN/$f not built"
	done
}

rs_setup() {
	RS_TMP=${BATS_TEST_TMPDIR:-$(mktemp -d)}
	mkdir -p "$RS_TMP"
	RS_SUF=$(printf '%x' $(( (RANDOM << 15 | RANDOM) & 0xffffff )))
	NS_A=rsA-$RS_SUF
	NS_B=rsB-$RS_SUF
}

rs_netns() {
	local ns=$1
	ip netns add "$ns" || return
	RS_NSS+=("$ns")
	ip -n "$ns" link set lo up
}

rs_two_nodes() {
	rs_netns "$NS_A" || return
	rs_netns "$NS_B" || return
	ip link add "va$RS_SUF" netns "$NS_A" type veth peer name "vb$RS_SUF" netns "$NS_B" || return
	ip -n "$NS_A" addr add $ADDR_A/24 dev "va$RS_SUF"
	ip -n "$NS_B" addr add $ADDR_B/24 dev "vb$RS_SUF"
	ip -n "$NS_A" link set "va$RS_SUF" up
	ip -n "$NS_B" link set "vb$RS_SUF" up
	# the link is up when both ends are (a veth has its carrier at once)
	local i
	for ((i = 0; i < 250; i++)); do
		[[ $(ip -n "$NS_A" -br link show dev "va$RS_SUF") == *" UP "* &&
		   $(ip -n "$NS_B" -br link show dev "vb$RS_SUF") == *" UP "* ]] && break
		sleep 0.02
	done
	if [[ ${1:-hubs} == hubs ]]; then
		rs_hub_start "$NS_A" || return
		rs_hub_start "$NS_B" || return
	fi
}

rs_stat() {
	ip netns exec "$1" timeout -k 2 "${RS_STAT_TIMEOUT:-5}" "$RSHARE" stat --json
}

# rs_retry SECS CMD...: run CMD every 0.05 s until it succeeds or SECS pass
rs_retry() {
	local deadline=$((SECONDS + $1))
	shift
	while :; do
		"$@" && return 0
		((SECONDS < deadline)) || return 1
		sleep 0.05
	done
}

# rs_hub_start NS [WRAPPER...]: a hub in NS (run by WRAPPER, e.g. prlimit;
# with the options in RS_HUB_ARGS)
rs_hub_start() {
	local ns=$1 deadline=$((SECONDS + 10))
	shift
	RSHARE_LOG=debug rs_bg "hub-$ns" "$ns" "$@" "$RSHARED" ${RS_HUB_ARGS:-} || return
	while ((SECONDS < deadline)); do
		# -s: empty input (a hub that did not answer) is [] and fails
		rs_stat "$ns" 2>/dev/null | jq -se '.[0].node != null' >/dev/null 2>&1 && return 0
		kill -0 "$RS_LASTPID" 2>/dev/null || break
		sleep 0.02
	done
	tail -n 30 "$RS_TMP/hub-$ns.err" >&2
	rs_fail "hub in $ns did not answer stat within 10 s"
}

rs_bg() {
	local name=$1 ns=$2 pre=()
	shift 2
	if [[ $1 == --rshare ]]; then
		pre=("$RSHARE" run --)
		shift
	fi
	ip netns exec "$ns" setsid timeout -k 5 "${RS_BG_TIMEOUT:-300}" "${pre[@]}" "$@" \
		>"$RS_TMP/$name.out" 2>"$RS_TMP/$name.err" </dev/null &
	RS_LASTPID=$!
	echo "$RS_LASTPID" >"$RS_TMP/$name.pid"
}

rs_exec() {
	local ns=$1 pre=()
	shift
	if [[ $1 == --rshare ]]; then
		pre=("$RSHARE" run --)
		shift
	fi
	ip netns exec "$ns" timeout -k 5 "$RS_TIMEOUT" "${pre[@]}" "$@"
}

# Wait until FILE has COUNT lines matching PATTERN (extended regex).
rs_wait_file() {
	local file=$1 pat=$2 count=${3:-1} secs=${4:-30} i n
	for ((i = 0; i < secs * 20; i++)); do
		n=$(grep -cE -- "$pat" "$file" 2>/dev/null || true)
		[[ ${n:-0} -ge $count ]] && return 0
		sleep 0.05
	done
	tail -n 20 "$file" "${file%.out}.err" >&2 2>/dev/null || true
	rs_fail "$file: ${n:-0} lines match '$pat' after ${secs}s, want $count"
}

# Wait for a background child; its exit status, 124 if still running.
rs_wait_pid() {
	local pid=$1 secs=${2:-60} i
	for ((i = 0; i < secs * 50; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.02
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "pid $pid still running after ${secs}s" >&2
		return 124
	fi
	wait "$pid"
}

# rs_wait_listen NS PORT [--rshare] [SECS]: a kernel listener on PORT in NS
# and, with --rshare, the hub's listener too (a preloaded listen() makes
# the kernel's first, then registers at the hub)
rs_wait_listen() {
	local ns=$1 port=$2 hub= secs=10 deadline
	shift 2
	if [[ ${1:-} == --rshare ]]; then
		hub=1
		shift
	fi
	secs=${1:-10}
	deadline=$((SECONDS + secs))
	while :; do
		if [[ -n $(ip netns exec "$ns" ss -Hltn "sport = :$port" 2>/dev/null) ]]; then
			[[ -z $hub ]] && return 0
			rs_stat "$ns" 2>/dev/null | jq -e --arg p ":$port" \
				'any(.sockets[]; .state == "listening" and (.local | endswith($p)))' >/dev/null 2>&1 &&
				return 0
		fi
		((SECONDS < deadline)) || rs_fail "no listener on port $port in $ns after ${secs}s"
		sleep 0.05
	done
}

# rs_wait_ready NAME: the program NAME printed "ready"
rs_wait_ready() {
	rs_wait_file "$RS_TMP/$1.out" '^ready$' 1 "${2:-20}"
}

# rs_vs_kernel NAME CLIENT_NS PORT SERVER... -- CLIENT...: the same server
# (on node A, "PORT" in its arguments and the client's stands for the port)
# and client run once on kernel TCP (port PORT) and once both under rshare
# (PORT + 1); the client's output in $RS_TCP and $RS_RS, and the test fails
# unless they are equal and the kernel's is not empty.  The server prints
# "ready" once listening.
rs_vs_kernel() {
	local name=$1 cns=$2 port=$3 srv=() cli=() p pre
	shift 3
	while [[ $1 != -- ]]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	for pre in "" --rshare; do
		p=$port
		[[ -n $pre ]] && p=$((port + 1))
		rs_bg "$name-srv-$p" "$NS_A" $pre "${srv[@]//PORT/$p}"
		rs_wait_ready "$name-srv-$p"
		out=$(rs_exec "$cns" $pre "${cli[@]//PORT/$p}" 2>"$RS_TMP/$name-cli-$p.err") || true
		if [[ -z $pre ]]; then RS_TCP=$out; else RS_RS=$out; fi
	done
	[[ -n $RS_TCP ]] || rs_fail "kernel TCP: no output ($(tail -n 3 "$RS_TMP/$name-cli-$port.err"))"
	[[ $RS_RS == "$RS_TCP" ]] || rs_fail "rshare: '$RS_RS', kernel TCP: '$RS_TCP'"
}

# jq definitions shared by the checks.
RS_JQ_DEFS='
def fail(c; msg): if c then empty else msg end;
def port_of: (. // "") | split(":") | last | tonumber? // -1;
def host_of: (. // "") | sub(":[0-9]+$"; "");
# one_link(A; B): nodes A (10.199.0.1) and B (10.199.0.2) each have exactly
# one link, to the other, and it is up
def one_link($A; $B):
  fail($A.links|length == 1; "node A has \($A.links|length) links, want 1"),
  fail($B.links|length == 1; "node B has \($B.links|length) links, want 1"),
  fail($A.node != $B.node; "both hubs claim node \($A.node)"),
  (($A.links[0] // {}) as $LA | ($B.links[0] // {}) as $LB |
   fail($LA.peer_node == $B.node; "A link peer_node \($LA.peer_node), B is \($B.node)"),
   fail($LB.peer_node == $A.node; "B link peer_node \($LB.peer_node), A is \($A.node)"),
   fail(($LB.peer|host_of) == "10.199.0.1"; "B link peer \($LB.peer)"),
   fail(($LA.peer|host_of) == "10.199.0.2"; "A link peer \($LA.peer)"),
   fail($LA.state == "up" and $LB.state == "up"; "link states A \($LA.state) B \($LB.state)"));
'

# rs_jq_check DESC [jq options...] PROGRAM: PROGRAM prints one string per
# failed condition; none means pass.  (Bats runs under set -e: whatever is
# printed must come before rs_fail, which ends the test.)
rs_jq_check() {
	local desc=$1 out
	shift
	local args=("$@")
	local prog=${args[-1]}
	unset 'args[-1]'
	if ! out=$(jq -nr "${args[@]}" "$RS_JQ_DEFS $prog" 2>&1); then
		rs_fail "$desc: jq: $out"
		return 1
	fi
	if [[ -n $out ]]; then
		echo "$out" | head -n 40 >&2
		rs_fail "$desc (the lines above)"
	fi
}

rs_teardown() {
	local ns pids f i
	for ns in "${RS_NSS[@]}"; do
		pids=$(ip netns pids "$ns" 2>/dev/null)
		[[ -n $pids ]] && kill -TERM $pids 2>/dev/null
	done
	# up to 0.2 s for them to end, then SIGKILL what is left
	for ((i = 0; i < 10; i++)); do
		[[ -z $(for ns in "${RS_NSS[@]}"; do ip netns pids "$ns" 2>/dev/null; done) ]] && break
		sleep 0.02
	done
	for ns in "${RS_NSS[@]}"; do
		pids=$(ip netns pids "$ns" 2>/dev/null)
		[[ -n $pids ]] && kill -KILL $pids 2>/dev/null
	done
	for ns in "${RS_NSS[@]}"; do
		ip netns del "$ns" 2>/dev/null
	done
	RS_NSS=()
	# shown by bats only when the test failed
	if [[ -d ${RS_TMP:-} ]]; then
		for f in "$RS_TMP"/*.err; do
			[[ -s $f ]] || continue
			echo "--- tail of $(basename "$f")" >&2
			tail -n 15 "$f" >&2
		done
	fi
	# collect the background children still known to this shell
	wait 2>/dev/null
	# sanitizer pass (tests/san/san.bash): a UBSan report, which goes to
	# stderr (not to its log_path when ASan is linked too), fails the test
	if [[ ${RSHARE_SAN_PASS:-0} == 1 && -d ${RS_TMP:-} ]] &&
		grep -rqsI --include='*.err' --include='*.log' 'runtime error:' "$RS_TMP"; then
		echo "--- UBSan reported (sanitizer pass):" >&2
		grep -rlsI --include='*.err' --include='*.log' 'runtime error:' "$RS_TMP" >&2
		return 1
	fi
	return 0
}

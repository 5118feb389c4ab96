#!/usr/bin/env bash
# suite.sh - kernel TCP and rshare (and, where an RDMA device exists, rshare
# over verbs and plain rsockets) side by side: round trips, streams,
# connection rate and aggregate message rate, every row measured in this
# one run; one markdown table, a table of targets, and plots.
#
# Usage (as root: it makes network namespaces):
#   make && make -C tests/bench
#   tests/bench/suite.sh                     # a few minutes on 2 cores
#   BENCH_QUICK=1 tests/bench/suite.sh       # a smoke run, about a minute
#   in a Soft-RoCE guest:
#     tests/vm/run.sh --timeout 3000 -- bash tests/bench/suite.sh
#
# Columns (BENCH_SYSTEMS picks some):
#   tcp-lo        kernel TCP, server and client in one network namespace,
#                 over 127.0.0.1
#   tcp-ns        kernel TCP across two network namespaces joined by a veth
#                 pair (server 10.88.0.1, client 10.88.0.2)
#   rshare-local  server and client both under `rshare run --` in one
#                 namespace with one hub, the client connecting to
#                 127.0.0.1: rshare's same-node path
#   rshare-soft   the two namespaces of tcp-ns, a hub in each started with
#                 --transport soft, both programs under `rshare run --`
#   tcp-ns-cpu    tcp-ns with each namespace on a processor of its own, as
#                 two nodes are: the server side's programs on one, the
#                 client side's on another (taskset -c; where this machine
#                 has two processors or more)
#   rshare-soft-cpu  rshare-soft on the processors of tcp-ns-cpu, with two
#                 hubs of its own (linking on BENCH_HUB_PORT + 2), each on
#                 its namespace's processor
#   rshare-verbs  two hubs on the server and client addresses (like
#                 compare.sh: 10.77.0.1 and 10.77.0.2 in the guest of
#                 tests/vm/run.sh), --transport verbs     } only where an RDMA
#   rsockets      LD_PRELOAD=librspreload.so, server on   } device exists
#                 the server address, clients bound to    } (/sys/class/
#                 the client address                      } infiniband)
# The namespaces (rsb-PID-l for the one-namespace columns, rsb-PID-a and
# rsb-PID-b for the two-namespace ones), the veth pair, the hubs and every
# server are made here and removed on exit.  Without the right to make
# namespaces, tcp-lo and rshare-local run in the current one (the hub on
# 127.0.0.1, port BENCH_HUB_PORT + 1) and the four across namespaces are n/a.
#
# Rows:
#   - round trip, median, p99 and fastest us, for each size of
#     BENCH_RTT_SIZES
#     (bench rtt: BENCH_RTT_N round trips on one connection)
#   - stream MB/s for each write size of BENCH_STREAM_SIZES (bench stream:
#     BENCH_STREAM_BYTES, by default 128 Ki writes, at most 1 GiB)
#   - connections/s: connect + one 64 B request/response + close,
#     BENCH_CONN_N sequential (bench connrate)
#   (these three run in BENCH_ROUNDS rounds, the columns taking turns in
#   each; a cell is the median over the rounds, the fastest round trip
#   the fastest of all rounds)
#   - aggregate messages/s for each N x K of BENCH_GRID: N processes of K
#     connections each, released together, every connection doing 64 B
#     round trips back to back for BENCH_MSG_SECS (bench msgrate; a message
#     is one round trip); the sum over the processes.  rsockets spreads a
#     cell over servers of at most 3 connections each, as compare.sh does
#     (BENCH_RS_PER_SERVER, BENCH_RS_MAX_SERVERS)
#   - sockperf ping-pong, 64 B, median and p99 us (--full-rtt: round trips,
#     like bench rtt), an independent client and server; at most 500,000
#     messages a second (--mps: sockperf's own sequence numbers overflow
#     when round trips take well under a microsecond, as on the same-node
#     path; no other column comes near that rate)
#   - wrk (-t 2 -c BENCH_WRK_CONNS) against nginx with 2 workers answering
#     from its configuration, requests/s; n/a on rsockets (nginx needs
#     epoll, which librspreload does not carry)
#   - ab -c BENCH_AB_CONNS -n BENCH_AB_N against the same nginx, without
#     keep-alive: a connection a request, requests/s (where ab is installed)
#   - iperf3 -P 4 (4 parallel streams, BENCH_IPERF_SECS) against iperf3 -s,
#     Mbit/s received; the same with -R, the server sending: across nodes,
#     the direction from the end of the hubs' link that was accepted; and
#     once more with, beside it, 500 round trips of 64 B on a connection of
#     their own to the bench server (median us: what waits behind a bulk
#     transfer, which across nodes shares the link)
#   - hub hand-off: mean nanoseconds from a completion polled to its owner
#     woken, over all the steps of the column, from its hubs' counters
#     (counters.handoff_ns / counters.handoffs of `rshare stat --json`;
#     a completion polled in a batch waits for those before it), and of
#     that the completion's own routing (counters.route_ns / handoffs)
#   - the hub's own cost of a message: routing a completion less the
#     system calls that woke its owner ((route_ns - route_wake_ns) /
#     handoffs), plus posting a write (post_ns / posts: the link's one
#     system call of each pass of the loop is not in it); then those
#     wake-up system calls (route_wake_ns / handoffs)
#   - the hubs' CPU while idle: milliseconds of CPU per second over
#     BENCH_IDLE_SECS once every server is gone (/proc/PID/schedstat)
# and, among the notes under the table, what a wake-up costs on this
# machine (bench/wakecost, before anything else runs): a thread woken on
# the waker's processor, and one on another, idle processor
# then a table of targets (measured ratio, met or not met), and the plots
# (gnuplot): aggregate messages/s against connections (BENCH_PLOT) and
# stream MB/s against write size (BENCH_PLOT_STREAM).  Progress goes to
# stderr.  Only ratios within one run mean something.
#
# Nothing is asserted about time: a target that is not met says so and
# does not change the exit status.  A cell that failed to measure says FAIL
# (the details on stderr) and makes the exit status 1, else it is 0 (2: bad
# usage).  An rshare step during which a hub's fallback_connects moved is a
# FAIL (it measured kernel TCP), and so is an rshare-local step during which
# the hub's local_connects did not move (it did not take the same-node
# path; checked where the hub has that counter).  A tool that is not
# installed gives n/a.
#
# Environment:
#   BENCH_QUICK=1        a smoke run: 1 round, rtt 64 and 64K, streams 1K and
#                        64K, grid "1x1 4x4", 1 s per timed tool run
#   BENCH_SYSTEMS        columns to run (default: all that exist here)
#   BENCH_ROUNDS         rounds of round trip, stream, connection rate (3)
#   BENCH_RTT_SIZES      (default "8 64 512 4K 16K 64K"); BENCH_RTT_N (1000)
#   BENCH_STREAM_SIZES   write sizes (default "64 1K 16K 64K 1M")
#   BENCH_STREAM_BYTES   bytes of every stream (default: see above)
#   BENCH_CONN_N         connections of the rate test (default 500)
#   BENCH_GRID           N x K cells of the message rate (default
#                        "1x1 4x4 16x4 32x4"); BENCH_MSG_SECS (2)
#   BENCH_TOOLS          independent clients to run (default "sockperf wrk iperf3")
#   BENCH_IDLE_SECS      how long the idle hubs' CPU is measured (default 3)
#   BENCH_SOCKPERF_SECS  (default 2); BENCH_WRK_SECS (2); BENCH_WRK_CONNS (16);
#                        BENCH_IPERF_SECS (2)
#   BENCH_PLOT           the message rate plot (default
#                        build/bench/scaling.png; .svg where gnuplot has no
#                        png terminal, or when it ends in .svg);
#                        BENCH_PLOT_STREAM (stream.png, or .svg, beside it)
#   BENCH_OUT            also write the tables to this file
#   BENCH_SESSIONS=1     each server, hub and client in a session of its own
#                        (a scheduling group of its own where the kernel's
#                        autogroups are on; see common.bash), not all in
#                        this script's
#   BENCH_PORT           first port of the servers (default 18800)
#   BENCH_HUB_PORT       port the verbs hubs link on (default 18611); the
#                        soft hubs of rshare-soft-cpu link on it + 2
#   BENCH_SRV_ADDR, BENCH_CLI_ADDR   the addresses of the verbs and rsockets
#                        columns (default as compare.sh)
#   BENCH_TIMEOUT        bound of each step, seconds (default 120; of a
#                        message rate process BENCH_MSG_SECS + a quarter)
#   BENCH_KEEP=DIR       keep the logs of every step in DIR
set -uo pipefail

prog=suite
# shellcheck source=tests/bench/common.bash
. "$(dirname "${BASH_SOURCE[0]}")/common.bash"

quick=${BENCH_QUICK:-0}
[[ $quick == 0 || $quick == 1 ]] || die "BENCH_QUICK: 0 or 1, not '$quick'"
if ((quick)); then
	d_rounds=1 d_rtt="64 64K" d_stream="1K 64K" d_grid="1x1 4x4" d_secs=1 d_conn=200 d_rttn=500
else
	d_rounds=3 d_rtt="8 64 512 4K 16K 64K" d_stream="64 1K 16K 64K 1M" d_grid="1x1 4x4 16x4 32x4"
	d_secs=2 d_conn=500 d_rttn=1000
fi
rounds=${BENCH_ROUNDS:-$d_rounds}
rtt_sizes=${BENCH_RTT_SIZES:-$d_rtt}
stream_sizes=${BENCH_STREAM_SIZES:-$d_stream}
grid=${BENCH_GRID:-$d_grid}
msg_secs=${BENCH_MSG_SECS:-$d_secs}
idle_secs=${BENCH_IDLE_SECS:-3}
conn_n=${BENCH_CONN_N:-$d_conn}
rtt_n=${BENCH_RTT_N:-$d_rttn}
tools=${BENCH_TOOLS-sockperf wrk iperf3}
sp_secs=${BENCH_SOCKPERF_SECS:-$d_secs}
wrk_secs=${BENCH_WRK_SECS:-$d_secs}
wrk_conns=${BENCH_WRK_CONNS:-16}
ab_conns=${BENCH_AB_CONNS:-50}
ab_n=${BENCH_AB_N:-$((quick ? 2000 : 10000))}
ip_secs=${BENCH_IPERF_SECS:-$d_secs}
next_port=${BENCH_PORT:-18800}
hub_port=${BENCH_HUB_PORT:-18611}
rs_per=${BENCH_RS_PER_SERVER:-3}
rs_max=${BENCH_RS_MAX_SERVERS:-32}
step_to=${BENCH_TIMEOUT:-120}
plot=${BENCH_PLOT:-$build/bench/scaling.png}
plot_stream=${BENCH_PLOT_STREAM:-$(dirname "$plot")/stream.png}
all_cols="tcp-lo tcp-ns rshare-local rshare-soft tcp-ns-cpu rshare-soft-cpu rshare-verbs rsockets"

isnum() { [[ $1 =~ ^[1-9][0-9]*$ ]]; }
# bytes SIZE: SIZE (with K, M or G: powers of 1024) in bytes; false if bad
bytes() {
	local n=${1%[KMG]}
	isnum "$n" || return 1
	case $1 in
	*K) echo $((n << 10)) ;; *M) echo $((n << 20)) ;; *G) echo $((n << 30)) ;; *) echo "$n" ;;
	esac
}
# human BYTES: "64 B", "4 KiB", "1 MiB"
human() {
	if (($1 >= 1 << 20 && $1 % (1 << 20) == 0)); then
		echo "$(($1 >> 20)) MiB"
	elif (($1 >= 1024 && $1 % 1024 == 0)); then
		echo "$(($1 >> 10)) KiB"
	else
		echo "$1 B"
	fi
}
for v in rounds msg_secs conn_n rtt_n sp_secs wrk_secs wrk_conns ab_conns ab_n ip_secs; do
	isnum "${!v}" || die "${v}: want a positive number, not '${!v}'"
done
for s in $rtt_sizes; do
	b=$(bytes "$s") || b=0
	((b >= 1 && b <= 65536)) || die "BENCH_RTT_SIZES: bad size '$s' (1 to 64K)"
done
for s in $stream_sizes; do
	b=$(bytes "$s") || b=0
	((b >= 1 && b <= 64 << 20)) || die "BENCH_STREAM_SIZES: bad size '$s' (1 to 64M)"
done
[[ -z ${BENCH_STREAM_BYTES:-} ]] || bytes "$BENCH_STREAM_BYTES" >/dev/null ||
	die "BENCH_STREAM_BYTES: bad size '$BENCH_STREAM_BYTES'"
for c in $grid; do
	[[ $c =~ ^[1-9][0-9]*x[1-9][0-9]*$ ]] || die "BENCH_GRID: bad cell '$c' (want NxK)"
done
for s in ${BENCH_SYSTEMS:-}; do
	[[ " $all_cols " == *" $s "* ]] || die "BENCH_SYSTEMS: unknown '$s' (columns: $all_cols)"
done
for t in $tools; do
	[[ $t == sockperf || $t == wrk || $t == iperf3 ]] || die "BENCH_TOOLS: unknown '$t' (sockperf, wrk, iperf3)"
done

command -v ip >/dev/null || die "needs ip (iproute2)"
build_bench
# what a wake-up costs here (wakecost.c), measured before anything runs:
# each hand-off between a program and its hub is one
wake_note=
if [[ -x $wakecost ]] && w=$("$wakecost" 2>/dev/null) &&
	[[ $w =~ same_wake_us=([^ ]+)\ same_run_us=([^ ]+)\ other_wake_us=([^ ]+)\ other_run_us=([^ ]+) ]]; then
	wake_note="wake-ups on this machine (bench/wakecost, medians): a thread asleep on the waker's processor costs the waker's futex call ${BASH_REMATCH[1]} us and runs ${BASH_REMATCH[2]} us after it; "
	if [[ ${BASH_REMATCH[3]} == n/a ]]; then
		wake_note+="there is no other processor to wake one on."
	else
		wake_note+="one asleep on another, idle processor ${BASH_REMATCH[3]} us and ${BASH_REMATCH[4]} us."
	fi
fi
made_ns=() # network namespaces made here, removed on exit
bench_tmp
lifetime=$((step_to * 40 + 1200)) # bound of every background process

# stream_total WRITE: the bytes of one stream of writes of WRITE bytes
stream_total() {
	if [[ -n ${BENCH_STREAM_BYTES:-} ]]; then
		bytes "$BENCH_STREAM_BYTES"
		return
	fi
	local t=$(($1 * (quick ? 32768 : 131072))) cap=$((quick ? 256 << 20 : 1 << 30))
	echo $((t < cap ? t : cap))
}

# ---- where the columns run ----
pick_addrs
have_rdma=0
[[ -n $(ls /sys/class/infiniband 2>/dev/null) ]] && have_rdma=1
declare -A cell         # cell[ROW,COLUMN]
declare -A vals         # vals[ROW,COLUMN]: one value per round
declare -A c_srv c_cli  # command prefixes (namespace, wrapper) of the server and the clients
declare -A c_addr c_bind c_hubs c_where
declare -A h_nsx h_name h_args h_port h_pid
declare -A own_r own_p  # the hub's own ns: routing a completion, posting a write
notes=()
[[ -n $wake_note ]] && notes+=("$wake_note")
failed=0
cols=() no_rdma=()
for col in ${BENCH_SYSTEMS:-$all_cols}; do
	if [[ $col == rshare-verbs || $col == rsockets ]] && ((!have_rdma)); then
		no_rdma+=("$col")
		continue
	fi
	cols+=("$col")
done
if ((${#no_rdma[@]})); then
	v=${no_rdma[*]}
	notes+=("${v// /, }: n/a, no RDMA device here (/sys/class/infiniband is empty).")
fi
want() { [[ " ${cols[*]} " == *" $1 "* ]]; }
drop() { # COLUMN REASON: the column is n/a
	local c keep=()
	for c in "${cols[@]}"; do [[ $c == "$1" ]] || keep+=("$c"); done
	cols=("${keep[@]}")
	notes+=("$1: n/a, $2")
}

if [[ ! (-x $rshare_cmd && -x $rshared && -e $build/librshare.so) ]]; then
	for c in rshare-local rshare-soft rshare-soft-cpu rshare-verbs; do want $c && drop $c "rshare is not built (run make)."; done
fi
# the processors of the -cpu columns: the first two this process may run on
cpu_list() {
	local r a b out=()
	for r in $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status | tr , ' '); do
		a=${r%-*} b=${r#*-}
		for ((; a <= b; a++)); do out+=("$a"); done
	done
	echo "${out[*]}"
}
read -r cpu_a cpu_b _ <<<"$(cpu_list)"
if [[ -z ${cpu_b:-} ]] || ! command -v taskset >/dev/null; then
	for c in tcp-ns-cpu rshare-soft-cpu; do
		want $c && drop $c "it needs two processors and taskset (util-linux)."
	done
fi

ns_l=rsb-$$-l ns_a=rsb-$$-a ns_b=rsb-$$-b
# shellcheck disable=SC2317 # run by the exit trap (common.bash)
cleanup_more() {
	local ns pids i
	for ns in "${made_ns[@]}"; do
		# whatever still runs there was started here (a hub a library started, say)
		pids=$(ip netns pids "$ns" 2>/dev/null)
		# shellcheck disable=SC2086
		[[ -n $pids ]] && kill $pids 2>/dev/null
		for ((i = 0; i < 30; i++)); do
			pids=$(ip netns pids "$ns" 2>/dev/null)
			[[ -z $pids ]] && break
			sleep 0.1
		done
		# shellcheck disable=SC2086
		[[ -n $pids ]] && kill -KILL $pids 2>/dev/null
		ip netns del "$ns" 2>/dev/null
	done
}
mk_ns() { # NS: a namespace with its loopback up
	ip netns add "$1" 2>"$tmp/netns.err" || return 1
	made_ns+=("$1")
	ip -n "$1" link set lo up
}
ns_why() { echo "cannot make network namespaces ($(head -n 1 "$tmp/netns.err" 2>/dev/null | cut -c1-100))"; }
nsx_l=""
if want tcp-lo || want rshare-local; then
	if mk_ns "$ns_l"; then
		nsx_l="ip netns exec $ns_l"
		where_l="namespace $ns_l"
	else
		where_l="this namespace"
		notes+=("tcp-lo, rshare-local: $(ns_why); they ran in this one.")
	fi
fi
if want tcp-ns || want rshare-soft || want tcp-ns-cpu || want rshare-soft-cpu; then
	va=rsb$$a vb=rsb$$b
	if mk_ns "$ns_a" && mk_ns "$ns_b" &&
		ip link add "$va" netns "$ns_a" type veth peer name "$vb" netns "$ns_b" 2>"$tmp/netns.err" &&
		ip -n "$ns_a" addr add 10.88.0.1/24 dev "$va" && ip -n "$ns_b" addr add 10.88.0.2/24 dev "$vb" &&
		ip -n "$ns_a" link set "$va" up && ip -n "$ns_b" link set "$vb" up; then
		for ((i = 0; i < 50; i++)); do
			ip -n "$ns_b" -br link show "$vb" | grep -q LOWER_UP && break
			sleep 0.1
		done
	else
		why_ns=$(ns_why)
		for c in tcp-ns rshare-soft tcp-ns-cpu rshare-soft-cpu; do want $c && drop $c "$why_ns."; done
	fi
fi

# hub H NSEXEC NAME ARGS...: the hub H (rshared ARGS), started by start_hubs
hubs=()
hub() {
	h_nsx[$1]=$2 h_name[$1]=$3 h_args[$1]=${*:4} h_port[$1]=""
	[[ " ${*:4} " =~ " --port "([0-9]+)" " ]] && h_port[$1]=${BASH_REMATCH[1]}
	hubs+=("$1")
}
# rs_wrap H: the command prefix that runs a program under rshare with hub H
rs_wrap() {
	echo "env RSHARE_HUB_NAME=${h_name[$1]}${h_port[$1]:+ RSHARE_PORT=${h_port[$1]}} $rshare_cmd run --"
}
lo_hub_args=(--transport soft)
# the prefixes of the -cpu columns: a namespace and its processor
on_a="ip netns exec $ns_a taskset -c ${cpu_a:-}" on_b="ip netns exec $ns_b taskset -c ${cpu_b:-}"
[[ -z $nsx_l ]] && lo_hub_args+=(--addr 127.0.0.1 --port $((hub_port + 1)))
for col in "${cols[@]}"; do
	c_bind[$col]=""
	case $col in
	tcp-lo)
		c_srv[$col]=$nsx_l c_cli[$col]=$nsx_l c_addr[$col]=127.0.0.1
		c_where[$col]="kernel TCP over 127.0.0.1 in $where_l"
		;;
	rshare-local)
		hub L "$nsx_l" "suite-L-$$" "${lo_hub_args[@]}"
		c_srv[$col]="$nsx_l $(rs_wrap L)" c_cli[$col]="$nsx_l $(rs_wrap L)" c_addr[$col]=127.0.0.1 c_hubs[$col]=L
		c_where[$col]="both under \`rshare run\` over 127.0.0.1 in $where_l, one hub (${lo_hub_args[*]})"
		;;
	tcp-ns)
		c_srv[$col]="ip netns exec $ns_a" c_cli[$col]="ip netns exec $ns_b" c_addr[$col]=10.88.0.1
		c_where[$col]="kernel TCP, server in $ns_a (10.88.0.1), client in $ns_b (10.88.0.2), a veth pair"
		;;
	rshare-soft)
		hub A "ip netns exec $ns_a" "suite-A-$$" --transport soft
		hub B "ip netns exec $ns_b" "suite-B-$$" --transport soft
		c_srv[$col]="ip netns exec $ns_a $(rs_wrap A)" c_cli[$col]="ip netns exec $ns_b $(rs_wrap B)"
		c_addr[$col]=10.88.0.1 c_hubs[$col]="A B"
		c_where[$col]="the namespaces of tcp-ns, a hub in each (--transport soft)"
		;;
	tcp-ns-cpu)
		c_srv[$col]=$on_a c_cli[$col]=$on_b c_addr[$col]=10.88.0.1
		c_where[$col]="tcp-ns, its server's programs on processor $cpu_a, its clients on processor $cpu_b (taskset -c), as two nodes of a processor each"
		;;
	rshare-soft-cpu)
		hub A2 "$on_a" "suite-A2-$$" --transport soft --port $((hub_port + 2))
		hub B2 "$on_b" "suite-B2-$$" --transport soft --port $((hub_port + 2))
		c_srv[$col]="$on_a $(rs_wrap A2)" c_cli[$col]="$on_b $(rs_wrap B2)"
		c_addr[$col]=10.88.0.1 c_hubs[$col]="A2 B2"
		c_where[$col]="rshare-soft on the processors of tcp-ns-cpu, a hub of its own in each namespace on that namespace's processor (--transport soft --port $((hub_port + 2)))"
		;;
	rshare-verbs)
		hub V1 "" "suite-V1-$$" --port "$hub_port" --addr "$srv_addr" --transport verbs
		hub V2 "" "suite-V2-$$" --port "$hub_port" --addr "$cli_addr" --transport verbs
		c_srv[$col]=$(rs_wrap V1) c_cli[$col]=$(rs_wrap V2) c_addr[$col]=$srv_addr c_bind[$col]=$cli_addr
		c_hubs[$col]="V1 V2"
		c_where[$col]="server on $srv_addr (its hub there), clients bound to $cli_addr (theirs), --transport verbs, port $hub_port"
		;;
	rsockets)
		c_srv[$col]="env LD_PRELOAD=$preload" c_cli[$col]="env LD_PRELOAD=$preload"
		c_addr[$col]=$srv_addr c_bind[$col]=$cli_addr
		c_where[$col]="LD_PRELOAD=$preload (librdmacm $(dpkg-query -W -f '${Version}' librdmacm1 2>/dev/null || echo unknown)), server on $srv_addr, clients bound to $cli_addr"
		[[ -e $preload ]] || drop rsockets "no $preload."
		;;
	esac
done

fail_cell() { # ROW COLUMN REASON (the first failure of a cell stays)
	[[ ${cell[$1,$2]:-} == FAIL* ]] || cell[$1,$2]="FAIL ($3)"
	failed=1
}
# the rows of every column, for the failure of a whole column
all_rows() {
	local s w c
	echo conn sp_med sp_p99 wrk ab ip3 ip3r hol handoff idle
	for s in $rtt_sizes; do echo "rttm_$s rttp_$s rttf_$s"; done
	for w in $stream_sizes; do echo "st_$w"; done
	for c in $grid; do echo "mr_$c"; done
}
declare -A dead # columns that cannot run (a hub or its server did not start)
col_fails() { # COLUMN REASON: every cell of COLUMN failed
	local r
	for r in $(all_rows); do fail_cell "$r" "$1" "$2"; done
	dead[$1]=1
}

# ---- hubs and the servers every workload uses ----
start_hubs() {
	local h col rc
	for h in "${hubs[@]}"; do
		say "hub $h (${h_name[$h]}): ${h_nsx[$h]:+${h_nsx[$h]} }rshared ${h_args[$h]}"
		# shellcheck disable=SC2086 # the arguments are words
		start_hub "hub$h" "${h_nsx[$h]}" "${h_name[$h]}" ${h_args[$h]}
		rc=$?
		h_pid[$h]=$bg_pid
		((rc == 0)) && continue
		for col in "${cols[@]}"; do
			[[ " ${c_hubs[$col]:-} " == *" $h "* ]] && col_fails "$col" "$hub_fail"
		done
	done
}
start_hubs

declare -A main_port main_pid
# start_srv COLUMN NAME CMD...: a server of COLUMN in the background; pid in $bg_pid
start_srv() {
	local col=$1 name=$2
	shift 2
	# shellcheck disable=SC2086 # prefixes are words
	bg "$name" ${c_srv[$col]} "$@"
}
# col_servers COLUMN NAME PORT COUNT: COUNT bench servers of COLUMN on PORT...; pids in srv_pids
col_servers() {
	# shellcheck disable=SC2086 # the prefix is words
	bench_servers "$2" "$3" "$4" "${c_addr[$1]}" ${c_srv[$1]}
}
up=()
for col in "${cols[@]}"; do
	[[ -n ${dead[$col]:-} ]] && continue
	if col_servers "$col" "$col-srv" "$next_port" 1; then
		main_port[$col]=$next_port main_pid[$col]=${srv_pids[0]}
		up+=("$col")
	else
		col_fails "$col" "$srv_fail"
	fi
	next_port=$((next_port + 1))
done

# ---- the steps ----
tool_ok() { [[ " $tools " == *" $1 "* ]]; }
nrtt=$(wc -w <<<"$rtt_sizes") nstream=$(wc -w <<<"$stream_sizes") ngrid=$(wc -w <<<"$grid")
per_col=$((rounds * (1 + nrtt + nstream) + ngrid))
tool_ok sockperf && per_col=$((per_col + 1))
tool_ok wrk && per_col=$((per_col + 1))
tool_ok iperf3 && per_col=$((per_col + 3))
steps=$((per_col * ${#up[@]})) step=0
progress() { # WHAT COLUMN [MORE]
	step=$((step + 1))
	echo "[$step/$steps] $1 $2${3:+ ($3)}" >&2
}

# snap COLUMN: "FALLBACKS LOCALS DEAD" over the column's hubs: the sum of
# their fallback_connects and of their local_connects ("-" when a hub has
# no such counter), and a hub that did not answer ("-" when all did)
snap() {
	local h j n fb=0 lc=0 gone=-
	for h in ${c_hubs[$1]:-}; do
		j=$(hub_json "${h_nsx[$h]}" "${h_name[$h]}") || gone=$h
		n=$(json_count fallback_connects <<<"$j")
		fb=$((fb + ${n:-0}))
		n=$(json_count local_connects <<<"$j")
		if [[ -z $n || $lc == - ]]; then lc=-; else lc=$((lc + n)); fi
	done
	echo "$fb $lc $gone"
}
# off_path COLUMN BEFORE: true, with the reason in $off_reason, when the
# step since the snap BEFORE did not measure the column's own path
off_path() {
	[[ -n ${c_hubs[$1]:-} ]] || return 1
	local fb0 lc0 fb lc dead
	read -r fb0 lc0 _ <<<"$2"
	read -r fb lc dead < <(snap "$1")
	if [[ $dead != - ]]; then
		off_reason="hub $dead does not answer"
	elif ((fb > fb0)); then
		off_reason="$((fb - fb0)) connections fell back to kernel TCP"
	elif [[ $1 == rshare-local && $lc != - && $lc0 != - ]] && ((lc == lc0)); then
		off_reason="not same-node: local_connects did not move"
	else
		return 1
	fi
	say "$1: $off_reason (hub counters)"
}

# client COLUMN NAME CMD...: one client of COLUMN in the foreground, bounded
client() {
	local col=$1 name=$2
	shift 2
	# shellcheck disable=SC2086 # prefixes are words
	timeout -k 5 $((step_to + 10)) ${c_cli[$col]} "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" </dev/null
}
# bench_client COLUMN NAME MODE ARGS...: bench MODE against the column's server
bench_client() {
	local col=$1 name=$2 mode=$3
	shift 3
	local bind=()
	[[ -n ${c_bind[$col]} ]] && bind=(-B "${c_bind[$col]}")
	client "$col" "$name" "$bench" "$mode" "${c_addr[$col]}" "${main_port[$col]}" "$@" "${bind[@]}" -t "$step_to"
}
# record COLUMN NAME ROW=KEY...: the step NAME of COLUMN ended; its values
# (KEY= of its output) go to the rounds of each ROW, or its ROWs fail
record() {
	local col=$1 name=$2 rc=$3 before=$4 rk reason=""
	shift 4
	if ((rc != 0)); then
		reason=$(why "$tmp/$name.err")
		((rc == 124 || rc == 137)) && [[ $reason == "no output" ]] && reason="timed out"
		show_err "$col $name" "$tmp/$name.err" "$tmp/$col-srv0.err"
	elif off_path "$col" "$before"; then
		reason=$off_reason
	fi
	for rk in "$@"; do
		if [[ -n $reason ]]; then
			fail_cell "${rk%%=*}" "$col" "$reason"
		else
			vals[${rk%%=*},$col]+=" $(kv "$tmp/$name.out" "${rk#*=}")"
		fi
	done
}
# workload COLUMN ROUND WORKLOAD: conn, rtt:SIZE or stream:WRITE
workload() {
	local col=$1 r=$2 w=$3 name before rc
	name=$col-${w/:/-}-r$r
	before=$(snap "$col")
	case $w in
	conn)
		progress "connections/s" "$col" "round $r/$rounds"
		bench_client "$col" "$name" connrate -n "$conn_n"
		record "$col" "$name" $? "$before" conn=conns_per_s
		;;
	rtt:*)
		progress "rtt ${w#*:}" "$col" "round $r/$rounds"
		bench_client "$col" "$name" rtt -n "$rtt_n" -s "${w#*:}"
		record "$col" "$name" $? "$before" "rttm_${w#*:}=median_us" "rttp_${w#*:}=p99_us" \
			"rttf_${w#*:}=min_us"
		;;
	stream:*)
		progress "stream ${w#*:}" "$col" "round $r/$rounds"
		bench_client "$col" "$name" stream -b "$(stream_total "$(bytes "${w#*:}")")" -w "${w#*:}"
		record "$col" "$name" $? "$before" "st_${w#*:}=MBps"
		;;
	esac
}

# msgrate COLUMN N K: N processes of K connections, released together
msgrate() {
	local col=$1 n=$2 k=$3 row=mr_$2x$3 name=$1-msg-$2x$3 port=${main_port[$1]} per=0 nsrv=0
	local j go pids=() reason="" before sum=0 v
	progress "msgs/s $n x $k" "$col"
	if [[ $col == rsockets ]] && ((rs_per > 0 && n * k > rs_per)); then
		per=$rs_per nsrv=$(((n * k + rs_per - 1) / rs_per))
		if ((nsrv > rs_max)); then
			cell[$row,$col]="not run ($nsrv servers needed)"
			return
		fi
		port=$next_port
		next_port=$((next_port + nsrv))
		if ! col_servers "$col" "$name-srv" "$port" "$nsrv"; then
			fail_cell "$row" "$col" "$srv_fail"
			return
		fi
	fi
	go=$tmp/$name.go
	before=$(snap "$col")
	local bind=()
	[[ -n ${c_bind[$col]} ]] && bind=(-B "${c_bind[$col]}")
	for ((j = 0; j < n; j++)); do
		# shellcheck disable=SC2086 # prefixes are words
		bg "$name-$j" ${c_cli[$col]} "$bench" msgrate "${c_addr[$col]}" "$port" -c "$k" -d "$msg_secs" \
			-s 64 -f "$go" -m "$per" -i $((j * k)) "${bind[@]}" -t $((msg_secs + step_to / 4))
		pids+=("$bg_pid")
	done
	for ((j = 0; j < n; j++)); do
		if ! wait_line "$tmp/$name-$j.out" "^ready $k\$" "$step_to" "${pids[j]}"; then
			reason=$(why "$tmp/$name-$j.err")
			[[ $reason == "no output" ]] && reason="not connected in ${step_to}s"
			show_err "$col msgrate ${n}x$k process $j" "$tmp/$name-$j.err"
			break
		fi
	done
	if [[ -z $reason ]]; then
		touch "$go"
		for ((j = 0; j < n; j++)); do
			if ! finish "${pids[j]}"; then
				[[ -z $reason ]] && reason=$(why "$tmp/$name-$j.err") &&
					show_err "$col msgrate ${n}x$k process $j" "$tmp/$name-$j.err"
				continue
			fi
			v=$(kv "$tmp/$name-$j.out" msgs_per_s)
			sum=$(awk -v a="$sum" -v b="${v:-0}" 'BEGIN { printf "%.1f", a + b }')
		done
	fi
	stop "${pids[@]}"
	((nsrv)) && stop "${srv_pids[@]}"
	[[ -z $reason ]] && off_path "$col" "$before" && reason=$off_reason
	if [[ -n $reason ]]; then
		fail_cell "$row" "$col" "$reason"
	else
		cell[$row,$col]=$(printf '%.0f' "$sum")
	fi
}

nocolor() { sed 's/\x1b\[[0-9;]*m//g' "$1"; }
# sockperf_row COLUMN: sockperf ping-pong against sockperf server
sockperf_row() {
	local col=$1 name=$1-sockperf port=$next_port before rc reason="" o srv
	next_port=$((next_port + 1))
	progress "sockperf ping-pong 64 B" "$col"
	if ! command -v sockperf >/dev/null; then
		cell[sp_med,$col]="n/a (no sockperf)" cell[sp_p99,$col]="n/a (no sockperf)"
		return
	fi
	before=$(snap "$col")
	start_srv "$col" "$name-srv" sockperf server --tcp -i "${c_addr[$col]}" -p "$port"
	srv=$bg_pid
	if ! wait_line "$tmp/$name-srv.out" 'block on socket' "$step_to" "$srv"; then
		reason="server: $(nocolor "$tmp/$name-srv.out" | grep -m 1 -i error | cut -c1-80)"
		show_err "$col sockperf server" "$tmp/$name-srv.out" "$tmp/$name-srv.err"
	else
		local bind=()
		[[ -n ${c_bind[$col]} ]] && bind=(--client_ip "${c_bind[$col]}")
		client "$col" "$name" sockperf ping-pong --tcp -i "${c_addr[$col]}" -p "$port" -m 64 \
			-t "$sp_secs" --full-rtt --mps 500000 "${bind[@]}"
		rc=$?
		o=$(nocolor "$tmp/$name.out")
		cell[sp_med,$col]=$(awk '/percentile 50\.000 =/ { printf "%.1f", $NF }' <<<"$o")
		cell[sp_p99,$col]=$(awk '/percentile 99\.000 =/ { printf "%.1f", $NF }' <<<"$o")
		if ((rc != 0)) || [[ -z ${cell[sp_med,$col]} ]]; then
			reason=$(grep -m 1 'ERROR' <<<"$o" | sed -E 's/^sockperf: ERROR: //; s/^([a-z_]+\(\)).*\(errno=[0-9]+ (.*)\)$/\1: \2/' | cut -c1-100)
			[[ -z $reason ]] && reason="exit status $rc"
			show_err "$col sockperf" "$tmp/$name.out" "$tmp/$name.err"
		fi
	fi
	stop "$srv"
	[[ -z $reason ]] && off_path "$col" "$before" && reason=$off_reason
	if [[ -n $reason ]]; then
		fail_cell sp_med "$col" "sockperf: $reason"
		fail_cell sp_p99 "$col" "sockperf: $reason"
	fi
}

# wrk_row COLUMN: wrk against nginx, both under the column's wrappers
wrk_row() {
	local col=$1 name=$1-wrk port=$next_port before rc reason="" srv d url i code
	next_port=$((next_port + 1))
	progress "wrk against nginx" "$col"
	cell[ab,$col]="n/a (no ab)"
	if [[ $col == rsockets ]]; then
		cell[wrk,$col]="n/a (nginx needs epoll)" cell[ab,$col]=${cell[wrk,$col]}
		return
	fi
	for t in wrk nginx curl; do
		if ! PATH=$PATH:/usr/sbin command -v $t >/dev/null; then
			cell[wrk,$col]="n/a (no $t)" cell[ab,$col]=${cell[wrk,$col]}
			return
		fi
	done
	d=$tmp/$name-nginx
	mkdir -p "$d"
	url=http://${c_addr[$col]}:$port/
	cat >"$d/nginx.conf" <<-EOF
		worker_processes 2;
		daemon off;
		pid $d/nginx.pid;
		error_log stderr;
		events { worker_connections 1024; }
		http {
		    access_log off;
		    client_body_temp_path $d/body;
		    proxy_temp_path $d/proxy;
		    fastcgi_temp_path $d/fastcgi;
		    uwsgi_temp_path $d/uwsgi;
		    scgi_temp_path $d/scgi;
		    server { listen ${c_addr[$col]}:$port; location / { return 200 "hello\n"; } }
		}
	EOF
	start_srv "$col" "$name-srv" "$(PATH=$PATH:/usr/sbin command -v nginx)" -p "$d" -e stderr -c "$d/nginx.conf"
	srv=$bg_pid
	# ready once it answers curl (under the client's wrapper; a refused
	# connect falls back to kernel TCP, so the hubs' counters start after)
	for ((i = 0; i < step_to * 5; i++)); do
		alive "$srv" || break
		code=$(client "$col" "$name-curl" curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$url"; cat "$tmp/$name-curl.out")
		[[ $code == 200 ]] && break
		sleep 0.2
	done
	if [[ ${code:-} != 200 ]]; then
		reason="nginx: $(grep -m 1 -E 'emerg|alert|crit' "$tmp/$name-srv.err" | cut -c1-80)"
		[[ $reason == "nginx: " ]] && reason="nginx does not answer"
		show_err "$col nginx" "$tmp/$name-srv.err" "$tmp/$name-curl.err"
	else
		before=$(snap "$col")
		client "$col" "$name" wrk -t 2 -c "$wrk_conns" -d "${wrk_secs}s" "$url"
		rc=$?
		cell[wrk,$col]=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$tmp/$name.out")
		if ((rc != 0)) || [[ -z ${cell[wrk,$col]} ]]; then
			reason="wrk: $(head -n 1 "$tmp/$name.err" | cut -c1-80)"
			show_err "$col wrk" "$tmp/$name.out" "$tmp/$name.err" "$tmp/$name-srv.err"
		elif grep -qE 'Socket errors|Non-2xx' "$tmp/$name.out"; then
			notes+=("$col wrk: $(grep -E 'Socket errors|Non-2xx' "$tmp/$name.out" | tr -s ' ' | paste -sd';' -).")
		fi
		[[ -z $reason ]] && command -v ab >/dev/null && ab_step "$col" "$name-ab" "$url"
	fi
	stop "$srv"
	[[ -z $reason ]] && off_path "$col" "$before" && reason=$off_reason
	[[ -n $reason ]] && fail_cell wrk "$col" "$reason" && fail_cell ab "$col" "$reason"
}

# ab_step COLUMN NAME URL: ab without keep-alive against wrk_row's nginx
ab_step() {
	local col=$1 name=$2 rc
	client "$col" "$name" ab -q -c "$ab_conns" -n "$ab_n" "$3"
	rc=$?
	cell[ab,$col]=$(awk '/^Requests per second:/ { printf "%.0f", $4 }' "$tmp/$name.out")
	if ((rc != 0)) || [[ -z ${cell[ab,$col]} ]]; then
		fail_cell ab "$col" "ab: $(grep -m 1 -iE 'error|failed|refused' "$tmp/$name.out" "$tmp/$name.err" | cut -d: -f2- | cut -c1-80)"
		show_err "$col ab" "$tmp/$name.out" "$tmp/$name.err"
	elif ! grep -qE '^Failed requests: +0$' "$tmp/$name.out"; then
		notes+=("$col ab: $(grep -E '^Failed requests' "$tmp/$name.out" | tr -s ' ').")
	fi
}

# iperf3_row COLUMN [-R | hol]: iperf3 -P 4 against iperf3 -s (one test),
# Mbit/s received (row ip3); with -R the server sends (row ip3r): the
# other direction of the link between two nodes' hubs, whose end the
# server's hub accepted; with hol, 500 round trips of 64 B on a connection
# of their own to the bench server while it runs (row hol, median us; its
# Mbit/s are not kept: the round trips take the processors' time too)
iperf3_row() {
	local col=$1 how=${2:-} key=ip3 name=$1-iperf3 port=$next_port before rc reason="" srv ip bind=() dir=()
	case $how in
	-R) key=ip3r name=$1-iperf3r dir=(-R) ;;
	hol) key=hol name=$1-iperf3h ;;
	esac
	next_port=$((next_port + 1))
	progress "iperf3 -P 4${how:+ $how}" "$col"
	if ! command -v iperf3 >/dev/null; then
		cell[$key,$col]="n/a (no iperf3)"
		return
	fi
	before=$(snap "$col")
	start_srv "$col" "$name-srv" iperf3 -s -1 --forceflush -B "${c_addr[$col]}" -p "$port"
	srv=$bg_pid
	if ! wait_line "$tmp/$name-srv.out" 'Server listening' "$step_to" "$srv"; then
		reason="server: $(head -n 1 "$tmp/$name-srv.err" | cut -c1-80)"
		show_err "$col iperf3 server" "$tmp/$name-srv.out" "$tmp/$name-srv.err"
	else
		[[ -n ${c_bind[$col]} ]] && bind=(-B "${c_bind[$col]}")
		client "$col" "$name" iperf3 -c "${c_addr[$col]}" -p "$port" -P 4 -t "$ip_secs" -f m "${dir[@]}" "${bind[@]}" &
		ip=$!
		if [[ $how == hol ]]; then
			sleep 0.3
			bench_client "$col" "$name-rtt" rtt -n 500 -s 64
			cell[hol,$col]=$(kv "$tmp/$name-rtt.out" median_us)
			[[ -n ${cell[hol,$col]} ]] || reason=$(why "$tmp/$name-rtt.err")
		fi
		wait "$ip"
		rc=$?
		[[ $how == hol ]] || cell[$key,$col]=$(awk '/^\[SUM\].*receiver/ { printf "%.0f", $(NF - 2) }' "$tmp/$name.out")
		if ((rc != 0)) || [[ -z ${cell[$key,$col]} ]]; then
			[[ -z $reason ]] && reason="iperf3: $(grep -m 1 -i error "$tmp/$name.out" "$tmp/$name.err" | cut -d: -f2- | cut -c1-80)"
			show_err "$col iperf3" "$tmp/$name.out" "$tmp/$name.err" "$tmp/$name-srv.err"
		fi
	fi
	stop "$srv"
	[[ -z $reason ]] && off_path "$col" "$before" && reason=$off_reason
	[[ -n $reason ]] && fail_cell "$key" "$col" "$reason"
}

# ---- run ----
nup=${#up[@]}
if ((nup)); then
	say "columns: ${up[*]}; $steps steps"
	works=(conn)
	for s in $rtt_sizes; do works+=("rtt:$s"); done
	for w in $stream_sizes; do works+=("stream:$w"); done
	for ((r = 1; r <= rounds; r++)); do
		for w in "${works[@]}"; do
			for ((i = 0; i < nup; i++)); do
				workload "${up[(i + r - 1) % nup]}" "$r" "$w"
			done
		done
	done
	gi=0
	for c in $grid; do
		for ((i = 0; i < nup; i++)); do
			msgrate "${up[(i + gi) % nup]}" "${c%x*}" "${c#*x}"
		done
		gi=$((gi + 1))
	done
	if tool_ok sockperf; then
		for col in "${up[@]}"; do sockperf_row "$col"; done
	fi
	if tool_ok wrk; then
		for col in "${up[@]}"; do wrk_row "$col"; done
	fi
	if tool_ok iperf3; then
		for col in "${up[@]}"; do iperf3_row "$col"; done
		for col in "${up[@]}"; do iperf3_row "$col" -R; done
		for col in "${up[@]}"; do iperf3_row "$col" hol; done
	fi
fi
for col in "${up[@]}"; do
	stop "${main_pid[$col]}"
done
# idle: what the hubs cost with nothing to do (the servers are gone):
# CPU time from /proc/PID/schedstat over BENCH_IDLE_SECS
declare -A cpu0 hpid
hub_cpu_ns() { # H: nanoseconds the hub H has run
	local pid=${hpid[$1]:-} ns
	[[ -n $pid && -r /proc/$pid/schedstat ]] || return 1
	read -r ns _ <"/proc/$pid/schedstat" && echo "$ns"
}
for h in "${!h_pid[@]}"; do
	# its pid first, so that this question is not in the time measured
	hpid[$h]=$(hub_json "${h_nsx[$h]}" "${h_name[$h]}" | json_count pid)
done
sleep 1
for h in "${!h_pid[@]}"; do
	cpu0[$h]=$(hub_cpu_ns "$h")
done
sleep "$idle_secs"
for col in "${up[@]}"; do
	[[ -n ${c_hubs[$col]:-} ]] || { cell[idle,$col]="-"; continue; }
	us=0
	for h in ${c_hubs[$col]}; do
		n=$(hub_cpu_ns "$h") || { us=; break; }
		[[ -n ${cpu0[$h]} ]] || { us=; break; }
		us=$((us + (n - cpu0[$h]) / 1000))
	done
	if [[ -n $us ]]; then
		cell[idle,$col]=$(awk -v u="$us" -v s="$idle_secs" 'BEGIN { printf "%.3f", u / 1000 / s }')
	else
		cell[idle,$col]="n/a"
	fi
done

# the hubs' hand-off counters, over everything the column ran
for col in "${up[@]}"; do
	[[ -n ${c_hubs[$col]:-} ]] || { cell[handoff,$col]="-" cell[own,$col]="-"; continue; }
	ho=0 hons=0 hors=0 horw=0 po=0 pons=0 absent=0 tr="" lc=0 fb=0 ec=0 cc="" dcc=""
	for h in ${c_hubs[$col]}; do
		j=$(hub_json "${h_nsx[$h]}" "${h_name[$h]}")
		n=$(json_count handoffs <<<"$j") ns=$(json_count handoff_ns <<<"$j")
		[[ -z $n || -z $ns ]] && absent=1
		ho=$((ho + ${n:-0})) hons=$((hons + ${ns:-0}))
		n=$(json_count route_ns <<<"$j")
		hors=$((hors + ${n:-0}))
		n=$(json_count route_wake_ns <<<"$j") && horw=$((horw + n))
		n=$(json_count posts <<<"$j") && po=$((po + n))
		n=$(json_count post_ns <<<"$j") && pons=$((pons + n))
		n=$(json_count local_connects <<<"$j")
		[[ -n $n && $lc != - ]] && lc=$((lc + n)) || lc=-
		n=$(json_count fallback_connects <<<"$j")
		fb=$((fb + ${n:-0}))
		n=$(json_count early_connects <<<"$j")
		ec=$((ec + ${n:-0}))
		tr+=$(grep -oE '"transport": ?"[a-z]+"' <<<"$j" | grep -oE '"[a-z]+"$' | tr -d '"')$'\n'
		# a soft link's congestion control (rshare.conf: link_congestion),
		# and what kernel TCP's sockets there run
		if grep -qE '"transport": ?"soft"' <<<"$j"; then
			cc+=$(grep -oE '"congestion": ?"[a-z0-9_]+"' <<<"$j" | grep -oE '"[a-z0-9_]+"$' | tr -d '"')$'\n'
			dcc+=$(${h_nsx[$h]} sysctl -n net.ipv4.tcp_congestion_control 2>/dev/null)$'\n'
		fi
	done
	if ((absent)); then
		cell[handoff,$col]="n/a (hub has no hand-off counters)"
	elif ((ho == 0)); then
		cell[handoff,$col]="0 hand-offs"
	else
		cell[handoff,$col]="$((hons / ho)) / $((hors / ho)) ($ho hand-offs)"
		if ((po)); then
			# the hub's own: routing less the system calls that woke
			# the owner, and posting (ns each)
			own_r[$col]=$(((hors - horw) / ho)) own_p[$col]=$((pons / po))
			cell[own,$col]="$((own_r[$col] + own_p[$col])) ($((own_r[$col])) + $((own_p[$col]))); wake-up system calls $((horw / ho))"
		fi
	fi
	tr=$(sort -u <<<"$tr" | grep . | paste -sd, -)
	c_where[$col]+="; links seen: ${tr:-none}; its hubs counted $fb connections fallen back to kernel TCP"
	[[ $lc != - ]] && c_where[$col]+=" and $lc same-node ones (local_connects)"
	((ec)) && c_where[$col]+="; $ec connects answered before the peer hub's ACCEPT (early_connects)"
	cc=$(sort -u <<<"$cc" | grep . | paste -sd, -) dcc=$(sort -u <<<"$dcc" | grep . | paste -sd, -)
	[[ -n $cc ]] && c_where[$col]+="; the soft link's congestion control: $cc (kernel TCP's there: ${dcc:-?})"
done
for h in "${!h_pid[@]}"; do
	stop "${h_pid[$h]}"
done

# the medians over the rounds; the fastest round trip of all rounds
for col in "${up[@]}"; do
	for r in conn $(for s in $rtt_sizes; do echo "rttm_$s rttp_$s rttf_$s"; done) $(for w in $stream_sizes; do echo "st_$w"; done); do
		[[ -n ${cell[$r,$col]:-} ]] && continue # failed
		# shellcheck disable=SC2086 # one word per round
		if [[ $r == rttf_* ]]; then
			cell[$r,$col]=$(least ${vals[$r,$col]:-})
		else
			cell[$r,$col]=$(median ${vals[$r,$col]:-})
		fi
	done
done

# ---- plots ----
plots=()
# plot_one FILE TITLE XLABEL YLABEL YFORMAT ROW ITEM:X...: a log-log plot of
# the cells ROW_ITEM of every column against X, one line per column that
# has a number; false when none has
plot_one() {
	local file=$1 title=$2 xl=$3 yl=$4 yf=$5 row=$6 ix col v n=2 lines=() tics=() xmin=0 xmax=0 x
	shift 6
	for ix in "$@"; do
		x=${ix#*:}
		tics+=("\"${ix%%:*}\" $x")
		((xmin == 0 || x < xmin)) && xmin=$x
		((x > xmax)) && xmax=$x
	done
	for col in "${cols[@]}"; do
		n=$((n + 1))
		for ix in "$@"; do
			num "${cell[${row}_${ix%%:*},$col]:-}" || continue
			lines+=("\"$tmp/$row.dat\" using 1:$n title \"$col\" with linespoints lw 2 pt 7")
			break
		done
	done
	((${#lines[@]})) || return 1
	{
		echo "# x item ${cols[*]}"
		for ix in "$@"; do
			printf '%s %s' "${ix#*:}" "${ix%%:*}"
			for col in "${cols[@]}"; do
				v=${cell[${row}_${ix%%:*},$col]:-}
				num "$v" || v="?"
				printf ' %s' "$v"
			done
			echo
		done
	} >"$tmp/$row.dat"
	{
		echo "set terminal $term"
		echo "set output \"$file\""
		echo "set datafile missing \"?\""
		echo "set key outside right top"
		echo "set grid"
		echo "set logscale xy"
		echo "set xrange [$xmin / 1.5 : $xmax * 1.5]"
		echo "set xtics ($(IFS=,; echo "${tics[*]}"))"
		echo "set format y \"$yf\""
		echo "set title \"$title\""
		echo "set xlabel \"$xl\""
		echo "set ylabel \"$yl\""
		echo "plot $(IFS=,; echo "${lines[*]}")"
	} >"$tmp/$row.gp"
	if gnuplot "$tmp/$row.gp" 2>"$tmp/$row.gnuplot.err"; then
		plots+=("$file")
	else
		show_err "gnuplot" "$tmp/$row.gnuplot.err"
		notes+=("No plot $file: gnuplot failed ($(head -n 1 "$tmp/$row.gnuplot.err" | cut -c1-80)).")
	fi
}
plot_files() {
	command -v gnuplot >/dev/null || {
		notes+=("No plots: gnuplot is not installed (gnuplot-nox).")
		return
	}
	local c w items=()
	if [[ $plot == *.svg ]]; then
		term="svg size 960,600 noenhanced"
		[[ $plot_stream == *.svg ]] || plot_stream=${plot_stream%.png}.svg
	elif gnuplot -e 'set terminal pngcairo' 2>/dev/null; then
		term="pngcairo size 960,600 noenhanced font ',10'"
	elif gnuplot -e 'set terminal png' 2>/dev/null; then
		term="png size 960,600 noenhanced"
	else
		term="svg size 960,600 noenhanced"
		[[ $plot == *.svg ]] || plot=${plot%.png}.svg
		[[ $plot_stream == *.svg ]] || plot_stream=${plot_stream%.png}.svg
	fi
	mkdir -p "$(dirname "$plot")" "$(dirname "$plot_stream")"
	for c in $grid; do items+=("$c:$((${c%x*} * ${c#*x}))"); done
	mapfile -t items < <(printf '%s\n' "${items[@]}" | sort -t: -k2,2n -s)
	plot_one "$plot" "Aggregate message rate: N processes x K connections, 64 B round trips back to back, ${msg_secs} s" \
		"connections (N x K)" "messages/s (round trips, all connections together)" "%.0s%c" mr "${items[@]}" ||
		notes+=("No plot $plot: no message rate was measured.")
	items=()
	for w in $stream_sizes; do items+=("$w:$(bytes "$w")"); done
	plot_one "$plot_stream" "Stream throughput by write size (the median of $rounds round(s))" \
		"bytes per write" "MB/s (10^6 bytes)" "%g" st "${items[@]}" ||
		notes+=("No plot $plot_stream: no stream was measured.")
}
say "plotting"
plot_files

# ---- the tables ----
# target WHAT ROW COLA COLB OP LIMIT UNIT: one row of the targets table
target() {
	local what=$1 row=$2 a=$3 b=$4 op=$5 lim=$6 unit=$7 va vb r met
	va=${cell[$row,$a]:-} vb=${cell[$row,$b]:-}
	if [[ ($a == rshare-verbs || $b == rsockets) ]] && ((!have_rdma)); then
		r="n/a" met="n/a (no RDMA device)"
	elif ! want "$a" || ! want "$b" || [[ -z $va || -z $vb ]]; then
		r="n/a" met="n/a (not measured: $(want "$a" && want "$b" && echo "row not run" || echo "column n/a"))"
	elif ! r=$(quotient "$va" "$vb"); then
		r="n/a" met="n/a ($([[ $va == FAIL* ]] && echo "$a" || echo "$b") not measured)"
	else
		if awk -v r="$va" -v b="$vb" -v l="$lim" -v op="$op" 'BEGIN { x = r / b; exit !(op == "<=" ? x <= l : x >= l) }'; then
			met="met"
		else
			met="not met"
		fi
		r="${r}x ($va / $vb $unit)"
	fi
	printf '| %s: %s %s %sx %s | %s | %s |\n' "$what" "$a" "$op" "$lim" "$b" "$r" "$met"
}
t_rtt=64
[[ " $rtt_sizes " == *" 64 "* ]] || t_rtt=$(awk '{ print $1 }' <<<"$rtt_sizes")
tables() {
	local col s w c r
	printf '| measurement |'
	printf ' %s |' "${cols[@]}"
	echo
	printf '|---|'
	printf -- '---|%.0s' "${cols[@]}"
	echo
	row() { # ROW LABEL
		printf '| %s |' "$2"
		for col in "${cols[@]}"; do printf ' %s |' "${cell[$1,$col]:-}"; done
		echo
	}
	for s in $rtt_sizes; do
		row "rttm_$s" "round trip $(human "$(bytes "$s")"), median us"
		row "rttp_$s" "round trip $(human "$(bytes "$s")"), p99 us"
		row "rttf_$s" "round trip $(human "$(bytes "$s")"), fastest us"
	done
	for w in $stream_sizes; do
		row "st_$w" "stream, $(human "$(bytes "$w")") writes ($(human "$(stream_total "$(bytes "$w")")")), MB/s"
	done
	row conn "connections/s (connect + 64 B request/response + close, $conn_n sequential)"
	for c in $grid; do
		row "mr_$c" "messages/s, $c ($((${c%x*})) proc x ${c#*x} conn = $((${c%x*} * ${c#*x})), 64 B round trips, ${msg_secs} s)"
	done
	if tool_ok sockperf; then
		row sp_med "sockperf ping-pong 64 B, median us (${sp_secs} s)"
		row sp_p99 "sockperf ping-pong 64 B, p99 us"
	fi
	tool_ok wrk && row wrk "wrk -t 2 -c $wrk_conns (${wrk_secs} s) against nginx (2 workers), requests/s"
	tool_ok wrk && row ab "ab -c $ab_conns -n $ab_n against that nginx, a connection a request, requests/s"
	tool_ok iperf3 && row ip3 "iperf3 -P 4 (${ip_secs} s), Mbit/s received"
	tool_ok iperf3 && row ip3r "iperf3 -P 4 -R (the server sends), Mbit/s received"
	tool_ok iperf3 && row hol "round trip 64 B beside iperf3 -P 4 (a connection of its own, 500), median us"
	row handoff "hub hand-off: mean ns from a completion polled (in a batch) to its owner woken / of which its own routing"
	row own "hub's own cost of a message, ns: routing a completion (less the system calls that woke its owner) + posting a write; then those system calls, ns a completion"
	row idle "hubs' CPU while idle (no program running, ${idle_secs} s), ms per second"
	echo
	echo "- Round trips ($rtt_n each), streams and connections/s: the median over $rounds round(s) (the fastest round trip: the fastest of all rounds), the columns taking turns in each. Messages/s: the sum over the N processes, released together. MB = 10^6 bytes."
	for col in "${cols[@]}"; do
		echo "- $col: ${c_where[$col]}."
	done
	for s in "${notes[@]}"; do
		echo "- $s"
	done
	((failed)) && echo "- FAIL cells: the step failed or did not measure its column's path; the details are on stderr."
	echo
	echo "| target | measured ratio | met |"
	echo "|---|---|---|"
	target "same-node round trip, $(human "$(bytes "$t_rtt")") median" "rttm_$t_rtt" rshare-local tcp-lo "<=" 0.25 us
	target "same-node stream, 64 KiB writes" st_64K rshare-local tcp-lo ">=" 2 MB/s
	target "connections/s, one node" conn rshare-local tcp-lo ">=" 3 /s
	# the soft targets, on the namespaces that share the processors and
	# on those of a processor each (the -cpu columns)
	for w in "" -cpu; do
		local a=rshare-soft$w b=tcp-ns$w on=${w:+ of a processor each}
		target "connections/s, across namespaces$on" conn "$a" "$b" ">=" 1 /s
		target "soft stream, 64 KiB writes, across namespaces$on" st_64K "$a" "$b" ">=" 0.8 MB/s
		tool_ok iperf3 && target "iperf3 -P 4, across namespaces$on" ip3 "$a" "$b" ">=" 0.8 Mbit/s
		tool_ok iperf3 && target "iperf3 -P 4 -R (the server sends), across namespaces$on" ip3r "$a" "$b" ">=" 0.8 Mbit/s
		for c in $grid; do
			target "soft message rate, $c${on:+, across namespaces$on}" "mr_$c" "$a" "$b" ">=" 1 msgs/s
		done
	done
	local own_what="hub's own cost of a message (routing + posting)"
	for c in rshare-soft rshare-verbs; do
		want "$c" || continue
		if [[ -n ${own_r[$c]:-} ]]; then
			r=$((own_r[$c] + own_p[$c]))
			printf '| %s, %s <= 1000 ns | %s ns (%s + %s) | %s |\n' "$own_what" \
				"$c" "$r" "${own_r[$c]}" "${own_p[$c]}" "$( ((r <= 1000)) && echo met || echo "not met")"
		else
			printf '| %s, %s <= 1000 ns | n/a | n/a (no counters) |\n' "$own_what" "$c"
		fi
	done
	target "verbs connections/s" conn rshare-verbs rsockets ">=" 20 /s
	target "verbs round trip, $(human "$(bytes "$t_rtt")") median" "rttm_$t_rtt" rshare-verbs rsockets "<=" 1.3 us
	target "verbs round trip, $(human "$(bytes "$t_rtt")") fastest" "rttf_$t_rtt" rshare-verbs rsockets "<=" 1.3 us
	echo
	if ((${#plots[@]})); then
		echo "Plots: ${plots[*]}"
	else
		echo "Plots: none (see the notes)"
	fi
}
tables >"$tmp/tables.md"
cat "$tmp/tables.md"
if [[ -n ${BENCH_OUT:-} ]]; then
	cp "$tmp/tables.md" "$BENCH_OUT" || say "cannot write $BENCH_OUT"
fi
exit $failed

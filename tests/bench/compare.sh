#!/usr/bin/env bash
# compare.sh - kernel TCP, plain rsockets and rshare side by side, in one
# markdown table.
#
# Usage: tests/bench/compare.sh
#   in a Soft-RoCE guest:
#     make && make -C tests/bench
#     tests/vm/run.sh --timeout 900 -- env BENCH_GRID="1x1 4x16" bash tests/bench/compare.sh
#
# Runs the same workloads of build/bench/bench (tests/bench/bench.c) under
#   kernel TCP   the program as it is
#   rsockets     LD_PRELOAD=librspreload.so (plain rsockets, one RC QP per
#                socket); only where an RDMA device exists (/sys/class/infiniband)
#   rshare       `rshare run --`, through two hubs started here, one per
#                address (RSHARE_HUB_NAME picks the hub): the server's on the
#                server address, the clients' on the client address; their
#                transport is verbs where an RDMA device exists, else soft
# and prints on stdout ONE markdown table, rows:
#   - RC QPs and registered memory while N client processes hold K
#     connections each (N x K from BENCH_GRID), both ends on this machine;
#     counted with `rdma resource show qp` (lines of type RC) and
#     `rdma resource show mr` (sum of mrlen), less what was there before
#     anything started, and for the other columns less what the (idle)
#     rshare hubs hold; n/a without an RDMA device
#   - connection rate: connect + one 64 B request/response + close, sequential
#   - small-message round trip: median, p99 and the fastest
#   - stream throughput, 64 KiB writes
#   (these three run in BENCH_ROUNDS rounds, the systems taking turns, and
#   each cell is the median over the rounds)
# columns: kernel TCP | rsockets | rshare | ratio rshare/rsockets; then a few
# notes (library versions, transport, failures).  Progress goes to stderr.
# Everything is measured in this one run; only ratios within a run mean
# something.  Nothing is asserted about time: a failed measurement shows as
# FAIL in its cell (the details on stderr) and the exit status is 1; 0 when
# every cell that was run was measured.  An rshare step during which a
# connection fell back to kernel TCP (the hubs' fallback_connects counter
# moved) is a FAIL too: it did not measure rshare.
#
# Addresses: the server listens on 10.77.0.1 and clients bind 10.77.0.2 when
# this machine has both (the guest of tests/vm/run.sh), else 127.0.0.1 and
# 127.0.0.2.
#
# Packaged rsockets (librdmacm 44.0) hangs in accept() in a server that holds
# more than 3 accepted connections.  So each rsockets hold row runs
# ceil(N*K/3) server processes on consecutive ports, each holding at most 3;
# a row that would need more than BENCH_RS_MAX_SERVERS of them is not run
# (its cell says so).  With a fixed librdmacm, BENCH_RS_PER_SERVER=0 uses
# one server like the other columns.
#
# Environment:
#   BENCH_GRID           N x K cells of the resource rows
#                        (default "1x1 1x16 1x64 4x1 4x16 4x64 16x1 16x16 16x64")
#   BENCH_SYSTEMS        columns to run (default "tcp rsockets rshare")
#   BENCH_CONN_N         connections of the rate test (default 200)
#   BENCH_RTT_N, BENCH_RTT_SIZE   round trips and their size (1000, 64)
#   BENCH_STREAM         bytes streamed (default 64M); BENCH_WRITE (64K)
#   BENCH_ROUNDS         rounds of those three workloads (default 3); each
#                        cell is the median over the rounds
#   BENCH_PORT           first port of the bench servers (default 18700)
#   BENCH_HUB_PORT       port the rshare hubs link on (default 18611)
#   BENCH_TRANSPORT      transport of the rshare hubs (default: see above)
#   BENCH_SRV_ADDR, BENCH_CLI_ADDR   the two addresses
#   BENCH_RS_PER_SERVER  connections one rsockets server may hold (default 3)
#   BENCH_RS_MAX_SERVERS most rsockets servers for one hold row (default 32)
#   BENCH_TIMEOUT        bound of each step, seconds (default 180)
#   BENCH_KEEP=DIR       keep the logs of every step in DIR
#
# The shell helpers it shares with suite.sh are in common.bash.
set -uo pipefail

prog=compare
# shellcheck source=tests/bench/common.bash
. "$(dirname "${BASH_SOURCE[0]}")/common.bash"

grid=${BENCH_GRID:-1x1 1x16 1x64 4x1 4x16 4x64 16x1 16x16 16x64}
systems=${BENCH_SYSTEMS:-tcp rsockets rshare}
conn_n=${BENCH_CONN_N:-200}
rtt_n=${BENCH_RTT_N:-1000}
rtt_size=${BENCH_RTT_SIZE:-64}
stream_bytes=${BENCH_STREAM:-64M}
write_size=${BENCH_WRITE:-64K}
next_port=${BENCH_PORT:-18700}
hub_port=${BENCH_HUB_PORT:-18611}
rs_per=${BENCH_RS_PER_SERVER:-3}
rs_max=${BENCH_RS_MAX_SERVERS:-32}
step_to=${BENCH_TIMEOUT:-180}
rounds=${BENCH_ROUNDS:-3}

for cell in $grid; do
	[[ $cell =~ ^[1-9][0-9]*x[1-9][0-9]*$ ]] || die "BENCH_GRID: bad cell '$cell' (want NxK)"
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "BENCH_ROUNDS: want a number, not '$rounds'"
for s in $systems; do
	case $s in tcp | rsockets | rshare) ;; *) die "BENCH_SYSTEMS: unknown '$s'" ;; esac
done

build_bench
bench_tmp

# ---- where things run ----
pick_addrs
have_rdma=0
if [[ -n $(ls /sys/class/infiniband 2>/dev/null) ]]; then
	have_rdma=1
	command -v rdma >/dev/null || say "no 'rdma' command: QP and memory rows will be n/a"
fi
transport=${BENCH_TRANSPORT:-$( ((have_rdma)) && echo verbs || echo soft)}
lifetime=$((step_to * 40 + 600)) # bound of every background process
hubA=bench-A-$$ hubB=bench-B-$$

# rdma_counts [SKIP]: "QPS MRBYTES" of the whole machine, leaving out those
# of processes named SKIP; or "n/a n/a"
rdma_counts() {
	if ((!have_rdma)) || ! command -v rdma >/dev/null; then
		echo "n/a n/a"
		return
	fi
	local qp mr raw=$tmp/rdma-$((++rdma_seq))
	rdma resource show qp >"$raw.qp" 2>&1
	rdma resource show mr >"$raw.mr" 2>&1
	qp=$(awk -v skip="${1:-}" '{ rc = 0; c = ""
		for (i = 1; i < NF; i++) { if ($i == "type" && $(i + 1) == "RC") rc = 1; if ($i == "comm") c = $(i + 1) }
		if (rc && c != skip) n++ } END { print n + 0 }' "$raw.qp")
	mr=$(awk -v skip="${1:-}" '{ l = 0; c = ""
		for (i = 1; i < NF; i++) { if ($i == "mrlen") l = $(i + 1); if ($i == "comm") c = $(i + 1) }
		if (c != skip) s += l } END { printf "%.0f\n", s }' "$raw.mr")
	echo "${qp:-0} ${mr:-0}"
}
rdma_seq=0
rdma_counts >"$tmp/rdma-base"
read -r base_qp base_mr <"$tmp/rdma-base"

declare -A cell # cell[ROW,SYSTEM]
failed=0
notes=()

# wrappers: how the server and the clients of each system run
srv_wrap() {
	case $1 in
	tcp) ;;
	rsockets) echo "env LD_PRELOAD=$preload" ;;
	rshare) echo "env RSHARE_HUB_NAME=$hubA RSHARE_PORT=$hub_port $rshare_cmd run --" ;;
	esac
}
cli_wrap() {
	case $1 in
	tcp) ;;
	rsockets) echo "env LD_PRELOAD=$preload" ;;
	rshare) echo "env RSHARE_HUB_NAME=$hubB RSHARE_PORT=$hub_port $rshare_cmd run --" ;;
	esac
}

# start_servers SYS NAME PORT COUNT: COUNT bench servers on PORT...; pids in srv_pids
start_servers() {
	# shellcheck disable=SC2046 # the wrapper is words
	bench_servers "$2-srv" "$3" "$4" "$srv_addr" $(srv_wrap "$1")
}

# client SYS NAME ARGS...: run one bench client in the foreground
client() {
	local sys=$1 name=$2
	shift 2
	# shellcheck disable=SC2046
	timeout -k 5 $((step_to + 10)) $(cli_wrap "$sys") "$bench" "$@" -B "$cli_addr" -t "$step_to" \
		>"$tmp/$name.out" 2>"$tmp/$name.err" </dev/null
}

fail_cell() { # ROW SYS REASON
	cell[$1,$2]="FAIL ($3)"
	failed=1
}

# rshare_fallbacks: connections the two hubs turned into kernel TCP so far
# (a refused or unroutable connect falls back silently; a measurement with
# such connections is not one of rshare)
rshare_fallbacks() {
	local h n sum=0
	for h in "$hubA" "$hubB"; do
		n=$(hub_json "" "$h" | json_count fallback_connects)
		sum=$((sum + ${n:-0}))
	done
	echo "$sum"
}
# fell_back SYS BEFORE: true, with the reason in $fb_reason, when rshare
# connections fell back to kernel TCP since BEFORE
fell_back() {
	[[ $1 == rshare ]] || return 1
	local now
	now=$(rshare_fallbacks)
	((now > $2)) || return 1
	fb_reason="$((now - $2)) connections fell back to kernel TCP"
	say "rshare: $fb_reason (hub counter fallback_connects)"
}

# ---- the workloads ----
# Each round runs connrate, rtt and stream once per system, the systems in
# turn (a different one first each round), against one server per system
# started before; a cell is the median over the rounds.  Interleaving keeps
# a slow spell of the machine from landing on one column only.
declare -A vals # vals[METRIC,SYS]: one value per round
declare -A main_port main_pid
start_main() { # SYS
	local port=$next_port
	next_port=$((next_port + 1))
	if ! start_servers "$1" "$1-main" "$port" 1; then
		for r in conn conn_split rtt_med rtt_p99 rtt_min stream; do fail_cell $r "$1" "$srv_fail"; done
		stop "${srv_pids[@]}"
		return 1
	fi
	main_port[$1]=$port
	main_pid[$1]=${srv_pids[0]}
}
# one_workload SYS ROUND WORKLOAD
one_workload() {
	local sys=$1 name=$1-$3-r$2 port=${main_port[$1]} f fb=0
	f=$tmp/$name
	[[ $sys == rshare ]] && fb=$(rshare_fallbacks)
	case $3 in
	connrate)
		if client "$sys" "$name" connrate "$srv_addr" "$port" -n "$conn_n"; then
			if fell_back "$sys" "$fb"; then
				fail_cell conn "$sys" "$fb_reason"
				fail_cell conn_split "$sys" "$fb_reason"
				return
			fi
			vals[conn,$sys]+=" $(kv "$f.out" conns_per_s)"
			vals[c_ms,$sys]+=" $(kv "$f.out" connect_ms)"
			vals[rr_ms,$sys]+=" $(kv "$f.out" rr_ms)"
			vals[cl_ms,$sys]+=" $(kv "$f.out" close_ms)"
			return
		fi
		fail_cell conn "$sys" "$(why "$f.err")"
		fail_cell conn_split "$sys" "$(why "$f.err")"
		;;
	rtt)
		if client "$sys" "$name" rtt "$srv_addr" "$port" -n "$rtt_n" -s "$rtt_size"; then
			if fell_back "$sys" "$fb"; then
				fail_cell rtt_med "$sys" "$fb_reason"
				fail_cell rtt_p99 "$sys" "$fb_reason"
				fail_cell rtt_min "$sys" "$fb_reason"
				return
			fi
			vals[rtt_med,$sys]+=" $(kv "$f.out" median_us)"
			vals[rtt_p99,$sys]+=" $(kv "$f.out" p99_us)"
			vals[rtt_min,$sys]+=" $(kv "$f.out" min_us)"
			return
		fi
		fail_cell rtt_med "$sys" "$(why "$f.err")"
		fail_cell rtt_p99 "$sys" "$(why "$f.err")"
		fail_cell rtt_min "$sys" "$(why "$f.err")"
		;;
	stream)
		if client "$sys" "$name" stream "$srv_addr" "$port" -b "$stream_bytes" -w "$write_size"; then
			if fell_back "$sys" "$fb"; then
				fail_cell stream "$sys" "$fb_reason"
				return
			fi
			vals[stream,$sys]+=" $(kv "$f.out" MBps)"
			return
		fi
		fail_cell stream "$sys" "$(why "$f.err")"
		;;
	esac
	show_err "$sys $3 (round $2)" "$f.err" "$tmp/$sys-main-srv0.err"
}
run_workloads() { # SYS...: the systems whose server is up
	local up=("$@") nsys=$# r i w sys
	for ((r = 1; r <= rounds; r++)); do
		for w in connrate rtt stream; do
			case $w in
			connrate) say "round $r/$rounds: connection rate, $conn_n connections: ${up[*]}" ;;
			rtt) say "round $r/$rounds: round trips, $rtt_n x $rtt_size B: ${up[*]}" ;;
			stream) say "round $r/$rounds: stream, $stream_bytes in $write_size writes: ${up[*]}" ;;
			esac
			for ((i = 0; i < nsys; i++)); do
				sys=${up[(i + r - 1) % nsys]}
				one_workload "$sys" "$r" "$w"
			done
		done
	done
	local m
	for sys in "${up[@]}"; do
		for m in conn rtt_med rtt_p99 rtt_min stream; do
			[[ -n ${cell[$m,$sys]:-} ]] && continue # failed
			# shellcheck disable=SC2086 # one word per round
			cell[$m,$sys]=$(median ${vals[$m,$sys]})
		done
		if [[ -z ${cell[conn_split,$sys]:-} ]]; then
			# shellcheck disable=SC2086
			cell[conn_split,$sys]="$(median ${vals[c_ms,$sys]}) / $(median ${vals[rr_ms,$sys]}) / $(median ${vals[cl_ms,$sys]})"
		fi
	done
}

# hold_row SYS N K: N processes holding K connections each; QPs and MR bytes
hold_row() {
	local sys=$1 n=$2 k=$3 total=$(($2 * $3)) nsrv=1 per=0 port j i name=$1-hold-$2x$3
	local row_q=qp_$2x$3 row_m=mr_$2x$3
	if [[ $sys == rsockets ]] && ((rs_per > 0)); then
		per=$rs_per
		nsrv=$(((total + per - 1) / per))
		if ((nsrv > rs_max)); then
			cell[$row_q,$sys]="not run ($nsrv servers needed)"
			cell[$row_m,$sys]="not run ($nsrv servers needed)"
			rs_skipped+=("${n}x$k")
			return
		fi
	fi
	port=$next_port
	next_port=$((next_port + nsrv))
	say "$sys: $n x $k held connections ($nsrv server$( ((nsrv > 1)) && echo s))"
	if ! start_servers "$sys" "$name" "$port" "$nsrv"; then
		fail_cell "$row_q" "$sys" "$srv_fail"
		fail_cell "$row_m" "$sys" "$srv_fail"
		stop "${srv_pids[@]}"
		return
	fi
	local rel=$tmp/$name.release cli_pids=() ok=1 reason="" fb=0
	rm -f "$rel"
	[[ $sys == rshare ]] && fb=$(rshare_fallbacks)
	for ((j = 0; j < n; j++)); do
		# shellcheck disable=SC2046
		"${own_session[@]}" timeout -k 5 $((step_to + 10)) $(cli_wrap "$sys") "$bench" hold "$srv_addr" "$port" \
			-c "$k" -f "$rel" -m "$per" -i $((j * k)) -B "$cli_addr" -t "$step_to" \
			>"$tmp/$name-cli$j.out" 2>"$tmp/$name-cli$j.err" </dev/null &
		cli_pids+=($!)
		groups[$!]=1
	done
	for ((j = 0; j < n; j++)); do
		if ! wait_line "$tmp/$name-cli$j.out" "^held $k\$" "$step_to" "${cli_pids[j]}"; then
			ok=0
			reason=$(why "$tmp/$name-cli$j.err")
			[[ $reason == "no output" ]] && alive "${cli_pids[j]}" && reason="no held line in ${step_to}s"
			show_err "$sys hold ${n}x$k client $j" "$tmp/$name-cli$j.err" "$tmp/$name-srv0.err"
			break
		fi
	done
	if ((ok)) && fell_back "$sys" "$fb"; then
		ok=0
		reason=$fb_reason
	fi
	if ((ok)); then
		local q m
		# the rshare hubs stay up (idle) through the other columns' rows
		rdma_counts "$([[ $sys == rshare ]] || echo rshared)" >"$tmp/$name.rdma"
		read -r q m <"$tmp/$name.rdma"
		if [[ $q == n/a ]]; then
			cell[$row_q,$sys]=n/a
			cell[$row_m,$sys]=n/a
		else
			cell[$row_q,$sys]=$((q - base_qp))
			cell[$row_m,$sys]=$(awk -v m="$m" -v b="$base_mr" 'BEGIN { printf "%.1f", (m - b) / 1048576 }')
		fi
		if [[ $sys == rshare ]]; then
			local links
			links=$(hub_json "" "$hubB" | grep -o '"peer_node"' | wc -l)
			rshare_links+=("${n}x$k: $links")
		fi
	else
		fail_cell "$row_q" "$sys" "$reason"
		fail_cell "$row_m" "$sys" "$reason"
	fi
	touch "$rel"
	for ((j = 0; j < n; j++)); do
		wait_gone "${cli_pids[j]}" 30 || kill -KILL -- "-${cli_pids[j]}" 2>/dev/null
		reap "${cli_pids[j]}"
	done
	stop "${srv_pids[@]}"
}

hub_pids=()
start_hubs() {
	local h a
	for h in A B; do
		[[ $h == A ]] && a=$srv_addr || a=$cli_addr
		say "rshare: hub $h on $a, transport $transport"
		start_hub "hub$h" "" "bench-$h-$$" --port "$hub_port" --addr "$a" --transport "$transport"
		local rc=$?
		hub_pids+=("$bg_pid")
		((rc == 0)) || return 1
	done
}

# ---- run every system ----
rs_skipped=()
rshare_links=()
avail=()
for sys in tcp rsockets rshare; do
	unavailable=""
	if [[ " $systems " != *" $sys "* ]]; then
		unavailable="not run"
	elif [[ $sys == rsockets ]] && ((!have_rdma)); then
		unavailable="n/a"
		notes+=("rsockets: n/a, no RDMA device here (/sys/class/infiniband is empty).")
	elif [[ $sys == rsockets && ! -e $preload ]]; then
		unavailable="n/a"
		notes+=("rsockets: n/a, no $preload.")
	elif [[ $sys == rshare && ! (-x $rshare_cmd && -x $rshared && -e $build/librshare.so) ]]; then
		unavailable="n/a"
		notes+=("rshare: n/a, not built (run make).")
	elif [[ $sys == rshare ]] && ! start_hubs; then
		for r in conn conn_split rtt_med rtt_p99 rtt_min stream; do fail_cell $r rshare "$hub_fail"; done
		for c in $grid; do
			fail_cell "qp_$c" rshare "$hub_fail"
			fail_cell "mr_$c" rshare "$hub_fail"
		done
		stop "${hub_pids[@]}"
		continue
	fi
	if [[ -n $unavailable ]]; then
		for r in conn conn_split rtt_med rtt_p99 rtt_min stream; do cell[$r,$sys]=$unavailable; done
		for c in $grid; do cell[qp_$c,$sys]=$unavailable cell[mr_$c,$sys]=$unavailable; done
		continue
	fi
	avail+=("$sys")
done

up=()
for sys in "${avail[@]}"; do
	start_main "$sys" && up+=("$sys")
done
((${#up[@]})) && run_workloads "${up[@]}"
for sys in "${up[@]}"; do
	stop "${main_pid[$sys]}"
done
for c in $grid; do
	for sys in "${avail[@]}"; do
		hold_row "$sys" "${c%x*}" "${c#*x}"
	done
done
if [[ " ${avail[*]} " == *" rshare "* ]]; then
	tr=$(hub_json "" "$hubB" |
		grep -oE '"transport": ?"[a-z]+"' | sort -u | grep -oE '"[a-z]+"$' | tr -d '"' | paste -sd, -)
	notes+=("rshare: hubs on $srv_addr (server) and $cli_addr (clients), port $hub_port, started with --transport $transport; links seen: ${tr:-none}.")
	stop "${hub_pids[@]}"
fi

# ---- the table ----
ratio() {
	local a=${cell[$1,rshare]:-} b=${cell[$1,rsockets]:-} q
	if q=$(quotient "$a" "$b"); then
		echo "${q}x"
	elif [[ $a == 0 && $b == 0 ]]; then
		echo "-"
	else
		echo "n/a"
	fi
}
row() { # ROW LABEL [noratio]
	local r=${3:-$(ratio "$1")}
	printf '| %s | %s | %s | %s | %s |\n' "$2" "${cell[$1,tcp]:-}" "${cell[$1,rsockets]:-}" \
		"${cell[$1,rshare]:-}" "$r"
}
rdmacm=$(dpkg-query -W -f '${Version}' librdmacm1 2>/dev/null || echo unknown)
echo "| measurement | kernel TCP | rsockets | rshare | ratio rshare/rsockets |"
echo "|---|---|---|---|---|"
for c in $grid; do
	row "qp_$c" "RC QPs, $c (${c%x*} proc x ${c#*x} conn)"
done
for c in $grid; do
	row "mr_$c" "registered MiB, $c"
done
row conn "connections/s (connect + 64 B request/response + close, $conn_n sequential)"
row conn_split "ms per connection: connect / request+response / close" "n/a"
row rtt_med "round trip $rtt_size B, median us ($rtt_n)"
row rtt_p99 "round trip $rtt_size B, p99 us"
row rtt_min "round trip $rtt_size B, fastest us (the least disturbed by a busy machine)"
row stream "stream $stream_bytes in $write_size writes, MB/s"
echo
echo "- Connection rate, round trip and stream: the median over $rounds round(s), the columns taking turns in each."
if [[ $base_qp == n/a ]]; then
	echo "- Server on $srv_addr, clients bound to $cli_addr, both on this machine. QPs and registered memory: n/a, no RDMA device here; a hold row that failed says FAIL."
else
	echo "- Server on $srv_addr, clients bound to $cli_addr, both on this machine (every connection has two ends here). QPs and registered memory: \`rdma resource show qp\` (type RC) and \`rdma resource show mr\` (sum of mrlen) while all connections are held, less the $base_qp RC QPs and $base_mr bytes there before; the rshare figures include its hubs, the others leave them out."
fi
if [[ " ${avail[*]} " == *" rsockets "* ]]; then
	notes+=("rsockets: librdmacm $rdmacm; each hold row uses ceil(N*K/$rs_per) server processes holding at most $rs_per connections each (the packaged library hangs in accept() past 3 held connections)${rs_skipped[*]:+; not run (more than $rs_max servers): ${rs_skipped[*]}}.")
	((rs_per > 0)) || notes[-1]="rsockets: librdmacm $rdmacm; one server per hold row (BENCH_RS_PER_SERVER=0)."
fi
if ((${#rshare_links[@]})); then
	links=$(printf '%s, ' "${rshare_links[@]}")
	notes+=("rshare links of the client hub while each row was held: ${links%, }.")
fi
for n in "${notes[@]}"; do
	echo "- $n"
done
((failed)) && echo "- FAIL cells: the step failed; its error lines are on stderr."
# what the hubs warned of, next to the failures
((failed)) && grep -h 'warn\|error' "$tmp"/hub*.err 2>/dev/null | tail -n 20 | sed 's/^/compare: hub: /' >&2
exit $failed

#!/usr/bin/env bash
# rtt-two-guests.sh - the small-message round trip between two Soft-RoCE
# guests: kernel TCP, plain rsockets and rshare over verbs, in one table.
#
# Usage (both guests run it; node 2 serves, node 1 measures and prints):
#   make && make -C tests/bench
#   tests/vm/run.sh --nodes 2 --timeout 1200 \
#       --node2 'bash tests/bench/rtt-two-guests.sh' -- bash tests/bench/rtt-two-guests.sh
#
# Node 2 (10.77.0.2) starts a verbs hub and three bench servers (bench.c):
# one as it is (kernel TCP), one under LD_PRELOAD=librspreload.so (plain
# rsockets: a queue pair per socket) and one under `rshare run --`.  Node
# 1 (10.77.0.1) starts its own verbs hub, then runs `bench rtt` against
# each in BENCH_ROUNDS rounds, the systems taking turns in each round.  Each
# rshare step proves that it went over the verbs link from the hub's
# counters (the link's transport, msgs_tx moved by at least the round
# trips, no connection fallen back to kernel TCP); each rsockets step, that
# rxe0 sent packets.  A step that cannot prove it is a FAIL, not a figure.
#
# Prints on stdout one markdown table: the median of the rounds' median
# round trips, and the fastest round trip of all rounds, per system, and
# rshare / rsockets beside its target (at most 1.3x, as suite.sh's); then
# notes.  Nothing is asserted about time.  Exits 0 when every step
# measured, 1 when one failed, 2 on a usage or set-up error.  Absolute
# times under software emulation mean little; ratios within a run do.
#
# Environment: BENCH_ROUNDS (default 5), BENCH_RTT_N round trips a step
# (1000), BENCH_RTT_SIZE (64), BENCH_PORT first server port (18800),
# BENCH_HUB_PORT (18611), BENCH_TIMEOUT bound of each step in seconds (180).
set -uo pipefail

prog=rtt-two-guests
# shellcheck source=tests/bench/common.bash
. "$(dirname "${BASH_SOURCE[0]}")/common.bash"

node=${RSHARE_VM_NODE:-}
if [[ ! ($node == 1 || $node == 2) || ${RSHARE_VM_NODES:-1} != 2 ]]; then
	die "runs in the two guests of tests/vm/run.sh --nodes 2 (see its opening comment)"
fi
dir=${RSHARE_VM_DIR:-/run/rshare-vm}
rounds=${BENCH_ROUNDS:-5}
rtt_n=${BENCH_RTT_N:-1000}
size=${BENCH_RTT_SIZE:-64}
port=${BENCH_PORT:-18800}
hub_port=${BENCH_HUB_PORT:-18611}
step_to=${BENCH_TIMEOUT:-180}
for v in "$rounds" "$rtt_n" "$size" "$port" "$hub_port" "$step_to"; do
	[[ $v =~ ^[1-9][0-9]*$ ]] || die "BENCH_ROUNDS, BENCH_RTT_N, BENCH_RTT_SIZE, BENCH_PORT, BENCH_HUB_PORT and BENCH_TIMEOUT take positive whole numbers: '$v'"
done
lifetime=$((step_to * (3 * rounds + 4)))
srv=10.77.0.2 cli=10.77.0.1
hub=rtt2-$node
systems=(tcp rsockets rshare)
declare -A sport=([tcp]=$port [rsockets]=$((port + 1)) [rshare]=$((port + 2)))
declare -A prefix=(
	[tcp]=""
	[rsockets]="env LD_PRELOAD=$preload"
	[rshare]="env RSHARE_HUB_NAME=$hub RSHARE_PORT=$hub_port $rshare_cmd run --"
)

[[ -x $bench && -x $rshared && -e $build/librshare.so ]] || die "build first: make && make -C tests/bench"
[[ -e $preload ]] || die "no plain rsockets here ($preload)"
[[ -d /sys/class/infiniband/rxe0 ]] || die "no rxe0 in this guest"

bench_tmp
mark() { : >"$dir/rtt2.$1"; }
await() { # NAME SECS
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		[[ -e $dir/rtt2.$1 ]] && return 0
		sleep 0.1
	done
	return 1
}
rxe_sent() { cat /sys/class/infiniband/rxe0/ports/1/hw_counters/sent_pkts; }

start_hub hub "" "$hub" --port "$hub_port" --addr "$([[ $node == 2 ]] && echo $srv || echo $cli)" \
	--transport verbs || { mark "fail.$node"; die "$hub_fail"; }

# ---- node 2: the servers, until node 1 is done ----
if [[ $node == 2 ]]; then
	for sys in "${systems[@]}"; do
		# shellcheck disable=SC2086 # the prefix is words
		if ! bench_servers "$sys" "${sport[$sys]}" 1 "$srv" ${prefix[$sys]}; then
			mark fail.2
			die "the $sys server did not start: $srv_fail"
		fi
	done
	mark ready
	await finished "$lifetime" || say "node 1 never said it was done"
	exit 0
fi

# ---- node 1: the clients ----
await ready 300 || die "node 2's servers never came up"
[[ -e $dir/rtt2.fail.2 ]] && die "node 2 failed to set up (its lines are prefixed node2|)"
trap 'mark finished; cleanup' EXIT

declare -A med fast fails
link_of() { # the verbs link's msgs_tx, or nothing when there is no verbs link
	hub_json "" "$hub" | jq -r '[.links[] | select(.transport == "verbs" and .state == "up") | .msgs_tx] | first // empty' 2>/dev/null
}
fallbacks() { hub_json "" "$hub" | json_count fallback_connects; }

for ((r = 1; r <= rounds; r++)); do
	for sys in "${systems[@]}"; do
		say "round $r/$rounds: $sys"
		name=$sys-r$r
		before_pkts=$(rxe_sent)
		before_msgs=$(link_of)
		before_fb=$(fallbacks)
		# shellcheck disable=SC2086 # the prefix is words
		timeout -k 5 "$step_to" ${prefix[$sys]} "$bench" rtt "$srv" "${sport[$sys]}" -n "$rtt_n" -s "$size" \
			>"$tmp/$name.out" 2>"$tmp/$name.err"
		rc=$? reason=""
		if ((rc != 0)); then
			reason="exit $rc: $(why "$tmp/$name.err")"
		elif [[ $sys == rsockets ]] && (($(rxe_sent) - before_pkts < rtt_n)); then
			reason="rxe0 sent $(($(rxe_sent) - before_pkts)) packets: not over RDMA"
		elif [[ $sys == rshare ]]; then
			after_msgs=$(link_of)
			if [[ -z $after_msgs ]]; then
				reason="no verbs link up: $(hub_json "" "$hub" | jq -c '[.links[] | .transport + " " + .state]' 2>/dev/null)"
			elif ((after_msgs - ${before_msgs:-0} < rtt_n)); then
				reason="the verbs link sent $((after_msgs - ${before_msgs:-0})) messages for $rtt_n round trips"
			elif [[ $(fallbacks) != "$before_fb" ]]; then
				reason="a connection fell back to kernel TCP"
			fi
		fi
		if [[ -n $reason ]]; then
			fails[$sys]+="round $r: $reason; "
			show_err "$name" "$tmp/$name.out" "$tmp/$name.err"
			continue
		fi
		med[$sys]+=" $(kv "$tmp/$name.out" median_us)"
		fast[$sys]+=" $(kv "$tmp/$name.out" min_us)"
	done
done

# ---- the table ----
cell() { # SYSTEM median|fastest
	local v
	[[ -n ${fails[$1]:-} ]] && { echo FAIL; return; }
	# shellcheck disable=SC2086 # a list of numbers
	if [[ $2 == median ]]; then v=$(median ${med[$1]}); else v=$(least ${fast[$1]}); fi
	echo "$v"
}
ratio() { # A B: A/B as 1.23x, or n/a (a FAIL, no figure)
	local q
	if q=$(quotient "$1" "$2"); then echo "${q}x"; else echo n/a; fi
}
met() { # RATIO: met when at most 1.3x
	[[ $1 == n/a ]] && { echo n/a; return; }
	awk -v x="${1%x}" 'BEGIN { print (x <= 1.3 ? "met" : "not met") }'
}
echo "| $size B round trip between two guests, us | kernel TCP | rsockets | rshare (verbs) | rshare / rsockets (target <= 1.3x) |"
echo "|---|---|---|---|---|"
for what in median fastest; do
	t=$(cell tcp $what) s=$(cell rsockets $what) h=$(cell rshare $what)
	x=$(ratio "$h" "$s")
	echo "| $what | $t | $s | $h | $x, $(met "$x") |"
done
echo
echo "- $rounds rounds of $rtt_n round trips each (bench rtt -s $size), the systems taking turns in each round; median: the median of the rounds' medians; fastest: the fastest round trip of all rounds."
echo "- Server on node 2 ($srv), client on node 1 ($cli): two QEMU guests, 1 vCPU each, rdma_rxe on each one's eth0, joined by a QEMU socket netdev."
echo "- rsockets: $preload (librdmacm $(dpkg-query -W -f '${Version}' librdmacm1 2>/dev/null || echo '?')), a queue pair per socket; every step saw rxe0's sent packets move."
echo "- rshare: a hub on each node, transport verbs, RSHARE_SPIN_US ${RSHARE_SPIN_US:-unset}; every step saw the verbs link's msgs_tx move by at least the round trips and no connection fall back to kernel TCP."
status=0
for sys in "${systems[@]}"; do
	[[ -n ${fails[$sys]:-} ]] && { echo "- $sys FAILED: ${fails[$sys]}"; status=1; }
done
exit $status

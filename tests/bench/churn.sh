#!/usr/bin/env bash
# churn.sh - short connections that each carry a request, many open at
# once: an asyncio echo client and server (tests/bench/aio-echo.py) on
# kernel TCP and on rshare, side by side, in one markdown table.
#
# Usage: make && bash tests/bench/churn.sh      (as root: it makes namespaces)
#
# Columns: tcp-ns (kernel TCP, server in one namespace, client in another,
# a veth pair), rshare-soft (the same namespaces, a hub in each,
# --transport soft, both programs under `rshare run --`), tcp-lo and
# rshare-local (client and server in one namespace: rshare's same-node
# path).  Rows: for each AT_ONCE of CHURN_AT_ONCE, the client opens
# CHURN_N connections, at most AT_ONCE of them open together (0: all of
# them, their connects 500 at a time), each writing CHURN_SIZE bytes,
# reading them back whole, checking them and closing; a cell is the median
# over CHURN_ROUNDS rounds (the columns take turns in each) of the client's
# seconds from its first connect to its last close.  The ratio is kernel
# TCP's seconds over rshare's (above 1: rshare is faster).  "hub faults"
# are the page faults of the hubs per connection (every fresh ring page
# faults in the hub and in the programs; a ring used before does not).
# An rshare cell whose connections did not all take rshare (the hubs'
# counters: the link's connections or the local connects, and no
# fallback) says so.  Nothing is asserted about time.
#
# Environment: CHURN_N (3000), CHURN_SIZE (100000), CHURN_AT_ONCE
# ("200 0"), CHURN_ROUNDS (3), CHURN_TIMEOUT (300 s a step); RSHARE_BUILD
# (the build folder).
# shellcheck disable=SC2034,SC2154 # variables shared with common.bash
set -uo pipefail

prog=churn
# shellcheck source=tests/bench/common.bash
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
aio=$here/aio-echo.py

[[ -x $rshare_cmd && -x $rshared ]] || die "build first: make"
[[ $(id -u) == 0 ]] || die "needs root (network namespaces)"
command -v python3 >/dev/null || die "needs python3"
ulimit -n "$(ulimit -Hn)"

n=${CHURN_N:-3000}
size=${CHURN_SIZE:-100000}
at_once_list=${CHURN_AT_ONCE:-200 0}
rounds=${CHURN_ROUNDS:-3}
step_to=${CHURN_TIMEOUT:-300}
lifetime=$((step_to * 40))
suf=$$
A=chA-$suf B=chB-$suf
AA=10.79.0.1 AB=10.79.0.2
HA=churn-A-$suf HB=churn-B-$suf
cols=(tcp-ns rshare-soft tcp-lo rshare-local)
# shellcheck disable=SC2317 # run by the exit trap (common.bash)
cleanup_more() {
	ip netns del "$A" 2>/dev/null
	ip netns del "$B" 2>/dev/null
}
bench_tmp

stat_of() { # NS HUB: the hub's link connections, local connects and fallbacks
	ip netns exec "$1" env RSHARE_HUB_NAME="$2" timeout 20 "$rshare_cmd" stat --json 2>/dev/null |
		jq -r '"\(.links | map(.connections_total) | add // 0) \(.counters.local_connects) \(.counters.fallback_connects)"'
}
hub_faults() {
	local t=0 p
	for p in $(pgrep -f "^$rshared"); do t=$((t + $(awk '{print $10}' "/proc/$p/stat" 2>/dev/null || echo 0))); done
	echo "$t"
}

{ ip netns add "$A" && ip netns add "$B"; } || die "cannot make namespaces"
ip link add "ca$suf" netns "$A" type veth peer name "cb$suf" netns "$B"
ip -n "$A" addr add $AA/24 dev "ca$suf"
ip -n "$B" addr add $AB/24 dev "cb$suf"
for x in "$A" "$B"; do ip -n "$x" link set lo up; done
ip -n "$A" link set "ca$suf" up
ip -n "$B" link set "cb$suf" up
ip netns exec "$A" sysctl -qw net.core.somaxconn=65535
ip netns exec "$B" sysctl -qw net.ipv4.ip_local_port_range="1024 65535"
ip netns exec "$A" sysctl -qw net.ipv4.ip_local_port_range="1024 65535"
bg hubA ip netns exec "$A" env RSHARE_HUB_NAME=$HA "$rshared" --transport soft
bg hubB ip netns exec "$B" env RSHARE_HUB_NAME=$HB "$rshared" --transport soft
sleep 1
bg srv-tcp ip netns exec "$A" python3 "$aio" server $AA 7950
bg srv-rs ip netns exec "$A" env RSHARE_HUB_NAME=$HA RSHARE_NO_AUTOSTART=1 "$rshare_cmd" run -- python3 "$aio" server $AA 7951
for x in srv-tcp srv-rs; do
	wait_line "$tmp/$x.out" '^ready=1' 10 || die "$x did not come up: $(tail -n 2 "$tmp/$x.err")"
done

declare -A secs faults bad
for ((r = 1; r <= rounds; r++)); do
	for k in $at_once_list; do
		for col in "${cols[@]}"; do
			say "round $r/$rounds, at once ${k/#0/all}, $col"
			ns=$B hub=$HB port=7950 pre=()
			[[ $col == *-lo || $col == *-local ]] && ns=$A hub=$HA
			[[ $col == rshare-* ]] && port=7951 pre=(env RSHARE_HUB_NAME="$hub" RSHARE_NO_AUTOSTART=1 "$rshare_cmd" run --)
			before=$(stat_of "$ns" "$hub") f0=$(hub_faults)
			line=$(ip netns exec "$ns" timeout -k 5 "$step_to" "${pre[@]}" python3 "$aio" client $AA $port "$n" "$size" "$k" 2>"$tmp/client.err")
			f1=$(hub_faults) after=$(stat_of "$ns" "$hub")
			if [[ $line =~ ok=([0-9]+)\ n=[0-9]+\ secs=([0-9.]+)\ errors=([0-9]+)\ first=(.*) ]] && ((BASH_REMATCH[3] == 0)); then
				secs[$k,$col]+=" ${BASH_REMATCH[2]}"
			else
				bad[$k,$col]="${line:-no output: $(tail -1 "$tmp/client.err")}"
			fi
			if [[ $col == rshare-* ]]; then
				faults[$k,$col]+=" $(((f1 - f0) / n))"
				read -r l0 c0 fb0 <<<"$before"
				read -r l1 c1 fb1 <<<"$after"
				if [[ $col == rshare-soft ]] && ((l1 - l0 < n)); then
					bad[$k,$col]="the link carried $((l1 - l0)) of $n connections"
				elif [[ $col == rshare-local ]] && ((c1 - c0 < n)); then
					bad[$k,$col]="$((c1 - c0)) of $n connections took the same-node path"
				elif ((fb1 != fb0)); then
					bad[$k,$col]="$((fb1 - fb0)) connections fell back to kernel TCP"
				fi
			fi
		done
	done
done

med() { median "$@" | grep . || echo n/a; }
cell() { # KEY COL
	[[ -n ${bad[$1,$2]:-} ]] && { echo "FAIL (${bad[$1,$2]})"; return; }
	# shellcheck disable=SC2086 # a list of numbers
	med ${secs[$1,$2]:-}
}
ratio() { # KEY TCPCOL RSCOL
	local t r
	t=$(cell "$1" "$2") r=$(cell "$1" "$3")
	[[ $t =~ ^[0-9.]+$ && $r =~ ^[0-9.]+$ ]] && awk -v t="$t" -v r="$r" 'BEGIN {printf "%.2fx", t / r}' || echo n/a
}
echo "### Short connections: asyncio echo, $n connections of $size bytes each way (median of $rounds)"
echo
echo "| at once | tcp-ns s | rshare-soft s | ratio | hub faults/conn | tcp-lo s | rshare-local s | ratio | hub faults/conn |"
echo "|---|---|---|---|---|---|---|---|---|"
for k in $at_once_list; do
	# shellcheck disable=SC2086 # lists of numbers
	echo "| ${k/#0/all} | $(cell "$k" tcp-ns) | $(cell "$k" rshare-soft) | $(ratio "$k" tcp-ns rshare-soft) | $(med ${faults[$k,rshare-soft]:-}) | $(cell "$k" tcp-lo) | $(cell "$k" rshare-local) | $(ratio "$k" tcp-lo rshare-local) | $(med ${faults[$k,rshare-local]:-}) |"
done
echo
echo "- ratio: kernel TCP's seconds over rshare's (above 1: rshare faster); hub faults: the hubs' page faults per connection in the rshare runs."
echo "- $(nproc) CPUs, $(uname -r), python $(python3 -c 'import platform; print(platform.python_version())')."

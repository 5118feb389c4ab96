#!/usr/bin/env bash
# scale.sh - many idle connections across two network namespaces, kernel
# TCP and rshare side by side, in one markdown table.
#
# Usage: make && bash tests/bench/scale.sh        (as root: it makes namespaces)
#
# For each N of SCALE_N and each system, SCALE_PROCS client processes
# (tests/many-connections.c client -H) open N connections in all, blocking,
# round-robin over SCALE_PORTS ports of a pre-fork server of SCALE_WORKERS
# epoll workers in the other namespace, echo 16 bytes on each, and hold
# them; then the row is read:
#   opened / echoed   connections opened and echoed (all processes)
#   open s            the slowest process's time to open its share
#   echo ms           the slowest process's time to echo on all of its own
#   1 more ms         then, a new process opens one more connection and
#                     echoes on it: how long, its first request to the
#                     hub included (the hubs stay responsive at N)
#   KiB/conn          (MemFree before - MemFree while held) / N: all the
#                     memory the connections cost the machine, both ends
#   shmem, slab, pt   the same for Shmem (rshare's arenas are memfds), the
#                     kernel's slab (socket structures) and the page tables
#                     (of the processes' mappings), KiB per conn
#   hub RSS           the two hubs' resident memory, MiB, while held (their
#                     keepers' too: forked, their pages mostly the hub's)
#   hub CPU           the CPU time the two hubs spent on the row, s
# Systems: tcp (the programs as they are) and rshare (`rshare run --`, a
# hub in each namespace, soft transport).  An rshare row whose connections
# fell back to kernel TCP, or went elsewhere than the link, says so.
# Nothing is asserted about time; a row that did not open or echo every
# connection shows its counts and the first error.
#
# Environment: SCALE_N ("1000 10000"), SCALE_PROCS (4), SCALE_WORKERS (4),
# SCALE_PORTS (2), SCALE_SYSTEMS ("tcp rshare"), SCALE_TIMEOUT (600 s a
# row).  The processes' descriptor limit is raised to the hard limit.
set -uo pipefail

prog=scale
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo=$(cd "$here/../.." && pwd -P)
build=${RSHARE_BUILD:-$repo/build}
mc=$build/tests/many-connections
say() { echo "$prog: $*" >&2; }
die() { say "$*"; exit 2; }

[[ -x $mc && -x $build/rshare && -x $build/rshared ]] || die "build first: make"
[[ $(id -u) == 0 ]] || die "needs root (network namespaces)"
ulimit -n "$(ulimit -Hn)"

ns_list=${SCALE_N:-1000 10000}
procs=${SCALE_PROCS:-4}
workers=${SCALE_WORKERS:-4}
nports=${SCALE_PORTS:-2}
systems=${SCALE_SYSTEMS:-tcp rshare}
row_to=${SCALE_TIMEOUT:-600}
suf=$$
A=scA-$suf B=scB-$suf
AA=10.78.0.1 AB=10.78.0.2
tmp=$(mktemp -d)
pids=()

cleanup() {
	local p
	for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
	sleep 0.5
	for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done
	ip netns del "$A" 2>/dev/null
	ip netns del "$B" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

nodes() {
	ip netns add "$A" && ip netns add "$B" || die "cannot make namespaces"
	ip link add "sa$suf" netns "$A" type veth peer name "sb$suf" netns "$B"
	ip -n "$A" addr add $AA/24 dev "sa$suf"
	ip -n "$B" addr add $AB/24 dev "sb$suf"
	local x
	for x in "$A" "$B"; do ip -n "$x" link set lo up; done
	ip -n "$A" link set "sa$suf" up
	ip -n "$B" link set "sb$suf" up
	ip netns exec "$B" sysctl -qw net.ipv4.ip_local_port_range="1024 65535"
	ip netns exec "$A" sysctl -qw net.core.somaxconn=65535
	sleep 1
}

# bg NAME NS CMD...: in a process group of its own
bg() {
	local name=$1 ns=$2
	shift 2
	ip netns exec "$ns" setsid timeout -k 5 "$row_to" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" </dev/null &
	pids+=($!)
}

mem() { awk -v k="$1" '$1 == k":" {print $2}' /proc/meminfo; }
slab() { awk '$1 == "Slab:" {print $2}' /proc/meminfo; }
hub_pids() { pgrep -f "^$build/rshared" | tr '\n' ' '; }
hub_rss() {
	local t=0 p
	for p in $(hub_pids); do t=$((t + $(awk '/^VmRSS/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0))); done
	echo "$t"
}
hub_ticks() {
	local t=0 p
	for p in $(hub_pids); do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done
	echo "$t"
}

row() {
	local sys=$1 n=$2 pre=() ports=() p i x per free0 shm0 slab0 pt0 t0 deadline lines
	nodes
	if [[ $sys == rshare ]]; then
		pre=("$build/rshare" run --)
		for x in "$A" "$B"; do bg "hub-$x" "$x" env RSHARE_TRANSPORT=soft "$build/rshared"; done
		sleep 1
	fi
	for ((p = 0; p < nports; p++)); do ports+=($((7800 + p))); done
	bg server "$A" "${pre[@]}" "$mc" server -w "$workers" "${ports[@]}"
	sleep 1
	sync
	free0=$(mem MemFree) shm0=$(mem Shmem) slab0=$(slab) pt0=$(mem PageTables) t0=$(hub_ticks)
	per=$((n / procs))
	for ((i = 0; i < procs; i++)); do
		bg "client$i" "$B" "${pre[@]}" "$mc" client -t -H -n "$per" $AA "${ports[@]}"
	done
	deadline=$((SECONDS + row_to))
	while ((SECONDS < deadline)); do
		lines=$(cat "$tmp"/client*.out 2>/dev/null | grep -c '^open=')
		((lines >= procs)) && break
		sleep 1
	done
	sleep 2
	local free1 shm1 slab1 pt1 rss ticks opened=0 echoed=0 errs=0 omax=0 emax=0 first=none l
	free1=$(mem MemFree) shm1=$(mem Shmem) slab1=$(slab) pt1=$(mem PageTables) rss=$(hub_rss) ticks=$(($(hub_ticks) - t0))
	for ((i = 0; i < procs; i++)); do
		l=$(grep '^open=' "$tmp/client$i.out")
		[[ $l =~ open=([0-9]+)\ echoed=([0-9]+)\ errors=([0-9]+)\ first=([A-Z0-9a-z]+)\ open_ms=([0-9]+)\ echo_ms=([0-9]+) ]] || {
			first="client $i: ${l:-no line} $(tail -1 "$tmp/client$i.err")"
			continue
		}
		opened=$((opened + BASH_REMATCH[1])) echoed=$((echoed + BASH_REMATCH[2]))
		errs=$((errs + BASH_REMATCH[3]))
		[[ ${BASH_REMATCH[4]} != none ]] && first=${BASH_REMATCH[4]}
		((BASH_REMATCH[5] > omax)) && omax=${BASH_REMATCH[5]}
		((BASH_REMATCH[6] > emax)) && emax=${BASH_REMATCH[6]}
	done
	# a new process's first connection and echo while the N are held: the
	# hubs answer it (its HELLO, its CONNECT) whatever the N cost them
	local one=FAIL
	l=$(ip netns exec "$B" timeout 30 "${pre[@]}" "$mc" client -t -n 1 $AA "${ports[0]}" 2>/dev/null)
	[[ $l =~ ^open=1\ echoed=1\ .*open_ms=([0-9]+)\ echo_ms=([0-9]+) ]] &&
		one=$((BASH_REMATCH[1] + BASH_REMATCH[2]))
	local note=
	if [[ $sys == rshare ]]; then
		local st fb lc
		st=$(ip netns exec "$B" timeout 60 "$build/rshare" stat --json 2>/dev/null)
		fb=$(jq -r '.counters.fallback_connects' <<<"$st" 2>/dev/null)
		lc=$(jq -r '[.links[].connections_total] | add // 0' <<<"$st" 2>/dev/null)
		note="link carried ${lc:-?}, fell back ${fb:-?}"
	fi
	printf '| %s | %s | %s / %s | %.1f | %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %s %s |\n' \
		"$n" "$sys" "$opened" "$echoed" "$(bc -l <<<"$omax / 1000")" "$emax" "$one" \
		"$(bc -l <<<"($free0 - $free1) / $n")" "$(bc -l <<<"($shm1 - $shm0) / $n")" \
		"$(bc -l <<<"($slab1 - $slab0) / $n")" "$(bc -l <<<"($pt1 - $pt0) / $n")" "$(bc -l <<<"$rss / 1024")" \
		"$(bc -l <<<"$ticks / $(getconf CLK_TCK)")" "$([[ $first != none ]] && echo "first error $first;")" "$note"
	for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
	sleep 1
	for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done
	wait 2>/dev/null
	pids=()
	ip netns del "$A"
	ip netns del "$B"
	sleep 1
}

command -v bc >/dev/null || die "needs bc"
command -v jq >/dev/null || die "needs jq"
echo "| N | system | opened / echoed | open s | echo ms | 1 more ms | KiB/conn | shmem | slab | pt | hub RSS MiB | hub CPU s | notes |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for n in $ns_list; do
	for sys in $systems; do
		say "$sys, $n connections"
		row "$sys" "$n"
	done
done

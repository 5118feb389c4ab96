# shellcheck shell=bash disable=SC2034,SC2154 # variables shared with the sourcing script
# common.bash - what the benchmark scripts of tests/bench share; sourced by
# compare.sh and suite.sh, not run.
#
# Sets where the programs are ($here, $repo, $build, $bench, $rshare_cmd,
# $rshared, $preload) and gives:
#   say, die              messages on stderr, prefixed with $prog
#   build_bench           builds build/bench/bench (and wakecost) when missing or stale
#   bench_tmp             the scratch folder $tmp, removed on exit (trap);
#                         BENCH_KEEP=DIR keeps a copy of it
#   bg, alive, reap, stop, wait_gone, finish
#                         background steps, each in a process group of its
#                         own (timeout's), bounded by $lifetime seconds,
#                         their output in $tmp/NAME.out and $tmp/NAME.err;
#                         all in the script's session, as programs started
#                         from one shell are, so that where the scheduler
#                         groups processes by session (autogroups) servers,
#                         hubs and clients are one group, as a hub that the
#                         library starts is with its programs.
#                         BENCH_SESSIONS=1 gives each a session of its own
#                         ($own_session), a scheduling group of its own
#                         there: hubs run as services are so (rshare(7),
#                         BUGS)
#   wait_line, kv, why, show_err
#                         reading that output
#   median, least         the median, the least of a list of numbers
#   num, quotient         is it a number; A / B with two decimals
#   pick_addrs            the server and client addresses ($srv_addr,
#                         $cli_addr): 10.77.0.1 / 10.77.0.2 where this machine
#                         has both (the guest of tests/vm/run.sh), else
#                         127.0.0.1 / 127.0.0.2 (BENCH_SRV_ADDR,
#                         BENCH_CLI_ADDR override)
#   bench_servers         bench servers in the background
#   start_hub, hub_json, json_count
#                         an rshare hub started here and its counters
# The sourcing script sets $prog before and $lifetime and $step_to before
# starting anything; it may define cleanup_more, which the exit trap runs
# after the process groups are gone and before $tmp is removed.

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo=$(cd "$here/../.." && pwd -P)
build=${RSHARE_BUILD:-$repo/build}
bench=$build/bench/bench
wakecost=$build/bench/wakecost
rshare_cmd=$build/rshare
rshared=$build/rshared
preload=${BENCH_RSOCKETS_PRELOAD:-/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so}

say() { echo "$prog: $*" >&2; }
die() { say "$*"; exit 2; }

# ---- the program: build it when it is missing or older than its source ----
build_bench() {
	local src=("$here/bench.c" "$here/bench_server.c" "$here/bench_client.c") stale=0 f
	for f in "${src[@]}" "$here/bench.h"; do
		[[ $f -nt $bench ]] && stale=1
	done
	if [[ ! -x $bench || $stale == 1 ]]; then
		if command -v "${CC:-cc}" >/dev/null; then
			say "building $bench"
			mkdir -p "$build/bench"
			"${CC:-cc}" -O2 -Wall -Wextra -Werror -pthread -o "$bench" "${src[@]}" ||
				die "cannot build $bench"
		fi
		[[ -x $bench ]] || die "$bench is missing and there is no compiler here: run 'make -C tests/bench' first"
	fi
	if [[ (! -x $wakecost || $here/wakecost.c -nt $wakecost) ]] && command -v "${CC:-cc}" >/dev/null; then
		"${CC:-cc}" -O2 -Wall -Wextra -Werror -pthread -o "$wakecost" "$here/wakecost.c" || say "cannot build $wakecost"
	fi
}

declare -A groups # process groups started here (timeout's) and not yet reaped
own_session=()
[[ ${BENCH_SESSIONS:-} == 1 ]] && own_session=(setsid)
bench_tmp() {
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench.XXXXXX")
	trap cleanup EXIT
	trap 'exit 130' INT TERM
}
# shellcheck disable=SC2317 # run by the trap
cleanup() {
	local g
	for g in "${!groups[@]}"; do
		kill -TERM -- "-$g" 2>/dev/null
	done
	sleep 0.2
	for g in "${!groups[@]}"; do
		kill -KILL -- "-$g" 2>/dev/null
	done
	wait 2>/dev/null
	declare -F cleanup_more >/dev/null && cleanup_more
	if [[ -n ${BENCH_KEEP:-} ]]; then
		mkdir -p "$BENCH_KEEP" && cp -r "$tmp"/. "$BENCH_KEEP"/ && say "logs kept in $BENCH_KEEP"
	fi
	rm -rf "$tmp"
}

# bg NAME CMD...: start CMD in a process group of its own (timeout makes
# one), bounded; its pid in $bg_pid
bg() {
	local name=$1
	shift
	"${own_session[@]}" timeout -k 5 "$lifetime" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" </dev/null &
	bg_pid=$!
	groups[$bg_pid]=1
}
alive() { # PID: running, not a zombie
	local st
	read -r _ _ st _ 2>/dev/null <"/proc/$1/stat" || return 1
	[[ $st != Z ]]
}
reap() { # PID: wait for it (it has ended or been killed) and forget it
	wait "$1" 2>/dev/null
	unset "groups[$1]"
}
finish() { # PID: wait for it to end by itself; its exit status
	local rc
	wait "$1" 2>/dev/null
	rc=$?
	unset "groups[$1]"
	return $rc
}
stop() { # PID...: end these process groups (those not reaped yet) and reap them
	local p
	for p in "$@"; do
		[[ -n ${groups[$p]:-} ]] && kill -TERM -- "-$p" 2>/dev/null
	done
	for p in "$@"; do
		[[ -n ${groups[$p]:-} ]] || continue
		wait_gone "$p" 5 || kill -KILL -- "-$p" 2>/dev/null
		reap "$p"
	done
}
wait_gone() { # PID SECS
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		alive "$1" || return 0
		sleep 0.1
	done
	return 1
}
# wait_line FILE PATTERN SECS [PID]: FILE has a line matching PATTERN
wait_line() {
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		grep -qE -- "$2" "$1" 2>/dev/null && return 0
		if [[ -n ${4:-} ]] && ! alive "$4"; then
			grep -qE -- "$2" "$1" 2>/dev/null
			return
		fi
		sleep 0.1
	done
	return 1
}
kv() { # FILE KEY: the value of KEY= in FILE's first line that has it
	grep -oE "(^| )$2=[^ ]*" "$1" 2>/dev/null | head -n 1 | cut -d= -f2
}
# why FILE...: a short reason for a failed step, from the error lines
why() {
	local f line
	for f in "$@"; do
		line=$(grep -m 1 -E '^error ' "$f" 2>/dev/null) || continue
		line=${line#error }
		line=${line#mode=* }
		echo "${line// /, }"
		return
	done
	echo "no output"
}
show_err() { # NAME FILE...: the tail of the logs of a failed step, on stderr
	local f
	say "$1 failed:"
	for f in "${@:2}"; do
		[[ -s $f ]] && tail -n 5 "$f" | sed "s|^|    $(basename "$f"): |" >&2
	done
}
median() { # VALUES...: their median (the mean of the middle two when even)
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
		if (NR == 0) exit
		m = int((NR + 1) / 2)
		if (NR % 2) { print v[m]; exit }
		x = sprintf("%.3f", (v[m] + v[m + 1]) / 2); sub(/0+$/, "", x); sub(/\.$/, "", x); print x }'
}

least() { # VALUES...: the least of them
	printf '%s\n' "$@" | sort -g | head -n 1
}
num() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]]; }
# quotient A B: A / B with two decimals; false, printing nothing, when
# either is not a number or B is 0
quotient() {
	num "$1" && num "$2" && [[ ! $2 =~ ^0(\.0*)?$ ]] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'
}

pick_addrs() {
	local local_addrs
	local_addrs=$(ip -o -4 addr show 2>/dev/null | awk '{print $4}' | cut -d/ -f1)
	if [[ -z ${BENCH_SRV_ADDR:-} ]] && grep -qx 10.77.0.1 <<<"$local_addrs" && grep -qx 10.77.0.2 <<<"$local_addrs"; then
		srv_addr=10.77.0.1 cli_addr=10.77.0.2
	else
		srv_addr=${BENCH_SRV_ADDR:-127.0.0.1} cli_addr=${BENCH_CLI_ADDR:-127.0.0.2}
	fi
}

# bench_servers NAME PORT COUNT ADDR [PREFIX...]: COUNT bench servers on
# ADDR, ports PORT..., each run under the command PREFIX (a namespace, a
# wrapper; none: as it is), logs in $tmp/NAME0.*, NAME1.*...; their pids in
# srv_pids; false when one did not come up (all stopped, the reason in
# $srv_fail)
bench_servers() {
	local name=$1 port=$2 count=$3 addr=$4 i
	shift 4
	srv_pids=()
	for ((i = 0; i < count; i++)); do
		bg "$name$i" "$@" "$bench" server $((port + i)) -a "$addr" -t "$lifetime"
		srv_pids+=("$bg_pid")
	done
	for ((i = 0; i < count; i++)); do
		if ! wait_line "$tmp/$name$i.out" 'ready=1' "$step_to" "${srv_pids[i]}"; then
			show_err "$name$i" "$tmp/$name$i.out" "$tmp/$name$i.err"
			srv_fail="server: $(why "$tmp/$name$i.err")"
			stop "${srv_pids[@]}"
			return 1
		fi
	done
}

# hub_json NSEXEC NAME: `rshare stat --json` of the hub NAME, asked from
# within NSEXEC (a command prefix such as "ip netns exec NS", or empty)
hub_json() {
	# shellcheck disable=SC2086 # NSEXEC is words
	RSHARE_HUB_NAME=$2 timeout 20 $1 "$rshare_cmd" stat --json 2>/dev/null
}
# json_count KEY: the number after "KEY": in the JSON on stdin; nothing when absent
json_count() {
	grep -oE "\"$1\": ?[0-9]+" | head -n 1 | grep -oE '[0-9]+$'
}
# start_hub LABEL NSEXEC NAME ARGS...: start `rshared ARGS` under NSEXEC in
# the background as hub NAME, its logs in $tmp/LABEL.*, its pid in $bg_pid;
# true once it answers `rshare stat`, else false with the reason in $hub_fail
start_hub() {
	local label=$1 nsx=$2 name=$3 i
	shift 3
	# shellcheck disable=SC2086 # NSEXEC is words
	bg "$label" $nsx env RSHARE_HUB_NAME="$name" "$rshared" "$@"
	for ((i = 0; i < step_to * 10; i++)); do
		hub_json "$nsx" "$name" >/dev/null && return 0
		alive "$bg_pid" || break
		sleep 0.1
	done
	show_err "$label" "$tmp/$label.err"
	hub_fail="$label: $(head -n 1 "$tmp/$label.err" 2>/dev/null | sed "s/^rshared: //" | cut -c1-80)"
	return 1
}

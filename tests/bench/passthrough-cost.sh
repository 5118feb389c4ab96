#!/usr/bin/env bash
# passthrough-cost.sh - what librshare.so costs calls on descriptors that
# are not rshare sockets, in instructions per call, counted by callgrind
# (user-space instructions; the system calls themselves are the same).
#
# Usage: tests/bench/passthrough-cost.sh [ROUNDS]   (after make)
# Runs build/bench/passthrough (5 calls a round: write, read, send, poll,
# recv on a unix socketpair) with 0 and ROUNDS rounds, each plain and with
# the library preloaded, and prints the instructions per call of each and
# their difference.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=${RSHARE_BUILD:-$ROOT/build}
N=${1:-100000}
make -s -C "$ROOT/tests/bench" "$B/bench/passthrough" OUT="$B/bench" >&2
command -v valgrind >/dev/null || { echo "passthrough-cost: needs valgrind" >&2; exit 1; }
ir() { # ROUNDS [preload]: instructions callgrind collected
	local pre=()
	[[ ${2:-} ]] && pre=(env LD_PRELOAD="$B/librshare.so" RSHARE_NO_AUTOSTART=1)
	"${pre[@]}" valgrind --tool=callgrind --callgrind-out-file=/dev/null "$B/bench/passthrough" "$1" 2>&1 |
		sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
p0=$(ir 0) pN=$(ir "$N") l0=$(ir 0 1) lN=$(ir "$N" 1)
awk -v p0="$p0" -v pN="$pN" -v l0="$l0" -v lN="$lN" -v n="$N" 'BEGIN {
	plain = (pN - p0) / (5 * n); pre = (lN - l0) / (5 * n)
	printf "instructions per call on a descriptor that is not an rshare socket (callgrind, %d calls):\n", 5 * n
	printf "  plain libc            %6.1f\n", plain
	printf "  with librshare.so     %6.1f\n", pre
	printf "  added by the library  %6.1f\n", pre - plain
}'

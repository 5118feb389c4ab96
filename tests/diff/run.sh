#!/usr/bin/env bash
# tests/diff/run.sh [SECS] - the differential test for as long as asked:
# random seeds of tests/diff-stream.c, each run on kernel TCP and over
# rshare (across two network namespaces on a soft link, and within one on
# the same-node path), transcripts compared.  `make fuzz` runs it for
# FUZZ_SECS; `make test` runs a fixed set (tests/diff-stream-matches-
# kernel-tcp.bats).  Prints one line per divergent seed, with the
# difference in build/diff/SEED-WHERE.diff, and "seeds N, divergent N" at
# the end; exits 1 when a seed diverged.  A divergence that is fixed goes
# into tests/diff/regressions.  DIFF_FLAGS adds flags of diff-stream to
# every run (-T threads, -X more calls); DIFF_FLAGS=mixed draws them per
# seed.  As root (it makes namespaces).
set -u
cd "$(dirname "$0")/../.."
secs=${1:-60}
B=${RSHARE_BUILD:-$PWD/build}
out=$PWD/build/diff
mkdir -p "$out"
suf=$$
A=rsdA-$suf N=rsdB-$suf
addr_a=10.198.0.1 addr_b=10.198.0.2

cleanup() {
	for ns in "$A" "$N"; do
		ip netns exec "$ns" "$B/rshare" hub stop >/dev/null 2>&1
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
		ip netns del "$ns" 2>/dev/null
	done
}
trap cleanup EXIT

ip netns add "$A" && ip netns add "$N" || exit 1
ip -n "$A" link set lo up
ip -n "$N" link set lo up
ip link add "dva$suf" netns "$A" type veth peer name "dvb$suf" netns "$N"
ip -n "$A" addr add $addr_a/24 dev "dva$suf"
ip -n "$N" addr add $addr_b/24 dev "dvb$suf"
ip -n "$A" link set "dva$suf" up
ip -n "$N" link set "dvb$suf" up
for ns in "$A" "$N"; do
	ip netns exec "$ns" setsid "$B/rshared" >"$out/hub-$ns.log" 2>&1 </dev/null &
done
sleep 1

# one SEED WHERE SERVER_NS CLIENT_NS PORT [rshare]: its sorted transcript
# (diff-stream's flags in $flags)
one() {
	local seed=$1 where=$2 sns=$3 cns=$4 port=$5 pre=()
	[[ ${6:-} == rshare ]] && pre=("$B/rshare" run --)
	ip netns exec "$sns" timeout 120 "${pre[@]}" "$B/tests/diff-stream" $flags -s "$seed" "$port" \
		>"$out/srv.out" 2>/dev/null &
	local sp=$!
	for _ in $(seq 50); do grep -q '^ready$' "$out/srv.out" 2>/dev/null && break; sleep 0.1; done
	ip netns exec "$cns" timeout 120 "${pre[@]}" "$B/tests/diff-stream" $flags -c "$seed" $addr_a "$port" \
		>"$out/cli.out" 2>/dev/null
	wait "$sp" 2>/dev/null
	grep -hv '^ready$' "$out/srv.out" "$out/cli.out" | sort
}

end=$((SECONDS + secs))
n=0 bad=0 port=20000
while ((SECONDS < end)); do
	seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
	n=$((n + 1))
	flags=${DIFF_FLAGS:-}
	if [[ $flags == mixed ]]; then
		mix=("" -X -T "-T -X")
		flags=${mix[seed % 4]}
	fi
	for where in nodes node; do
		port=$((port + 2))
		((port > 60000)) && port=20002
		if [[ $where == nodes ]]; then cns=$N; else cns=$A; fi
		one "$seed" "$where" "$A" "$cns" $port >"$out/k.txt"
		# a reference run that printed nothing failed as a run (it never
		# does otherwise: every program prints): once more, on a new port
		[[ -s $out/k.txt ]] || one "$seed" "$where" "$A" "$cns" $((port += 2)) >"$out/k.txt"
		one "$seed" "$where" "$A" "$cns" $((port + 1)) rshare >"$out/r.txt"
		if ! diff -u "$out/k.txt" "$out/r.txt" >"$out/$seed-$where.diff"; then
			echo "divergent: seed $seed ($where${flags:+, $flags}): build/diff/$seed-$where.diff"
			bad=$((bad + 1))
		else
			rm -f "$out/$seed-$where.diff"
		fi
	done
done
echo "seeds $n, divergent $bad"
((bad == 0))

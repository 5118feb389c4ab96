#!/usr/bin/env bats
# The soak (tests/soak.sh, `make soak`), short: 20 s, 16 processes (4
# server workers, 12 client processes), 400 concurrent connections from
# node B to a pre-fork echo server on node A that re-forks killed workers,
# random message sizes, a random worker killed every ~2 s.  No byte is
# corrupted; no connection ends without a reset; the clients see exactly as
# many resets as the killed workers held connections; nothing falls back
# to kernel TCP; each hub's RSS at the end of the traffic is at most twice
# its post-warm-up sample plus 8 MiB.

load lib

setup() {
	rs_require respawn-server soak-client
	SOAK_TMP=$BATS_TEST_TMPDIR/soak
	mkdir -p "$SOAK_TMP"
}

teardown() {
	# soak.sh tears its nodes down; this only covers a soak.sh killed hard
	local ns p
	if [[ -f $SOAK_TMP/nodes ]]; then
		for ns in $(cat "$SOAK_TMP/nodes"); do
			ip netns list | grep -qw "$ns" || continue
			for p in $(ip netns pids "$ns"); do
				kill -KILL "$p" 2>/dev/null
			done
			ip netns del "$ns"
		done
	fi
	return 0
}

@test "soak, short: 400 connections, 16 processes, worker kills: no byte corrupted, nothing lost, hub RSS bounded" {
	run timeout -k 10 200 env SOAK_SECS=20 SOAK_CONNS=400 SOAK_PROCS=16 SOAK_WORKERS=4 SOAK_KILL_MS=2000 \
		SOAK_TMP="$SOAK_TMP" bash "$RS_ROOT/tests/soak.sh"
	echo "$output"
	grep '^soak: \(hub RSS\|totals\)' <<<"$output" | sed 's/^/# /' >&3
	[[ $status -eq 0 ]] || rs_fail "soak.sh exit $status"
	local totals rss
	totals=$(grep '^soak: totals: ' <<<"$output")
	[[ $totals =~ \ ([0-9]+)\ kills\;\ ([0-9]+)\ resets\ seen\ \(the\ killed\ workers\ held\ ([0-9]+)\)\;\ 0\ corrupt,\ 0\ lost,\ 0\ errors ]] ||
		rs_fail "totals: $totals"
	((BASH_REMATCH[1] > 0)) || rs_fail "no worker was killed"
	((BASH_REMATCH[2] == BASH_REMATCH[3])) || rs_fail "resets seen ${BASH_REMATCH[2]}, held by the killed ${BASH_REMATCH[3]}"
	rss=$(grep '^soak: hub RSS: ' <<<"$output")
	[[ $rss =~ A\ ([0-9]+)\ kB\ after\ warm-up,\ ([0-9]+)\ kB\ at\ the\ end.*B\ ([0-9]+)\ kB,\ ([0-9]+)\ kB ]] ||
		rs_fail "RSS: $rss"
	# (soak.sh leaves the bound out for an ASan-built hub, and says so)
	if [[ $rss != *"ASan-built hub"* ]]; then
		((BASH_REMATCH[2] <= 2 * BASH_REMATCH[1] + 8192)) || rs_fail "hub A RSS: $rss"
		((BASH_REMATCH[4] <= 2 * BASH_REMATCH[3] + 8192)) || rs_fail "hub B RSS: $rss"
	fi
}

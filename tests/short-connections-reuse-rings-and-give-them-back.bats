#!/usr/bin/env bats
# Short connections, many open at once (tests/bench/aio-echo.py: an
# asyncio echo server and a client of 1,000 connections, at most 100 open
# together, each writing 100,000 bytes, reading them back whole and
# closing) do on rshare what they do on kernel TCP, and reuse the rings of
# the connections before them, as kernel TCP reuses its buffers: a fresh
# ring page faults in the hub and in the programs (7 to 14 us a fault on
# some virtual machines), and the hub kept only 4 MiB of freed rings an
# allocator, so connections beyond 16 at once took fresh pages (23 to 24
# faults a connection in each hub here) and had them punched at their
# close.  Now freed rings are kept up to the pool's recent peak: the hubs
# fault at most 12 pages a connection (3 to 4 here), and once the pool is
# quiet its hub gives the pages back (the hub's resident shared memory
# falls under 4 MiB).  The hubs' stat
# proves the rshare runs took the link or the same-node path.

load lib

setup() {
	command -v python3 >/dev/null || skip "python3 not installed"
	rs_require
	ulimit -n "$(ulimit -Hn)"
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

AIO=$BATS_TEST_DIRNAME/bench/aio-echo.py

# hub_pid NS: the process that is the hub of NS (stat: hub_pid)
hub_pid() { rs_stat "$1" | jq -r '.hub_pid'; }
faults() { awk '{print $10}' "/proc/$1/stat"; }
shmem_kib() { awk '$1 == "RssShmem:" {print $2}' "/proc/$1/status"; }
small_shmem() { (($(shmem_kib "$1") < 4096)); }

# run NAME CLIENT_NS PORT [--rshare]: the client's line, less its seconds, in $out
run_pair() {
	local name=$1 cns=$2 port=$3 pre=${4:-}
	rs_bg "$name-srv" "$NS_A" $pre python3 "$AIO" server $ADDR_A "$port"
	rs_wait_file "$RS_TMP/$name-srv.out" '^ready=1' 1 30
	out=$(RS_TIMEOUT=240 rs_exec "$cns" $pre python3 "$AIO" client $ADDR_A "$port" 1000 100000 100 \
		2>"$RS_TMP/$name-cli.err" | sed 's/ secs=[0-9.]*//') || true
}

@test "short connections, 100 at once across nodes: every byte as on kernel TCP, later ones reuse the rings, a quiet pool gives them back" {
	local want="ok=1000 n=1000 errors=0 first=none" ha hb fa fb
	run_pair k "$NS_B" 7761
	[[ $out == "$want" ]] || rs_fail "kernel TCP: '$out' $(tail -3 "$RS_TMP/k-cli.err")"
	ha=$(hub_pid "$NS_A") hb=$(hub_pid "$NS_B")
	[[ -n $ha && -n $hb ]] || rs_fail "no hub pids ($ha, $hb)"
	fa=$(faults "$ha") fb=$(faults "$hb")
	run_pair r "$NS_B" 7762 --rshare
	[[ $out == "$want" ]] || rs_fail "rshare: '$out', kernel TCP: '$want' $(tail -3 "$RS_TMP/r-cli.err")"
	fa=$((($(faults "$ha") - fa) / 1000)) fb=$((($(faults "$hb") - fb) / 1000))
	echo "# hub page faults a connection: server's $fa, client's $fb" >&3
	((fa <= 12 && fb <= 12)) || rs_fail "the hubs faulted $fa and $fb pages a connection: rings were not reused"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare run took the link" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B |
		fail(($B.links[0].connections_total // 0) >= 1000; "link carried \($B.links[0].connections_total // 0)"),
		fail($B.counters.fallback_connects == 0; "fallback_connects \($B.counters.fallback_connects)")'
	rs_retry 20 small_shmem "$ha" || rs_fail "the server's hub holds $(shmem_kib "$ha") KiB of shared memory, quiet"
	rs_retry 20 small_shmem "$hb" || rs_fail "the client's hub holds $(shmem_kib "$hb") KiB of shared memory, quiet"
}

@test "short connections, 100 at once within one node: every byte as on kernel TCP, on the same-node path" {
	local want="ok=1000 n=1000 errors=0 first=none"
	run_pair k "$NS_A" 7771
	[[ $out == "$want" ]] || rs_fail "kernel TCP: '$out' $(tail -3 "$RS_TMP/k-cli.err")"
	run_pair r "$NS_A" 7772 --rshare
	[[ $out == "$want" ]] || rs_fail "rshare: '$out', kernel TCP: '$want' $(tail -3 "$RS_TMP/r-cli.err")"
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_jq_check "the rshare run took the same-node path" --slurpfile a "$RS_TMP/statA.json" '
		$a[0] as $A |
		fail($A.counters.local_connects >= 1000; "local_connects \($A.counters.local_connects)"),
		fail($A.counters.fallback_connects == 0; "fallback_connects \($A.counters.fallback_connects)")'
}
